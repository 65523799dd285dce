package tfrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/statetest"
	"github.com/allot-dev/allot/schema"
)

// TestLifecycle grows, re-plans, shrinks and destroys the kwok module with
// the real terraform binary, and checks the per-pool summary of each plan
// against the nodes the hook sees.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	r, p := l.applied(ctx, map[string]int64{"a100": 4, "8x-l4": 1})
	// Per pool: its own resource, and per node its instance and the one
	// that confirms its create hook finished.
	want := []terraform.PoolPlan{
		{Cluster: "lab", Pool: "8x-l4", NodesBefore: 0, NodesAfter: 1, Add: 3},
		{Cluster: "lab", Pool: "a100", NodesBefore: 0, NodesAfter: 4, Add: 9},
	}
	if diff := cmp.Diff(want, p.Pools); diff != "" {
		t.Errorf("summary of the first plan (-want +got):\n%s", diff)
	}
	if !p.Changes || p.Add != 12 || p.Change != 0 || p.Destroy != 0 {
		t.Errorf("plan: changes %v, %d/%d/%d; want true, 12 to add", p.Changes, p.Add, p.Change, p.Destroy)
	}
	// Each node's hook ran once: the confirmations ran no hook.
	if diff := cmp.Diff([]string{"create 8x-l4-0", "create a100-0", "create a100-1", "create a100-2", "create a100-3"}, l.log()); diff != "" {
		t.Errorf("hook calls of the first apply (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(names("8x-l4", 0), names("a100", 0, 1, 2, 3)...), l.nodes()); diff != "" {
		t.Errorf("nodes after the first apply (-want +got):\n%s", diff)
	}
	if files, _ := filepath.Glob(filepath.Join(l.dir, PlanFiles)); len(files) != 0 || p.File != "" {
		t.Errorf("the applied plan is still there: %v %q", files, p.File)
	}
	if err := r.Apply(ctx, p, ApplyOptions{}); err == nil {
		t.Errorf("a plan applied twice")
	}

	// Nothing changed: no changes, every pool unchanged.
	p, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Changes || p.Drift != nil {
		t.Errorf("re-plan: changes %v, drift %v; want neither", p.Changes, p.Drift)
	}
	for _, c := range p.Pools {
		if c.Changed() || c.NodesBefore != c.NodesAfter {
			t.Errorf("re-plan changes pool %s: %+v", c.Pool, c)
		}
	}

	l.size(map[string]int64{"a100": 2, "8x-l4": 3})
	p = l.converge(ctx, r)
	want = []terraform.PoolPlan{
		{Cluster: "lab", Pool: "8x-l4", NodesBefore: 1, NodesAfter: 3, Add: 4, Change: 1},
		{Cluster: "lab", Pool: "a100", NodesBefore: 4, NodesAfter: 2, Change: 1, Destroy: 4},
	}
	if diff := cmp.Diff(want, p.Pools); diff != "" {
		t.Errorf("summary of the resize (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(append(names("8x-l4", 0, 1, 2), names("a100", 0, 1)...), l.nodes()); diff != "" {
		t.Errorf("nodes after the resize (-want +got):\n%s", diff)
	}

	p, err = r.Plan(ctx, PlanOptions{Destroy: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Destroy != 12 || p.Add != 0 {
		t.Errorf("destroy plan: %d to add, %d to destroy; want 0 and 12", p.Add, p.Destroy)
	}
	if err := r.Apply(ctx, p, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := l.nodes(); len(got) != 0 {
		t.Errorf("nodes left after destroy: %v", got)
	}
	// Runs that go through never ask for a node twice.
	if got := l.existing(); len(got) != 0 {
		t.Errorf("create hooks found their node there: %v", got)
	}
}

// TestLocked holds the state lock with a running terraform console: plan
// and apply fail with a *LockError that names the holder, and the apply
// leaves the drift record as it was; a speculative plan takes no lock and
// goes through, but cannot be applied. Once the holder is gone, plans go
// through again, and the plan refused under the lock stays refused (a saved
// plan is tried once).
func TestLocked(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	r, _ := l.applied(ctx, map[string]int64{"a100": 1})
	l.size(map[string]int64{"a100": 2})
	pending, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}

	console := l.command("console", "-var", "command=true")
	stdin, err := console.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := console.Start(); err != nil {
		t.Fatal(err)
	}
	defer console.Process.Kill()
	// The console takes the lock at once; wait until it shows.
	info := filepath.Join(l.dir, ".terraform.tfstate.lock.info")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(info); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("terraform console did not take the lock")
		}
	}

	_, err = r.Plan(ctx, PlanOptions{})
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("plan under a held lock: %v (%T), want a *LockError", err, errors.Unwrap(err))
	}
	if le.ID == "" || le.Who == "" || le.Path != "terraform.tfstate" || le.Operation == "" {
		t.Errorf("lock error lacks the holder: %+v", le)
	}
	if !strings.Contains(err.Error(), "force-unlock "+le.ID) {
		t.Errorf("the message does not say how to release the lock: %v", err)
	}
	mark, _ := os.ReadFile(filepath.Join(l.dir, AppliedFile))
	if err := r.Apply(ctx, pending, ApplyOptions{}); !errors.As(err, &le) {
		t.Errorf("apply under a held lock: %v, want a *LockError", err)
	}
	if now, _ := os.ReadFile(filepath.Join(l.dir, AppliedFile)); string(now) != string(mark) {
		t.Errorf("a refused apply changed the drift record: %s -> %s", mark, now)
	}

	spec, err := r.Plan(ctx, PlanOptions{Speculative: true})
	if err != nil {
		t.Fatalf("speculative plan under a held lock: %v", err)
	}
	if c := pool(spec, "a100"); c.NodesBefore != 1 || c.NodesAfter != 2 || spec.File != "" {
		t.Errorf("speculative plan: %+v, file %q", c, spec.File)
	}
	if err := r.Apply(ctx, spec, ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "speculative") {
		t.Errorf("apply of a speculative plan: %v", err)
	}

	stdin.Close()
	if err := console.Wait(); err != nil {
		t.Logf("terraform console: %v", err)
	}
	p, err := r.Plan(ctx, PlanOptions{})
	if err != nil || p.Drift != nil {
		t.Fatalf("plan after the lock was released: drift %v, err %v", p.Drift, err)
	}
	if err := p.Discard(); err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, pending, ApplyOptions{}); err == nil {
		t.Errorf("the plan refused under the lock applied afterwards: it applies once")
	}
	if diff := cmp.Diff(names("a100", 0), l.nodes()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

// TestHookFailure makes the hook fail for one node: apply returns a
// *HookError naming that node's resource; once the hook works again, the next
// plan and apply create it and nothing else twice.
func TestHookFailure(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	l.size(map[string]int64{"a100": 3})
	r := l.runner(ctx)
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	l.touch("fail-a100-2")
	p, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Apply(ctx, p, ApplyOptions{})
	var he *HookError
	if !errors.As(err, &he) {
		t.Fatalf("apply with a failing hook: %v, want a *HookError", err)
	}
	if he.Resource != `terraform_data.a100_nodes["a100-2"]` || !strings.Contains(he.Output, "cannot reach a100-2") {
		t.Errorf("hook error: %+v", he)
	}
	if diff := cmp.Diff(names("a100", 0, 1), l.nodes()); diff != "" {
		t.Errorf("nodes after the failed apply (-want +got):\n%s", diff)
	}

	l.remove("fail-a100-2")
	l.log()
	p = l.converge(ctx, r)
	// a100-2 failed (tainted): it is created again. The apply stopped
	// before it confirmed a100-0 and a100-1: their hooks run again, resumed.
	if c := pool(p, "a100"); c.NodesBefore != 2 || c.NodesAfter != 3 || c.Resumed != 2 {
		t.Errorf("summary after the failure: %+v, want 2 -> 3 nodes, 2 resumed", c)
	}
	if diff := cmp.Diff([]string{"create a100-0 resumed", "create a100-1 resumed", "create a100-2"}, l.log()); diff != "" {
		t.Errorf("hook calls after the failure (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(names("a100", 0, 1), l.existing()); diff != "" {
		t.Errorf("create hooks that found their node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(names("a100", 0, 1, 2), l.nodes()); diff != "" {
		t.Errorf("nodes after the retry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(names("a100", 0, 1, 2), l.state()); diff != "" {
		t.Errorf("node instances in the state (-want +got):\n%s", diff)
	}
}

// TestBinary checks the binary: missing (not on PATH, or not at the path
// given), too old, and not terraform at all.
func TestBinary(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	_, err := New(ctx, "lab", l.dir, WithBinary(filepath.Join(l.dir, "no-terraform")))
	var be *BinaryError
	if !errors.As(err, &be) {
		t.Errorf("missing binary: %v, want a *BinaryError", err)
	}
	t.Run("PATH without terraform", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := New(ctx, "lab", l.dir)
		if !errors.As(err, &be) || be.Path != "terraform" || !strings.Contains(err.Error(), "install Terraform") {
			t.Errorf("no terraform on PATH: %v, want a *BinaryError that says what to do", err)
		}
	})

	// A terraform that reports an old version, as terraform 1.3 does.
	old := filepath.Join(l.hook, "terraform")
	l.writeFile(old, "#!/bin/sh\necho '{\"terraform_version\": \"1.3.9\", \"platform\": \"linux_amd64\", \"provider_selections\": {}}'\n", 0o755)
	_, err = New(ctx, "lab", l.dir, WithBinary(old))
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Found != "1.3.9" || ve.Min != "1.5.0" {
		t.Errorf("old binary: %v, want a *VersionError for 1.3.9", err)
	}

	// Something that is not terraform at all.
	_, err = New(ctx, "lab", l.dir, WithBinary("/bin/false"))
	if !errors.As(err, &be) {
		t.Errorf("a binary that is not terraform: %v, want a *BinaryError", err)
	}
}

// TestProviderFailure inits a gke module with an empty provider mirror: the
// provider cannot be installed, without touching the network.
func TestProviderFailure(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	mirror := filepath.Join(l.hook, "mirror")
	if err := os.Mkdir(mirror, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(l.hook, "mirror.rc")
	l.writeFile(rc, `provider_installation {
  filesystem_mirror {
    path = "`+mirror+`"
  }
}
`, 0o644)
	l.writeFile(filepath.Join(l.dir, terraform.ModuleFile), `{"terraform": {"required_providers": {"google": {"source": "hashicorp/google", "version": ">= 6.0"}}}}`, 0o644)
	r, err := New(ctx, "gke", l.dir, WithEnv(map[string]string{"TF_CLI_CONFIG_FILE": rc}))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Init(ctx)
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Credentials {
		t.Fatalf("init without the provider: %v, want a *ProviderError", err)
	}
	if !strings.Contains(err.Error(), "hashicorp/google") || !strings.HasPrefix(err.Error(), "terraform init of cluster gke: provider failure: ") {
		t.Errorf("message: %v", err)
	}
}

// TestDrift changes the state outside allot (a terraform apply of its own):
// the next plan reports the drift, Apply refuses the plan until told to
// correct it, and a saved plan made before the outside change is refused as
// stale.
func TestDrift(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	r, _ := l.applied(ctx, map[string]int64{"a100": 2})

	l.size(map[string]int64{"a100": 3})
	stale, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stale.Drift != nil {
		t.Fatalf("drift before anything changed: %v", stale.Drift)
	}
	// Someone replaces a node by hand.
	cmd := l.command("apply", "-auto-approve", "-input=false", "-no-color",
		"-var", "command="+filepath.Join(l.hook, "hook.sh"), `-replace=terraform_data.a100_nodes["a100-0"]`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("outside apply: %v\n%s", err, out)
	}

	err = r.Apply(ctx, stale, ApplyOptions{CorrectDrift: true})
	var de *DriftError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, "since the plan was made") {
		t.Fatalf("applying a stale plan: %v, want a *DriftError", err)
	}

	p, err := r.Plan(ctx, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Drift == nil || !strings.Contains(p.Drift.Reason, "changed outside allot") {
		t.Fatalf("drift after an outside apply: %v", p.Drift)
	}
	if err := r.Apply(ctx, p, ApplyOptions{}); !errors.As(err, &de) {
		t.Fatalf("apply of a drifted plan: %v, want a *DriftError", err)
	}
	if err := r.Apply(ctx, p, ApplyOptions{CorrectDrift: true}); err != nil {
		t.Fatalf("apply correcting the drift: %v", err)
	}
	if diff := cmp.Diff(names("a100", 0, 1, 2), l.nodes()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if p, err := r.Plan(ctx, PlanOptions{}); err != nil || p.Drift != nil || p.Changes {
		t.Errorf("plan after the correction: drift %v, changes %v, err %v", p.Drift, p.Changes, err)
	}
}

// blockedApply starts an apply that grows a100 from 1 to 4 nodes and blocks
// in the hook of a100-2, returning once the hook is blocked and, with the
// local backend, once the state records the three new nodes: the hook of
// a100-3 is slow, so that Terraform writes the state when a100-2's hook has
// started (Terraform writes the state as each node's apply ends).
func blockedApply(t *testing.T, l *lab, ctx context.Context, r *Module) <-chan error {
	t.Helper()
	l.touch("block-a100-2")
	l.touch("slow-a100-3")
	l.size(map[string]int64{"a100": 4})
	p, err := r.Plan(context.Background(), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Apply(ctx, p, ApplyOptions{}) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(l.hook, "blocked-a100-2"))
		if err == nil && (l.backend.Type != "" || slices.Equal(l.stateFile(), names("a100", 0, 1, 2, 3))) {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("apply ended before the hook blocked: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hook did not block (nodes in the state: %v)", l.stateFile())
		}
	}
}

// afterInterruption unblocks the hook and checks that a new plan and apply,
// with a new runner as after a restart, converge: every node once, no lock.
func afterInterruption(t *testing.T, l *lab) *Plan {
	t.Helper()
	l.remove("block-a100-2")
	ctx := context.Background()
	p := l.converge(ctx, l.runner(ctx))
	if c := pool(p, "a100"); c.NodesAfter != 4 {
		t.Errorf("summary after the interruption: %+v", c)
	}
	if diff := cmp.Diff(names("a100", 0, 1, 2, 3), l.nodes()); diff != "" {
		log, _ := os.ReadFile(filepath.Join(l.hook, "log"))
		t.Errorf("nodes after the restart (-want +got):\n%s\nhook log:\n%s\nplan: %+v", diff, log, p.Pools)
	}
	if diff := cmp.Diff(names("a100", 0, 1, 2, 3), l.state()); diff != "" {
		t.Errorf("node instances in the state (-want +got):\n%s", diff)
	}
	return p
}

// TestCancelMidApply cancels the context while a hook runs: terraform stops
// cleanly (state written, lock released) and the next run converges.
func TestCancelMidApply(t *testing.T) {
	l := newLab(t)
	r, _ := l.applied(context.Background(), map[string]int64{"a100": 1}, WithWaitDelay(20*time.Second))

	ctx, cancel := context.WithCancel(context.Background())
	done := blockedApply(t, l, ctx, r)
	start := time.Now()
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled apply: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the cancelled apply took %v to stop", d)
	}
	if _, err := os.Stat(filepath.Join(l.dir, ".terraform.tfstate.lock.info")); err == nil {
		t.Errorf("the lock is still there after a clean stop")
	}
	afterInterruption(t, l)
}

// TestKillMidApply kills terraform (SIGKILL, as when the manager's pod dies)
// while the create hook of a100-2 runs: Terraform has a100-2 in its state
// already. The next run finds no held lock (the stale lock file of the local
// backend is no lock) and runs the create hook of a100-2 again, resumed, so
// the pool converges without a missing or a duplicate node.
func TestKillMidApply(t *testing.T) {
	l := newLab(t)
	r, _ := l.applied(context.Background(), map[string]int64{"a100": 1})

	done := blockedApply(t, l, context.Background(), r)
	pid := terraformPID(t, l.dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a killed apply reported success")
	}
	if _, err := os.Stat(filepath.Join(l.dir, ".terraform.tfstate.lock.info")); err != nil {
		t.Errorf("the killed run left no lock file (the test no longer shows a stale lock is harmless): %v", err)
	}
	if !slices.Contains(l.state(), "a100-2") {
		t.Errorf("a100-2 is not in the state after the kill (the test no longer kills inside its hook): %v", l.state())
	}
	l.log()
	p := afterInterruption(t, l)
	if c := pool(p, "a100"); c.Resumed == 0 {
		t.Errorf("no node resumed after the kill: %+v", c)
	}
	if log := l.log(); !slices.Contains(log, "create a100-2 resumed") {
		t.Errorf("the hook of a100-2 did not run again: %v", log)
	}
}

// terraformPID finds the terraform process working in dir.
func terraformPID(t *testing.T, dir string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cwd, err := os.Readlink(filepath.Join(p, "cwd"))
		if err != nil || cwd != dir {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "terraform" && len(args) > 1 && args[1] == "apply" {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return pid
		}
	}
	t.Fatal("no terraform apply process found")
	return 0
}

func pool(p *Plan, name string) terraform.PoolPlan {
	for _, c := range p.Pools {
		if string(c.Pool) == name {
			return c
		}
	}
	return terraform.PoolPlan{}
}

// TestCredentials inits a module whose state backend refuses allot's
// credentials: a *BackendError that says so.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	srv := statetest.New(t)
	srv.Auth = "s3cret"
	l.backend = srv.Backend()
	l.size(map[string]int64{"a100": 1})
	err := l.runner(ctx).Init(ctx)
	var be *BackendError
	if !errors.As(err, &be) || !be.Credentials {
		t.Fatalf("init with a backend that wants credentials: %v, want a *BackendError for credentials", err)
	}
	if !strings.HasPrefix(err.Error(), "terraform init of cluster lab: state backend credentials: ") || !strings.Contains(err.Error(), "requires auth") {
		t.Errorf("message: %v", err)
	}
}

// TestObservedDrift loses a node outside Terraform: the plan given the
// pool's nodes as the cluster has them reports the pool's drift, apply
// refuses it, and a plan that replaces the lost node brings it back.
func TestObservedDrift(t *testing.T) {
	ctx := context.Background()
	l := newLab(t)
	r, _ := l.applied(ctx, map[string]int64{"a100": 3, "8x-l4": 1})
	observed := func() map[schema.PoolName]int64 {
		n := map[schema.PoolName]int64{}
		for _, node := range l.nodes() {
			pool, _, _ := strings.Cut(node, "-")
			if strings.HasPrefix(node, "8x-l4-") {
				pool = "8x-l4"
			}
			n[schema.PoolName(pool)]++
		}
		return n
	}
	if p, err := r.Plan(ctx, PlanOptions{Observed: observed()}); err != nil || p.Drift != nil {
		t.Fatalf("plan before anything is lost: drift %v, err %v", p.Drift, err)
	}

	// The machine behind a100-1 is gone.
	if err := os.Remove(filepath.Join(l.hook, "nodes", "a100-1")); err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, PlanOptions{Observed: observed()})
	if err != nil {
		t.Fatal(err)
	}
	want := &DriftError{Pools: []PoolDrift{{Pool: "a100", State: 3, Observed: 2}}}
	if diff := cmp.Diff(want, p.Drift); diff != "" {
		t.Fatalf("drift (-want +got):\n%s", diff)
	}
	if !strings.Contains(p.Drift.Error(), "pool a100 has 2 nodes in the cluster, 3 in the Terraform state") {
		t.Errorf("message: %v", p.Drift)
	}
	var de *DriftError
	if err := r.Apply(ctx, p, ApplyOptions{}); !errors.As(err, &de) {
		t.Fatalf("apply of a drifted plan: %v, want a *DriftError", err)
	}

	p, err = r.Plan(ctx, PlanOptions{Observed: observed(), Replace: []string{terraform.NodeAddress("a100", "a100-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if c := pool(p, "a100"); c.NodesBefore != 3 || c.NodesAfter != 3 || c.Add != 2 || c.Destroy != 2 {
		t.Errorf("plan replacing the lost node: %+v", c)
	}
	if err := r.Apply(ctx, p, ApplyOptions{CorrectDrift: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(names("8x-l4", 0), names("a100", 0, 1, 2)...), l.nodes()); diff != "" {
		t.Errorf("nodes after the correction (-want +got):\n%s", diff)
	}
	if p, err := r.Plan(ctx, PlanOptions{Observed: observed()}); err != nil || p.Drift != nil || p.Changes {
		t.Errorf("plan after the correction: drift %v, changes %v, err %v", p.Drift, p.Changes, err)
	}
	if got := l.existing(); len(got) != 0 {
		t.Errorf("create hooks found their node there: %v", got)
	}
}
