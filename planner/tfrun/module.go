package tfrun

import (
	"archive/zip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
)

// MinVersion is the oldest Terraform the rendered modules run on.
var MinVersion = version.Must(version.NewVersion("1.5.0"))

// Files the runner keeps in the working directory.
const (
	// PlanFiles matches the saved plans that Plan writes and Apply applies
	// and removes, one per plan (allot-<run>.tfplan).
	PlanFiles = "allot-*.tfplan"
	// AppliedFile records the state allot's last apply left (serial and
	// lineage), so that the next plan sees a state changed by someone else.
	AppliedFile = ".allot-applied.json"
)

// Module runs terraform in one working directory that holds a rendered root
// module (terraform.ModuleFile). It is not safe for concurrent use; Terraform's
// state lock keeps separate runners of one state apart.
type Module struct {
	tf        *tfexec.Terraform
	dir       string
	bin       string
	cluster   schema.ClusterName
	vars      map[string]string
	waitDelay time.Duration
	output    io.Writer
	// muted is set while terraform prints what is data, not progress: the
	// state (state pull) and the plan as JSON (show), which hold the values
	// a module marks sensitive in clear. They do not reach output.
	muted atomic.Bool
	env   map[string]string
	// envVars are the TF_VAR_* of allot's environment and of WithEnv, by
	// variable name: terraform-exec keeps them from terraform's environment,
	// so they are passed as -var, for the variables the module declares.
	envVars map[string]string
	// backendConfig are KEY=VALUE settings for terraform init.
	backendConfig []string
}

// Option configures a Module.
type Option func(*Module)

// WithBinary runs the terraform binary at path instead of the one on PATH.
func WithBinary(path string) Option { return func(r *Module) { r.bin = path } }

// WithVars sets the module's input variables (e.g. "command" of a kwok module).
// Variables in terraform.tfvars or *.auto.tfvars of the working directory apply
// too, as they do for terraform itself.
func WithVars(vars map[string]string) Option {
	return func(r *Module) { r.vars = maps.Clone(vars) }
}

// WithWaitDelay is how long a cancelled run may take to stop after it got
// SIGINT (Terraform then finishes the operations in flight, writes the state
// and releases the lock) before it is killed (default 60s).
func WithWaitDelay(d time.Duration) Option { return func(r *Module) { r.waitDelay = d } }

// WithEnv adds environment variables to terraform's environment (which is
// otherwise allot's own, with CHECKPOINT_DISABLE=1 unless it is set), e.g.
// credentials, TF_CLI_CONFIG_FILE or the KUBECONFIG a kwok hook reads.
// TF_VAR_<name>, here or in allot's environment, sets the module's variable
// <name> when the module declares it (as terraform itself would), unless
// WithVars sets it. Other variables terraform-exec manages itself (TF_LOG,
// TF_CLI_ARGS*, ...) are dropped.
func WithEnv(env map[string]string) Option {
	return func(r *Module) {
		if r.env == nil {
			r.env = map[string]string{}
		}
		maps.Copy(r.env, env)
	}
}

// WithBackendConfig passes backend settings (KEY=VALUE) to terraform init
// (-backend-config), e.g. the credentials terraform.Backend.InitConfig keeps
// out of the module.
func WithBackendConfig(kv []string) Option {
	return func(r *Module) { r.backendConfig = append(r.backendConfig, kv...) }
}

// WithOutput streams terraform's stdout and stderr to w (e.g. a log): what
// init, plan and apply print, not the state or the plan's JSON the runner
// reads.
func WithOutput(w io.Writer) Option { return func(r *Module) { r.output = w } }

// New returns a runner of cluster's module in dir. It finds the terraform
// binary and checks its version: a *BinaryError when it is missing or does not
// run, a *VersionError when it is older than MinVersion.
func New(ctx context.Context, cluster schema.ClusterName, dir string, opts ...Option) (*Module, error) {
	r := &Module{dir: dir, cluster: cluster, bin: "terraform", waitDelay: 60 * time.Second}
	for _, o := range opts {
		o(r)
	}
	path, err := exec.LookPath(r.bin)
	if err != nil {
		return nil, &BinaryError{Path: r.bin, Err: err}
	}
	tf, err := tfexec.NewTerraform(dir, path)
	if err != nil {
		return nil, fmt.Errorf("working directory of cluster %s: %w", cluster, err)
	}
	if err := tf.SetWaitDelay(r.waitDelay); err != nil {
		return nil, err
	}
	// allot's environment, without Terraform's calls home (unless asked
	// for), and the options'.
	env := map[string]string{"CHECKPOINT_DISABLE": "1"}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	maps.Copy(env, r.env)
	r.envVars = map[string]string{}
	for k, v := range env {
		if name, ok := strings.CutPrefix(k, "TF_VAR_"); ok && name != "" {
			r.envVars[name] = v
		}
	}
	if err := tf.SetEnv(tfexec.CleanEnv(env)); err != nil {
		return nil, err
	}
	if r.output != nil {
		w := unlessMuted{r}
		tf.SetStdout(w)
		tf.SetStderr(w)
	}
	v, _, err := tf.Version(ctx, true)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &BinaryError{Path: path, Err: err}
	}
	if v.LessThan(MinVersion) {
		return nil, &VersionError{Path: path, Found: v.String(), Min: MinVersion.String()}
	}
	r.tf, r.bin = tf, path
	return r, nil
}

// Init runs terraform init: it installs the providers and configures the
// backend.
func (r *Module) Init(ctx context.Context) error {
	opts := []tfexec.InitOption{tfexec.Upgrade(false)}
	for _, kv := range r.backendConfig {
		opts = append(opts, tfexec.BackendConfig(kv))
	}
	if err := r.tf.Init(ctx, opts...); err != nil {
		return r.fail(ctx, "init", err)
	}
	return nil
}

// Plan is a saved plan and what it does.
type Plan struct {
	Cluster schema.ClusterName
	// File is the saved plan, the only thing Apply applies.
	File string
	// Changes is false when the plan does nothing (terraform plan's
	// detailed exit code 0).
	Changes bool
	// Speculative is set for a plan made for review only (see PlanOptions).
	Speculative bool
	// Pools is what the plan does to each pool of the module.
	Pools []terraform.PoolPlan
	// Add, Change and Destroy count the plan's resource changes, as
	// Terraform's "Plan: x to add, y to change, z to destroy" does.
	Add, Change, Destroy int
	// Drift is set when the real state differs from what allot's last apply
	// left, or a pool's observed size from the state; Apply refuses such a
	// plan unless told to correct the drift.
	Drift *DriftError
	// JSON is terraform show -json of the saved plan.
	JSON *tfjson.Plan

	// base is the state the plan was made on.
	base stateMark
}

// PlanOptions tune a plan.
type PlanOptions struct {
	// Destroy plans the destruction of everything the module manages.
	Destroy bool
	// Speculative makes a plan for review only (allot plan --terraform): it
	// takes no state lock, so that it never stands in the way of an apply,
	// and Apply refuses it.
	Speculative bool
	// Observed is the number of nodes of each pool seen in the cluster
	// (e.g. Node objects with the pool's label). A pool whose count differs
	// from the node count in the Terraform state is reported in Plan.Drift.
	// Pools left out are not compared.
	Observed map[schema.PoolName]int64
	// Replace lists resource instances to replace (terraform plan -replace),
	// e.g. terraform.NodeAddress of an onprem or kwok node that is gone from
	// the cluster but not from the state: replacing it runs its hooks again.
	Replace []string
}

// Plan runs terraform plan into a saved plan file, with the detailed exit
// code, and reads the saved plan back with terraform show -json. A plan made
// on a state that moved since allot's last apply, or whose pools differ from
// opts.Observed, carries a *DriftError in Plan.Drift: Plan succeeds, and
// Apply refuses the plan unless told to correct the drift. Each plan has its
// own file, which Apply removes; a plan that will not be applied can be
// dropped with Discard.
func (r *Module) Plan(ctx context.Context, opts PlanOptions) (p *Plan, err error) {
	run := rand.Text()
	name := strings.Replace(PlanFiles, "*", run, 1)
	args, err := r.planArgs(run, opts)
	if err != nil {
		return nil, err
	}
	args = append(args, tfexec.Out(name))
	file := filepath.Join(r.dir, name)
	defer func() {
		if err != nil || opts.Speculative {
			// Nothing will apply it.
			err = errors.Join(err, removeFile(file))
		}
	}()
	changes, err := r.tf.Plan(ctx, args...)
	if err != nil {
		return nil, r.fail(ctx, "plan", err)
	}
	base, err := r.planBase(ctx, file)
	if err != nil {
		return nil, err
	}
	moved, err := r.stateMoved(base)
	if err != nil {
		return nil, err
	}
	r.muted.Store(true)
	js, err := r.tf.ShowPlanFile(ctx, name)
	r.muted.Store(false)
	if err != nil {
		return nil, r.fail(ctx, "show", err)
	}
	p = summarize(r.cluster, js, opts.Observed)
	p.Changes, p.Speculative, p.base = changes, opts.Speculative, base
	if !opts.Speculative {
		p.File = file
	}
	if moved != "" {
		if p.Drift == nil {
			p.Drift = &DriftError{}
		}
		p.Drift.Reason = moved
	}
	return p, nil
}

// planArgs are the options of terraform plan, but -out.
func (r *Module) planArgs(run string, opts PlanOptions) ([]tfexec.PlanOption, error) {
	args := []tfexec.PlanOption{tfexec.Destroy(opts.Destroy)}
	if opts.Speculative {
		args = append(args, tfexec.Lock(false))
	} else {
		args = append(args, tfexec.Lock(true), tfexec.LockTimeout("0s"))
	}
	vars, declared, err := r.inputs()
	if err != nil {
		return nil, err
	}
	if declared[terraform.RunIDVariable] {
		// A new run: hooks of nodes created by an earlier run that was cut
		// short run again (see package terraform).
		vars[terraform.RunIDVariable] = run
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		args = append(args, tfexec.Var(k+"="+vars[k]))
	}
	for _, a := range opts.Replace {
		args = append(args, tfexec.Replace(a))
	}
	return args, nil
}

// summarize reads a plan: its changes per pool and in all, and the drift its
// refresh found or observed differs from.
func summarize(cluster schema.ClusterName, js *tfjson.Plan, observed map[schema.PoolName]int64) *Plan {
	p := &Plan{Cluster: cluster, JSON: js, Pools: terraform.Summarize(cluster, js)}
	for _, rc := range js.ResourceChanges {
		if rc.Change == nil {
			continue
		}
		switch a := rc.Change.Actions; {
		case a.Create():
			p.Add++
		case a.Delete():
			p.Destroy++
		case a.Update():
			p.Change++
		case a.Replace():
			p.Add++
			p.Destroy++
		}
	}
	drift := &DriftError{}
	for _, rc := range js.ResourceDrift {
		drift.Resources = append(drift.Resources, rc.Address)
	}
	slices.Sort(drift.Resources)
	inState := map[schema.PoolName]int64{}
	for _, c := range p.Pools {
		inState[c.Pool] = c.NodesBefore
	}
	for _, pool := range slices.Sorted(maps.Keys(observed)) {
		if n := observed[pool]; n != inState[pool] {
			drift.Pools = append(drift.Pools, PoolDrift{Pool: pool, State: inState[pool], Observed: n})
		}
	}
	if len(drift.Resources) > 0 || len(drift.Pools) > 0 {
		p.Drift = drift
	}
	return p
}

// Discard removes the saved plan of p, for a plan that will not be applied.
func (p *Plan) Discard() error {
	if p.File == "" {
		return nil
	}
	f := p.File
	p.File = ""
	return removeFile(f)
}

// inputs returns the values of the module's input variables (WithVars, then
// the TF_VAR_* of the environment for the variables the module declares:
// terraform refuses a -var it does not declare) and the declared variables.
func (r *Module) inputs() (map[string]string, map[string]bool, error) {
	declared, err := r.declared()
	if err != nil {
		return nil, nil, err
	}
	vars := map[string]string{}
	for k, v := range r.envVars {
		if declared[k] {
			vars[k] = v
		}
	}
	maps.Copy(vars, r.vars)
	return vars, declared, nil
}

// declared returns the input variables the module declares.
func (r *Module) declared() (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(r.dir, terraform.ModuleFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a module in other files: terraform says what is wrong
	}
	if err != nil {
		return nil, fmt.Errorf("reading the module of cluster %s: %w", r.cluster, err)
	}
	var m struct {
		Variable map[string]json.RawMessage `json:"variable"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading the module of cluster %s: %w", r.cluster, err)
	}
	out := map[string]bool{}
	for k := range m.Variable {
		out[k] = true
	}
	return out, nil
}

// ApplyOptions tune an apply.
type ApplyOptions struct {
	// CorrectDrift applies a plan made on a drifted state: the plan then
	// puts back what the module declares, and the state it leaves becomes
	// the one the next drift check compares with.
	CorrectDrift bool
}

// Apply applies the saved plan p, and nothing else: when the state moved on
// since the plan was made, Terraform refuses it and Apply returns a
// *DriftError. A plan without changes is not run. A saved plan applies once:
// Apply removes it whatever the outcome, and on success records the state the
// apply left for the next drift check.
//
// When ctx is cancelled, terraform gets SIGINT: it finishes the operations in
// flight, writes the state and releases the lock, and Apply returns an error
// that wraps ctx's error. When terraform is killed instead (or the process
// running the runner dies), the next Plan and Apply resume where it stopped:
// nodes whose create hook may not have finished are created again (see
// package terraform), the local backend's lock died with its holder, and the
// state the killed run wrote is not taken for drift.
func (r *Module) Apply(ctx context.Context, p *Plan, opts ApplyOptions) error {
	if p.Speculative {
		return fmt.Errorf("terraform apply of cluster %s: a speculative plan is for review only", r.cluster)
	}
	if p.Drift != nil && !opts.CorrectDrift {
		return fmt.Errorf("terraform apply of cluster %s: %w", r.cluster, p.Drift)
	}
	if p.File == "" {
		return fmt.Errorf("terraform apply of cluster %s: the plan was applied or discarded", r.cluster)
	}
	// A saved plan applies once: after a failure the state moved on.
	defer func() { _ = p.Discard() }()
	if !p.Changes {
		// Nothing to run: the state the plan looked at is the one accepted.
		return r.writeMark(p.base)
	}
	prev, err := os.ReadFile(r.markFile())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Until the apply ends, the state moves under allot's own hand: mark it,
	// so that a run killed before it could record its end is not taken for
	// drift by the next plan.
	applying := p.base
	applying.Applying = true
	if err := r.writeMark(applying); err != nil {
		return err
	}
	err = r.tf.Apply(ctx, tfexec.DirOrPlan(p.File), tfexec.Lock(true), tfexec.LockTimeout("0s"))
	if err == nil {
		return r.record(ctx)
	}
	err = r.fail(ctx, "apply", err)
	var de *DriftError
	var le *LockError
	if errors.As(err, &de) || errors.As(err, &le) {
		// Terraform refused the plan before changing anything: whatever moved
		// the state was not allot.
		if prev == nil {
			return errors.Join(err, removeFile(r.markFile()))
		}
		return errors.Join(err, os.WriteFile(r.markFile(), prev, 0o644))
	}
	// A failed or interrupted apply may have written part of the state, under
	// its lock: that part is allot's too.
	if rerr := r.record(context.WithoutCancel(ctx)); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// ForceUnlock releases the state lock whose ID is id ('terraform
// force-unlock'). The runner never calls it by itself: it cannot prove that
// the holder of a remote backend's lock (another pod, a CI job, a laptop) is
// dead. An operator who knows it is calls it with the ID of the *LockError,
// e.g. through an annotation the manager reads. Some backends (http) do not
// check the ID they are asked to release, so ForceUnlock first asks who holds
// the lock (a plan without refresh, which fails on the lock): a lock taken
// since by another run has another ID, and ForceUnlock then returns that
// run's *LockError and releases nothing. A state that is not locked is left
// as it is.
//
// The local backend needs none of this: its lock is an operating-system lock
// that dies with the process holding it, so a run killed mid-apply leaves
// only a stale .terraform.tfstate.lock.info file, which the next run
// overwrites.
func (r *Module) ForceUnlock(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("terraform force-unlock of cluster %s: no lock ID", r.cluster)
	}
	args := []tfexec.PlanOption{tfexec.Refresh(false), tfexec.Lock(true), tfexec.LockTimeout("0s")}
	vars, _, err := r.inputs()
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		args = append(args, tfexec.Var(k+"="+vars[k]))
	}
	_, err = r.tf.Plan(ctx, args...)
	var le *LockError
	switch err = r.fail(ctx, "plan", err); {
	case err == nil:
		return nil
	case !errors.As(err, &le):
		return err
	case le.ID != id:
		return fmt.Errorf("terraform force-unlock of cluster %s: lock %s is gone, not releasing another: %w", r.cluster, id, le)
	}
	if err := r.tf.ForceUnlock(ctx, id); err != nil {
		return r.fail(ctx, "force-unlock", err)
	}
	return nil
}

// fail wraps a failed command's error: ctx's error when the run was
// cancelled, a typed error otherwise (nil stays nil).
func (r *Module) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("terraform %s of cluster %s interrupted: %w", op, r.cluster, ctx.Err())
	}
	return fmt.Errorf("terraform %s of cluster %s: %w", op, r.cluster, classify(err))
}

// stateMark is what AppliedFile records of a state.
type stateMark struct {
	Lineage string `json:"lineage"`
	Serial  int64  `json:"serial"`
	// Applying is set while an apply runs: the state may move on from this
	// mark by allot's own hand.
	Applying bool `json:"applying,omitempty"`
}

func (r *Module) markFile() string { return filepath.Join(r.dir, AppliedFile) }

// planBase reads the lineage and serial of the state a saved plan was made
// on, which Terraform keeps in the plan (a zip file) to refuse the plan once
// the state moves on. Should a Terraform write plans otherwise, the state is
// pulled instead (a change between the plan and the pull then goes unseen).
func (r *Module) planBase(ctx context.Context, file string) (stateMark, error) {
	var m stateMark
	zr, err := zip.OpenReader(file)
	if err != nil {
		return m, fmt.Errorf("reading the saved plan of cluster %s: %w", r.cluster, err)
	}
	defer zr.Close()
	f, err := zr.Open("tfstate")
	if err != nil {
		return r.pullMark(ctx)
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(&m); err != nil {
		return m, fmt.Errorf("reading the saved plan of cluster %s: %w", r.cluster, err)
	}
	return m, nil
}

// pullMark reads the lineage and serial of the state (terraform state pull,
// which takes no lock).
func (r *Module) pullMark(ctx context.Context) (stateMark, error) {
	var m stateMark
	r.muted.Store(true)
	raw, err := r.tf.StatePull(ctx)
	r.muted.Store(false)
	if err != nil {
		return m, r.fail(ctx, "state pull", err)
	}
	if len(raw) == 0 {
		return m, nil
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return m, fmt.Errorf("reading the state of cluster %s: %w", r.cluster, err)
	}
	return m, nil
}

// record marks the current state as allot's.
func (r *Module) record(ctx context.Context) error {
	m, err := r.pullMark(ctx)
	if err != nil {
		return err
	}
	return r.writeMark(m)
}

func (r *Module) writeMark(m stateMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.markFile(), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the state of cluster %s: %w", r.cluster, err)
	}
	return nil
}

// stateMoved compares the state now with the one allot's last apply left and
// says how it moved, or "" when it did not (or allot never applied here).
// When the last apply was cut short, the state it moved is adopted as allot's.
func (r *Module) stateMoved(now stateMark) (string, error) {
	b, err := os.ReadFile(r.markFile())
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var last stateMark
	if err := json.Unmarshal(b, &last); err != nil {
		return "", fmt.Errorf("reading %s: %w", AppliedFile, err)
	}
	switch {
	case now.Lineage == last.Lineage && now.Serial == last.Serial && !last.Applying:
		return "", nil
	case last.Applying && (last.Lineage == "" || now.Lineage == last.Lineage && now.Serial >= last.Serial):
		// Moved by allot's own apply (maybe the first, which gave the state
		// its lineage), whose end was never recorded: the process that ran
		// it died.
		return "", r.writeMark(now)
	case now.Lineage != last.Lineage:
		return fmt.Sprintf("the state was replaced outside allot (lineage %q, allot last applied %q)", now.Lineage, last.Lineage), nil
	default:
		return fmt.Sprintf("the state was changed outside allot (serial %d, allot last applied serial %d)", now.Serial, last.Serial), nil
	}
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// unlessMuted writes to the module's output unless the module is muted.
type unlessMuted struct{ r *Module }

func (w unlessMuted) Write(p []byte) (int, error) {
	if w.r.muted.Load() {
		return len(p), nil
	}
	return w.r.output.Write(p)
}
