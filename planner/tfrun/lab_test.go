package tfrun

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
)

// lab is a working directory of the kwok module of testdata/lab, applied with
// the real terraform binary and a hook that keeps one file per node under
// nodes/, so tests see which nodes exist. The hook fails for a node when a
// file fail-<node> exists, blocks (touching blocked-<node>) when
// block-<node> exists, and takes a second when slow-<node> exists. It
// is idempotent, as hooks must be (see package terraform): a create that
// finds its node there leaves it, and notes it in the file "existing".
type lab struct {
	t       *testing.T
	dir     string // the module's working directory
	hook    string // the hook's directory
	cfg     *schema.Config
	plan    *planner.Plan
	backend terraform.Backend
}

const hookScript = `#!/bin/sh
echo "$ALLOT_ACTION $ALLOT_NODE${ALLOT_RESUMED:+ resumed}" >> "$HOOK_DIR/log"
if [ -e "$HOOK_DIR/fail-$ALLOT_NODE" ]; then echo "cannot reach $ALLOT_NODE" >&2; exit 3; fi
if [ -e "$HOOK_DIR/block-$ALLOT_NODE" ]; then touch "$HOOK_DIR/blocked-$ALLOT_NODE"; exec sleep 60; fi
if [ -e "$HOOK_DIR/slow-$ALLOT_NODE" ]; then sleep 1; fi
node="$HOOK_DIR/nodes/$ALLOT_NODE"
case "$ALLOT_ACTION" in
create)
	if [ -e "$node" ]; then echo "$ALLOT_NODE" >> "$HOOK_DIR/existing"; else touch "$node"; fi ;;
delete) rm -f "$node" ;;
esac
`

func terraformBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the terraform binary")
	}
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH (go test -short skips this test): %v", err)
	}
	return bin
}

func newLab(t *testing.T) *lab {
	t.Helper()
	terraformBin(t)
	root := t.TempDir()
	l := &lab{t: t, dir: filepath.Join(root, "lab"), hook: filepath.Join(root, "hook")}
	for _, d := range []string{l.dir, filepath.Join(l.hook, "nodes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.writeFile(filepath.Join(l.hook, "hook.sh"), hookScript, 0o755)
	l.writeFile(filepath.Join(root, "terraform.rc"), "", 0o644)
	cfg, findings := schema.Load(os.DirFS("testdata/lab"))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading testdata/lab: %v", findings)
	}
	l.cfg, l.plan = cfg, planner.Build(cfg)
	return l
}

func (l *lab) writeFile(path, data string, mode os.FileMode) {
	l.t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		l.t.Fatal(err)
	}
}

// env is the environment of terraform in the lab: no CLI configuration (no
// plugin cache, no mirror) and the hook's directory.
func (l *lab) env() map[string]string {
	env := map[string]string{
		"TF_CLI_CONFIG_FILE": filepath.Join(filepath.Dir(l.dir), "terraform.rc"),
		"HOOK_DIR":           l.hook,
		"CHECKPOINT_DISABLE": "1",
	}
	return env
}

// size renders the module with the given node count per pool.
func (l *lab) size(nodes map[string]int64) {
	l.t.Helper()
	for i := range l.plan.Pools {
		l.plan.Pools[i].NodesTarget = nodes[string(l.plan.Pools[i].Pool)]
	}
	m, err := terraform.Module(l.cfg, l.plan, "lab", terraform.Options{Backend: l.backend})
	if err != nil {
		l.t.Fatal(err)
	}
	b, err := terraform.Marshal(m)
	if err != nil {
		l.t.Fatal(err)
	}
	l.writeFile(filepath.Join(l.dir, terraform.ModuleFile), string(b), 0o644)
}

func (l *lab) runner(ctx context.Context, opts ...Option) *Module {
	l.t.Helper()
	opts = append([]Option{
		WithVars(map[string]string{"command": filepath.Join(l.hook, "hook.sh")}),
		WithEnv(l.env()),
	}, opts...)
	r, err := New(ctx, "lab", l.dir, opts...)
	if err != nil {
		l.t.Fatal(err)
	}
	return r
}

// applied is where most tests start: the module sized to nodes, a runner
// with opts, init, and the plan of the first apply.
func (l *lab) applied(ctx context.Context, nodes map[string]int64, opts ...Option) (*Module, *Plan) {
	l.t.Helper()
	l.size(nodes)
	r := l.runner(ctx, opts...)
	if err := r.Init(ctx); err != nil {
		l.t.Fatal(err)
	}
	return r, l.converge(ctx, r)
}

// command is terraform with args, in the lab's directory and environment.
func (l *lab) command(args ...string) *exec.Cmd {
	cmd := exec.Command("terraform", args...)
	cmd.Dir = l.dir
	cmd.Env = cmd.Environ()
	for k, v := range l.env() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// converge plans and applies, and fails the test on any error.
func (l *lab) converge(ctx context.Context, r *Module) *Plan {
	l.t.Helper()
	p, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		l.t.Fatalf("plan: %v", err)
	}
	if err := r.Apply(ctx, p, ApplyOptions{}); err != nil {
		l.t.Fatalf("apply: %v", err)
	}
	return p
}

// nodes lists the nodes the hook created and did not delete.
func (l *lab) nodes() []string {
	l.t.Helper()
	entries, err := os.ReadDir(filepath.Join(l.hook, "nodes"))
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// log returns the hook calls since the last call, sorted.
func (l *lab) log() []string {
	l.t.Helper()
	p := filepath.Join(l.hook, "log")
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		l.t.Fatal(err)
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		l.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	slices.Sort(lines)
	return lines
}

// existing lists the nodes whose create hook found them there.
func (l *lab) existing() []string {
	b, _ := os.ReadFile(filepath.Join(l.hook, "existing"))
	lines := strings.Fields(string(b))
	slices.Sort(lines)
	return lines
}

// touch creates a control file of the hook (fail-<node>, block-<node>).
func (l *lab) touch(name string) { l.writeFile(filepath.Join(l.hook, name), "", 0o644) }

func (l *lab) remove(name string) {
	l.t.Helper()
	if err := os.Remove(filepath.Join(l.hook, name)); err != nil {
		l.t.Fatal(err)
	}
}

// state lists the node instances in the Terraform state.
func (l *lab) state() []string {
	l.t.Helper()
	out, err := l.command("state", "list").CombinedOutput()
	if err != nil {
		l.t.Fatalf("terraform state list: %v\n%s", err, out)
	}
	var nodes []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if _, rest, ok := strings.Cut(line, `_nodes["`); ok {
			nodes = append(nodes, strings.TrimSuffix(rest, `"]`))
		}
	}
	slices.Sort(nodes)
	return nodes
}

// stateFile lists the node instances in the local backend's state file, as
// Terraform last wrote it (without running terraform, which may be busy).
func (l *lab) stateFile() []string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "terraform.tfstate"))
	if err != nil {
		return nil
	}
	var st struct {
		Resources []struct {
			Name      string
			Instances []struct {
				IndexKey string `json:"index_key"`
			}
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil // being written
	}
	var nodes []string
	for _, r := range st.Resources {
		if strings.HasSuffix(r.Name, "_nodes") {
			for _, i := range r.Instances {
				nodes = append(nodes, i.IndexKey)
			}
		}
	}
	slices.Sort(nodes)
	return nodes
}

func names(pool string, indexes ...int) []string {
	var out []string
	for _, i := range indexes {
		out = append(out, pool+"-"+strconv.Itoa(i))
	}
	slices.Sort(out)
	return out
}
