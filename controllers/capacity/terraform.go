package capacity

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/internal/apilimits"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	poolctl "github.com/allot-dev/allot/controllers/pool"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// AnnotationApproveDisruption on a CapacitySource approves one shrink that
// removes nodes running workloads: its value is the disruption ID the
// refusal named.
const AnnotationApproveDisruption = "allot.dev/approve-disruption"

// AnnotationForceUnlock on a CapacitySource releases one Terraform state lock
// the manager reported stale: its value is the lock ID the StateUnlocked
// condition names. The manager never releases a lock by itself: it cannot
// prove that the holder (another pod, a CI job, a laptop) is dead.
const AnnotationForceUnlock = "allot.dev/force-unlock"

// Terraform makes the node targets of a step real with Terraform: it renders
// the revision's root module of each cluster the step resizes, plans it, checks
// the plan removes no node that runs work unless that is allowed, applies the
// saved plan, and, when the step grows pools, waits until their nodes are
// Ready. In the grow phase no pool is made smaller than it is (targets are
// the larger of the old and the new), so one module can grow some pools now
// and shrink others in the shrink phase, after the quotas came down.
type Terraform struct {
	// Reader reads Nodes and Pods (uncached: resizes are rare, and pods are
	// listed by node).
	Reader client.Reader
	// Dir holds one working directory per source and cluster. Keep it on a
	// persistent volume: it holds the local state (with the default backend)
	// and the record drift is measured against.
	Dir string
	// Options render the modules (the backend).
	Options terraform.Options
	// Hook is the command of onprem and kwok modules' node hooks.
	Hook string
	// Env is added to terraform's environment (and so the hooks').
	Env map[string]string
	// EnvSecret, when set, names a Secret whose keys are more environment
	// variables of terraform, read at every run (so a rotated credential
	// is used without a restart): TF_VAR_<name> sets the module's variable
	// <name> (project, subnet_ids, ...), others are the providers' and the
	// backend's credentials (GOOGLE_OAUTH_ACCESS_TOKEN, AWS_*,
	// TF_HTTP_PASSWORD, ...). Its values reach terraform only: never a log,
	// an event or a status.
	EnvSecret client.ObjectKey
	// Binary is the terraform executable; empty: terraform on PATH.
	Binary string
	// Clusters, when not empty, are the only clusters Terraform resizes; the
	// pool sizes of the others live in the Pool objects only (another tool
	// makes them real).
	Clusters map[schema.ClusterName]bool
	// ReadyTimeout bounds the wait for grown pools' nodes; default 10 minutes.
	ReadyTimeout time.Duration
	// Recorder, when set, records drift and disruption events on the source.
	Recorder events.EventRecorder
	// StaleLockAge is how long a state lock may be held before it is
	// reported as stale (a *StaleLockError); 0: never. A lock's age is from
	// its creation time when the backend tells it, else from when the
	// manager first met it.
	StaleLockAge time.Duration

	// locksSeen are the state locks met, by lock ID: when first met.
	locksSeen sync.Map

	// drifts are the drifts an apply could not remove, by source UID and
	// cluster: they are reported, not planned again, until they change.
	drifts sync.Map
}

// DisruptionError is a shrink that would remove nodes running workloads,
// refused because neither policy.allowDisruption nor the approval annotation
// allows it.
type DisruptionError struct {
	// ID names this disruption; the annotation approves it by this value.
	ID string
	// Nodes are the nodes to go that run pods, with their pod counts.
	Nodes map[string]int
}

func (e *DisruptionError) Error() string {
	var ns []string
	for _, n := range slices.Sorted(maps.Keys(e.Nodes)) {
		ns = append(ns, fmt.Sprintf("%s (%d pods)", n, e.Nodes[n]))
	}
	return fmt.Sprintf("the shrink would remove nodes that run workloads: %s; allow it with policy.allowDisruption: true, or approve this one with the annotation %s=%s",
		strings.Join(ns, ", "), AnnotationApproveDisruption, e.ID)
}

// NotReadyError is a grown pool whose new nodes did not all become Ready in
// time.
type NotReadyError struct {
	Pool        string
	Ready, Want int64
	WaitedFor   time.Duration
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("pool %s has %d of %d new nodes Ready after %s; the quotas that need them wait", e.Pool, e.Ready, e.Want, e.WaitedFor)
}

// Resize implements Capacity.
func (t *Terraform) Resize(ctx context.Context, src *allotv1.CapacitySource, rev Revision, step Step) error {
	if n := len(terraformClusters(rev.Config)); len(t.Clusters) == 0 && n > 1 {
		// The nodes of other clusters are not visible from here: their growth
		// could not be waited for, nor their shrinks checked for running work.
		return &ClusterScopeError{Clusters: n}
	}
	targets := t.targets(rev, step.Phase)
	clusters := map[schema.ClusterName]bool{}
	var resized []TargetChange
	for _, c := range step.Resize {
		cl := schema.ClusterName(c.Pool.Spec.Cluster)
		if slurm := rev.Config.Clusters[cl]; slurm != nil && slurm.Scheduler == schema.SchedulerSlurm {
			continue // the site's nodes, never Terraform's (a Pool object left from before)
		}
		if len(t.Clusters) == 0 || t.Clusters[cl] {
			clusters[cl] = true
			resized = append(resized, c)
		}
	}
	// A grown pool is ready when as many nodes made since are usable as it
	// has new nodes: a node that was faulty before the grow does not hold
	// it back, nor one that turns faulty while it grows, nor a Pool object
	// lost or deleted by hand (its pool looks grown from nothing, but its
	// nodes are there).
	before := map[string]map[types.UID]bool{}
	if step.Phase == PhaseGrowCapacity {
		for _, c := range resized {
			seen, err := t.nodeUIDs(ctx, c.Pool.Name)
			if err != nil {
				return err
			}
			before[c.Pool.Name] = seen
		}
	}
	for _, cluster := range slices.Sorted(maps.Keys(clusters)) {
		if err := t.resizeCluster(ctx, src, rev, cluster, targets); err != nil {
			return fmt.Errorf("cluster %s: %w", cluster, err)
		}
	}
	if step.Phase != PhaseGrowCapacity {
		return nil
	}
	for _, c := range resized {
		if err := t.waitReady(ctx, c.Pool.Name, before[c.Pool.Name], max(0, c.To-int64(len(before[c.Pool.Name])))); err != nil {
			return err
		}
	}
	return nil
}

// terraformClusters are the clusters of cfg whose nodes Terraform makes: all
// but those Slurm runs.
func terraformClusters(cfg *schema.Config) []schema.ClusterName {
	var out []schema.ClusterName
	for _, name := range cfg.ClusterNames() {
		if cfg.Clusters[name].Scheduler != schema.SchedulerSlurm {
			out = append(out, name)
		}
	}
	return out
}

// ClusterScopeError is Terraform asked to size the pools of a fleet of several
// clusters from one manager: it must be told which cluster is its own.
type ClusterScopeError struct{ Clusters int }

func (e *ClusterScopeError) Error() string {
	return fmt.Sprintf("the configuration declares %d clusters, and this manager sees the nodes of its own only: run it with --cluster NAME (or --terraform-clusters)", e.Clusters)
}

// targets are the node targets of every pool of the revision for a phase: in
// the grow phase no pool goes below what it has now.
func (t *Terraform) targets(rev Revision, phase Phase) map[schema.PoolName]int64 {
	out := map[schema.PoolName]int64{}
	for _, pp := range rev.Plan.Pools {
		n := pp.NodesTarget + rev.held(pp.Pool, pp.NodesTarget)
		if cur, ok := rev.Current[string(pp.Pool)]; ok && phase == PhaseGrowCapacity && cur > n {
			n = cur
		}
		out[pp.Pool] = n
	}
	// A pool the revision removed keeps its nodes until the shrink phase, and
	// goes then only when the source prunes.
	for _, p := range rev.Gone {
		n := p.Spec.NodesTarget
		if phase == PhaseShrink && rev.Prune {
			n = 0
		}
		out[schema.PoolName(p.Name)] = n
	}
	return out
}

// withGone returns the revision's configuration and plan with the pools it
// removed added back (from their Pool objects), so that a module still holds
// them: Terraform then shrinks them when told, running their delete hooks,
// instead of dropping them (and leaving their nodes) as soon as the module
// forgets them.
func withGone(rev Revision) (*schema.Config, *planner.Plan) {
	if len(rev.Gone) == 0 {
		return rev.Config, rev.Plan
	}
	cfg, plan := *rev.Config, *rev.Plan
	cfg.Pools, cfg.Clusters = maps.Clone(rev.Config.Pools), maps.Clone(rev.Config.Clusters)
	plan.Pools = slices.Clone(rev.Plan.Pools)
	for _, p := range rev.Gone {
		sp := poolFromSpec(p)
		cfg.Pools[sp.Name] = sp
		if cfg.Clusters[sp.Cluster] == nil {
			cfg.Clusters[sp.Cluster] = &schema.Cluster{Name: sp.Cluster, Provider: schema.Provider(p.Spec.Provider)}
		}
		plan.Pools = append(plan.Pools, planner.PoolPlan{Pool: sp.Name, Cluster: sp.Cluster, Flavor: sp.Flavor,
			GPUsPerNode: sp.GPUsPerNode, NodesTarget: p.Spec.NodesTarget})
	}
	return &cfg, &plan
}

// poolFromSpec reads a Pool object back into the configuration's terms.
func poolFromSpec(p *allotv1.Pool) *schema.Pool {
	s := p.Spec
	sp := &schema.Pool{Name: schema.PoolName(p.Name), Cluster: schema.ClusterName(s.Cluster), Flavor: schema.Flavor(s.Flavor),
		MachineType: s.MachineType, GPUsPerNode: s.GPUsPerNode, MinNodes: s.Nodes.Min, MaxNodes: s.Nodes.Max, SpareNodes: s.SpareNodes}
	if price, err := quantity.Parse(string(s.Price.OnDemandPerNodeHour)); err == nil {
		sp.Price.OnDemandPerNodeHour = price
	}
	if s.Price.CommittedPerNodeHour != nil {
		if price, err := quantity.Parse(string(*s.Price.CommittedPerNodeHour)); err == nil {
			sp.Price.CommittedPerNodeHour, sp.Price.HasCommittedPrice = price, true
		}
	}
	sp.Price.CommittedNodes = s.Price.CommittedNodes
	sp.Topology = poolctl.Topology(p)
	return sp
}

// resizeCluster plans and applies the module of cluster at targets. Nothing
// it says (its error, terraform's output in the log) shows a value of
// EnvSecret or a backend credential: terraform prints what a failed hook or
// provider printed, a token in a URL, a line of a key file.
func (t *Terraform) resizeCluster(ctx context.Context, src *allotv1.CapacitySource, rev Revision, cluster schema.ClusterName, targets map[schema.PoolName]int64) error {
	env, secrets, err := t.env(ctx)
	if err != nil {
		return err
	}
	for _, kv := range t.Options.Backend.InitConfig(cluster) {
		_, v, _ := strings.Cut(kv, "=")
		secrets = append(secrets, v)
	}
	secrets = secretParts(secrets)
	out := &logWriter{log: log.FromContext(ctx).WithValues("cluster", cluster), secrets: secrets}
	defer out.Flush()
	return redacted(t.resizeModule(ctx, src, rev, cluster, targets, env, out), secrets)
}

func (t *Terraform) resizeModule(ctx context.Context, src *allotv1.CapacitySource, rev Revision, cluster schema.ClusterName, targets map[schema.PoolName]int64,
	env map[string]string, out io.Writer) error {
	cfg, base := withGone(rev)
	plan := *base
	plan.Pools = slices.Clone(base.Pools)
	for i := range plan.Pools {
		plan.Pools[i].NodesTarget = targets[plan.Pools[i].Pool]
	}
	rev.Config = cfg
	render := t.Options
	held, err := t.held(ctx, cfg, cluster)
	if err != nil {
		return err
	}
	render.Held = held
	// The nodes first, then what the Pools' repair and burst hold: the Pool
	// reconciler writes its status before it marks a node retired, so a
	// node seen marked here comes with a status that no longer counts it
	// (read the other way round, the node's seat would be made anew).
	fresh, err := t.freshHeld(ctx, rev, cluster)
	if err != nil {
		return err
	}
	for i := range plan.Pools {
		pp, planned := plan.Pools[i].Pool, base.Pools[i].NodesTarget
		if plan.Pools[i].NodesTarget == planned+rev.held(pp, planned) {
			plan.Pools[i].NodesTarget = planned + fresh.held(pp, planned)
		}
		if h, ok := held[pp]; ok {
			plan.Pools[i].NodesTarget = seatsHeld(plan.Pools[i].NodesTarget, cfg.Pools[pp], h, fresh.Repair[pp])
		}
	}
	module, err := terraform.Module(cfg, &plan, cluster, render)
	if err != nil {
		return err
	}
	b, err := terraform.Marshal(module)
	if err != nil {
		return err
	}
	dir := filepath.Join(t.Dir, src.Namespace, src.Name, string(cluster))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, terraform.ModuleFile), b, 0o644); err != nil {
		return err
	}
	opts := []tfrun.Option{tfrun.WithEnv(env), tfrun.WithOutput(out),
		tfrun.WithBackendConfig(t.Options.Backend.InitConfig(cluster))}
	if p := rev.Config.Clusters[cluster]; p != nil && p.Provider.NamesNodes() && t.Hook != "" {
		opts = append(opts, tfrun.WithVars(map[string]string{"command": t.Hook}))
	}
	if t.Binary != "" {
		opts = append(opts, tfrun.WithBinary(t.Binary))
	}
	r, err := tfrun.New(ctx, cluster, dir, opts...)
	if err != nil {
		return err
	}
	if err := r.Init(ctx); err != nil {
		return err
	}
	observed, err := t.observed(ctx, rev.Config, cluster)
	if err != nil {
		return err
	}
	p, err := r.Plan(ctx, tfrun.PlanOptions{Observed: observed})
	if le := (*tfrun.LockError)(nil); errors.As(err, &le) {
		if err := t.lockHeld(ctx, src, r, cluster, le, err); err != nil {
			return err
		}
		p, err = r.Plan(ctx, tfrun.PlanOptions{Observed: observed})
	}
	if err != nil {
		return err
	}
	// An onprem or kwok node the state has but the cluster lost is made again:
	// its hooks run anew.
	if lost, err := t.lostNodes(ctx, p); err != nil {
		return errors.Join(err, p.Discard())
	} else if len(lost) > 0 {
		if err := p.Discard(); err != nil {
			return err
		}
		var replace []string
		for pool, nodes := range lost {
			for _, n := range nodes {
				replace = append(replace, terraform.NodeAddress(pool, n))
			}
		}
		slices.Sort(replace)
		t.event(src, corev1.EventTypeWarning, "NodesLost", "cluster %s: %s are in Terraform's state but not in the cluster; making them again", cluster, strings.Join(replace, ", "))
		if p, err = r.Plan(ctx, tfrun.PlanOptions{Observed: observed, Replace: replace}); err != nil {
			return err
		}
	}
	if p.Drift != nil {
		// Git is the source of truth: the apply puts back what it declares.
		t.event(src, corev1.EventTypeWarning, "Drift", "cluster %s: %v; correcting it", cluster, p.Drift)
	}
	if err := t.checkDisruption(ctx, src, rev, p); err != nil {
		return errors.Join(err, p.Discard())
	}
	if err := r.Apply(ctx, p, tfrun.ApplyOptions{CorrectDrift: true}); err != nil {
		return err
	}
	for _, pc := range p.Pools {
		log.FromContext(ctx).Info("pool resized", "cluster", cluster, "pool", pc.Pool, "from", pc.NodesBefore, "to", pc.NodesAfter,
			"add", pc.Add, "destroy", pc.Destroy)
	}
	return nil
}

// env is terraform's environment beyond allot's own: Env, then EnvSecret's
// keys, whose values it also returns as secrets.
func (t *Terraform) env(ctx context.Context) (map[string]string, []string, error) {
	env := maps.Clone(t.Env)
	if env == nil {
		env = map[string]string{}
	}
	if t.EnvSecret.Name == "" {
		return env, nil, nil
	}
	var sec corev1.Secret
	if err := t.Reader.Get(ctx, t.EnvSecret, &sec); err != nil {
		return nil, nil, fmt.Errorf("reading Secret %s, terraform's environment: %w", t.EnvSecret, err)
	}
	var secrets []string
	for k, v := range sec.Data {
		env[k] = string(v)
		secrets = append(secrets, string(v))
	}
	return env, secrets, nil
}

// secretParts are the values to take out of what terraform says: each value,
// and each line of one of several lines (a key file: terraform may quote one
// line of it).
func secretParts(values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, strings.TrimSpace(v))
		if lines := strings.Split(v, "\n"); len(lines) > 1 {
			for _, l := range lines {
				if l = strings.TrimSpace(l); len(l) >= 8 {
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// redacted is err with the secrets taken out of its text, and err behind it
// for errors.As (the types that steer the reconcile); nil stays nil.
func redacted(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := redact(err.Error(), secrets)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// StaleLockError is a Terraform state lock held longer than StaleLockAge: a
// run that died holding it, or one that hangs. It is released only when a
// person says so, with the annotation AnnotationForceUnlock=<ID>.
type StaleLockError struct {
	Cluster schema.ClusterName
	Lock    *tfrun.LockError
	Age     time.Duration
}

func (e *StaleLockError) Error() string {
	who := ""
	if e.Lock.Who != "" {
		who = " by " + e.Lock.Who
	}
	return fmt.Sprintf("the Terraform state of cluster %s has been locked%s for %s (lock ID %s): if no Terraform run holds it any more, release it with the annotation %s=%s",
		e.Cluster, who, e.Age.Round(time.Second), e.Lock.ID, AnnotationForceUnlock, e.Lock.ID)
}

// lockHeld handles a plan that met a state lock: the lock the source's
// annotation names is released (and an event says by whose request); a lock
// older than StaleLockAge is a *StaleLockError; any other returns err (a
// run that holds it now: retried).
func (t *Terraform) lockHeld(ctx context.Context, src *allotv1.CapacitySource, r *tfrun.Module, cluster schema.ClusterName, le *tfrun.LockError, err error) error {
	if le.ID == "" {
		return err
	}
	if src.Annotations[AnnotationForceUnlock] == le.ID {
		if uerr := r.ForceUnlock(ctx, le.ID); uerr != nil {
			return uerr
		}
		t.locksSeen.Delete(le.ID)
		t.event(src, corev1.EventTypeWarning, "StateForceUnlocked", "released the Terraform state lock %s of cluster %s (held by %s since %s), as the annotation %s asked (set by %s)",
			le.ID, cluster, cmp.Or(le.Who, "an unknown run"), cmp.Or(le.Created, "an unknown time"), AnnotationForceUnlock, annotationManager(src, AnnotationForceUnlock))
		log.FromContext(ctx).Info("released a state lock", "cluster", cluster, "lock", le.ID, "holder", le.Who, "requestedBy", annotationManager(src, AnnotationForceUnlock))
		return nil
	}
	now := time.Now()
	first, _ := t.locksSeen.LoadOrStore(le.ID, now)
	since := first.(time.Time)
	if created, perr := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", le.Created); perr == nil && created.Before(since) {
		since = created
	}
	if age := now.Sub(since); t.StaleLockAge > 0 && age >= t.StaleLockAge {
		return &StaleLockError{Cluster: cluster, Lock: le, Age: age}
	}
	return err
}

// annotationManager names the field manager that last set an annotation
// (e.g. kubectl-annotate): the API server's audit log says which user.
func annotationManager(obj client.Object, key string) string {
	field := "f:" + key
	for _, mf := range obj.GetManagedFields() {
		if mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"`+field+`"`) {
			return "field manager " + mf.Manager
		}
	}
	return "an unknown field manager"
}

// CheckDrift implements DriftChecker for the one cluster whose nodes this
// manager sees (its only Terraform cluster, or the configuration's only
// cluster): it lists the Node objects of each pool and, when a pool has
// another number of them than its target, or an onprem or kwok pool lacks one
// of its named nodes, plans and applies the cluster's module (Terraform puts
// back what its state and the cloud say changed, and makes lost onprem and
// kwok nodes again), then waits (bounded) for the nodes it made. A difference
// the apply cannot remove (nodes outside its state, nodes still joining) is
// returned as a finding, and not planned again until it changes; one that
// changed while Terraform ran is planned again at the next check.
func (t *Terraform) CheckDrift(ctx context.Context, src *allotv1.CapacitySource, rev Revision) ([]allotv1.Finding, error) {
	var cluster schema.ClusterName
	switch {
	case len(t.Clusters) == 1:
		for c := range t.Clusters {
			cluster = c
		}
	case len(t.Clusters) == 0 && len(terraformClusters(rev.Config)) == 1:
		cluster = terraformClusters(rev.Config)[0]
	default:
		return nil, nil // the nodes of several clusters are not all seen from here
	}
	cfg, _ := withGone(rev)
	if cfg.Clusters[cluster] == nil {
		return nil, nil
	}
	targets := t.targets(rev, PhaseShrink)
	key := string(src.UID) + "/" + string(cluster)
	short, drift, err := t.drift(ctx, cfg, cluster, targets)
	if err != nil || drift == "" {
		t.drifts.Delete(key)
		return nil, err
	}
	if seen, _ := t.drifts.Load(key); seen != drift {
		t.event(src, corev1.EventTypeWarning, "Drift", "cluster %s: %s; planning to put the pools back", cluster, drift)
		before := map[schema.PoolName]map[types.UID]bool{}
		for pool := range short {
			seen, err := t.nodeUIDs(ctx, string(pool))
			if err != nil {
				return nil, err
			}
			before[pool] = seen
		}
		if err := t.resizeCluster(ctx, src, rev, cluster, targets); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		// Nodes made again are waited for, as a grow's are: a later check
		// must not take a node still joining for a lost one.
		for _, pool := range slices.Sorted(maps.Keys(short)) {
			if err := t.waitReady(ctx, string(pool), before[pool], short[pool]); err != nil {
				return nil, err
			}
		}
		var after string
		if _, after, err = t.drift(ctx, cfg, cluster, targets); err != nil || after == "" {
			return nil, err
		}
		if after != drift {
			// Another difference: the nodes or their marks changed while
			// Terraform ran (a node retired, one lost). Not one the apply
			// failed to remove: the next check plans it.
			return driftFinding("cluster %s: %s, changed while Terraform put the pools back; planned again at the next check", cluster, after), nil
		}
		t.drifts.Store(key, drift)
	}
	return driftFinding("cluster %s: %s, and a Terraform apply does not change it: nodes outside its state, or still joining", cluster, drift), nil
}

// driftFinding is the pool-drift warning of a cluster's drift check.
func driftFinding(format string, args ...any) []allotv1.Finding {
	return []allotv1.Finding{{Severity: string(schema.SeverityWarning), Rule: "pool-drift", Message: fmt.Sprintf(format, args...)}}
}

// drift says which pools of the cluster are off their target: another number
// of Node objects, or, for onprem and kwok pools, whose nodes Terraform names,
// a named node missing. short counts, per pool, the nodes missing.
func (t *Terraform) drift(ctx context.Context, cfg *schema.Config, cluster schema.ClusterName, targets map[schema.PoolName]int64) (short map[schema.PoolName]int64, drift string, err error) {
	named := cfg.Clusters[cluster].Provider.NamesNodes()
	short = map[schema.PoolName]int64{}
	var off []string
	for _, pool := range slices.Sorted(maps.Keys(cfg.Pools)) {
		if cfg.Pools[pool].Cluster != cluster {
			continue
		}
		nodes, err := t.nodesOf(ctx, string(pool))
		if err != nil {
			return nil, "", err
		}
		// The nodes Terraform keeps: the pool's seats, and the retired
		// nodes still kept.
		var held map[schema.PoolName]fleet.Held
		if h, ok := heldOf(cfg, pool, nodes); ok {
			held = map[schema.PoolName]fleet.Held{pool: h}
		}
		laid := fleet.LayoutHeld(&schema.Config{Pools: map[schema.PoolName]*schema.Pool{pool: cfg.Pools[pool]}}, targets, held)
		want := int64(len(laid))
		var missing []string
		if named {
			have := map[string]bool{}
			for _, n := range nodes {
				have[n.Name] = true
			}
			for _, n := range laid {
				if !have[n.Name] {
					missing = append(missing, n.Name)
				}
			}
		}
		n := int64(len(nodes))
		switch {
		case len(missing) > 0:
			off = append(off, fmt.Sprintf("pool %s has %d nodes, its target is %d, and lacks %s", pool, n, want, strings.Join(missing, ", ")))
			short[pool] = int64(len(missing))
		case n != want:
			off = append(off, fmt.Sprintf("pool %s has %d nodes, its target is %d", pool, n, want))
			if n < want {
				short[pool] = want - n
			}
		}
	}
	return short, strings.Join(off, "; "), nil
}

// seatsHeld adjusts a named pool's count to what its nodes hold: a node the
// status retires but whose mark is not written yet keeps its seat (the
// status is written first: counting it out now would remove another node;
// a seat kept so never makes a node), and the seats and the kept retired
// nodes stay within nodes.max.
func seatsHeld(n int64, p *schema.Pool, h fleet.Held, s *allotv1.PoolRepairStatus) int64 {
	present := map[string]bool{}
	for _, name := range h.Names {
		present[name] = true
	}
	if s != nil {
		// Never beyond the nodes there are: keeping a seat makes no node.
		var back int64
		for _, rec := range s.Nodes {
			if _, marked := h.Retired[rec.Name]; rec.Retired && present[rec.Name] && !marked {
				back++
			}
		}
		n = max(n, min(n+back, int64(len(present)-len(h.Retired))))
	}
	var kept int64
	for _, stays := range h.Retired {
		if stays {
			kept++
		}
	}
	if p != nil {
		n = min(n, max(0, p.MaxNodes-kept))
	}
	return n
}

// freshHeld returns rev with the repair and burst status of cluster's pools
// read again from the API server.
func (t *Terraform) freshHeld(ctx context.Context, rev Revision, cluster schema.ClusterName) (Revision, error) {
	if t.Reader == nil {
		return rev, nil
	}
	rev.Repair, rev.Burst = maps.Clone(rev.Repair), maps.Clone(rev.Burst)
	for _, name := range rev.Config.PoolNames() {
		p := rev.Config.Pools[name]
		if p.Cluster != cluster || p.Repair == nil && p.Burst == nil {
			continue
		}
		var obj allotv1.Pool
		if err := t.Reader.Get(ctx, client.ObjectKey{Name: string(name)}, &obj); client.IgnoreNotFound(err) != nil {
			return rev, fmt.Errorf("reading pool %s: %w", name, err)
		}
		if rev.Repair == nil {
			rev.Repair = map[schema.PoolName]*allotv1.PoolRepairStatus{}
		}
		if rev.Burst == nil {
			rev.Burst = map[schema.PoolName]*allotv1.PoolBurstStatus{}
		}
		rev.Repair[name], rev.Burst[name] = obj.Status.Repair, obj.Status.Burst
	}
	return rev, nil
}

// held reads what the onprem and kwok pools of cluster hold: their Node
// objects (a node keeps its name while it is there, so that a retired node's
// going, or repair's removal from the repository, never moves another's
// seat), and which of them repair retired (the manager's annotation on the
// Node, not a Pool's status: a status anyone with access to it may write
// must not delete a node).
func (t *Terraform) held(ctx context.Context, cfg *schema.Config, cluster schema.ClusterName) (map[schema.PoolName]fleet.Held, error) {
	out := map[schema.PoolName]fleet.Held{}
	for _, name := range cfg.PoolNames() {
		if cfg.Pools[name].Cluster != cluster {
			continue
		}
		nodes, err := t.nodesOf(ctx, string(name))
		if err != nil {
			return nil, err
		}
		if h, ok := heldOf(cfg, name, nodes); ok {
			out[name] = h
		}
	}
	return out, nil
}

// heldOf is what pool holds of nodes, when its nodes are named by its module.
func heldOf(cfg *schema.Config, pool schema.PoolName, nodes []corev1.Node) (fleet.Held, bool) {
	p := cfg.Pools[pool]
	c := cfg.Clusters[p.Cluster]
	if c == nil || !c.Provider.NamesNodes() {
		return fleet.Held{}, false
	}
	h := fleet.Held{Retired: map[string]bool{}}
	for _, n := range nodes {
		h.Names = append(h.Names, n.Name)
		switch n.Annotations[contract.AnnotationRetired] {
		case "keep":
			h.Retired[n.Name] = true
		case "remove":
			h.Retired[n.Name] = false
		}
	}
	return h, true
}

// observed counts the Node objects of each pool of the cluster.
func (t *Terraform) observed(ctx context.Context, cfg *schema.Config, cluster schema.ClusterName) (map[schema.PoolName]int64, error) {
	out := map[schema.PoolName]int64{}
	for name, p := range cfg.Pools {
		if p.Cluster != cluster {
			continue
		}
		nodes, err := t.nodesOf(ctx, string(name))
		if err != nil {
			return nil, err
		}
		out[name] = int64(len(nodes))
	}
	return out, nil
}

// checkDisruption refuses a plan that removes nodes running pods, unless the
// policy or the approval annotation allows it. Onprem and kwok pools remove
// their highest-numbered nodes; a cloud node group removes nodes of its
// choosing, so any pod on the pool counts when its pods' GPUs exceed what the
// pool keeps.
func (t *Terraform) checkDisruption(ctx context.Context, src *allotv1.CapacitySource, rev Revision, p *tfrun.Plan) error {
	if rev.Config.Policy.AllowDisruption {
		return nil
	}
	busy := map[string]int{}
	var shrinks []string
	gone := goneNodes(p)
	for _, pc := range p.Pools {
		if pc.NodesAfter >= pc.NodesBefore && pc.Destroy == 0 {
			continue
		}
		shrinks = append(shrinks, fmt.Sprintf("%s:%d->%d-%d", pc.Pool, pc.NodesBefore, pc.NodesAfter, pc.Destroy))
		running, err := t.podsPerNode(ctx, string(pc.Pool))
		if err != nil {
			return err
		}
		if names, ok := gone[pc.Pool]; ok {
			// An onprem or kwok pool: the plan names the nodes it removes.
			for _, n := range names {
				if r, ok := running[n]; ok {
					busy[n] = r.pods
				}
			}
			continue
		}
		// A cloud node group chooses which nodes go (or replaces them all):
		// any node that runs work may.
		for n, r := range running {
			busy[n] = r.pods
		}
	}
	if len(busy) == 0 {
		return nil
	}
	slices.Sort(shrinks)
	sum := sha256.Sum256([]byte(rev.ID + "\n" + strings.Join(shrinks, "\n")))
	id := hex.EncodeToString(sum[:6])
	if src.Annotations[AnnotationApproveDisruption] == id {
		t.event(src, corev1.EventTypeNormal, "DisruptionApproved", "shrink %s approved by annotation: removing nodes that run pods", strings.Join(shrinks, ", "))
		return nil
	}
	err := &DisruptionError{ID: id, Nodes: busy}
	t.event(src, corev1.EventTypeWarning, "DisruptionRefused", "%v", err)
	return err
}

// nodeResources maps the name of each pool's per-node terraform_data resource
// (onprem and kwok modules) to its pool.
func nodeResources(p *tfrun.Plan) map[string]schema.PoolName {
	out := map[string]schema.PoolName{}
	for _, pc := range p.Pools {
		out[terraform.ResourceName(pc.Pool)+"_nodes"] = pc.Pool
	}
	return out
}

// lostNodes names, per onprem or kwok pool, the nodes the plan keeps (they are
// in the state and stay) that have no Node object.
func (t *Terraform) lostNodes(ctx context.Context, p *tfrun.Plan) (map[schema.PoolName][]string, error) {
	out := map[schema.PoolName][]string{}
	if p.JSON == nil {
		return out, nil
	}
	byResource := nodeResources(p)
	for _, rc := range p.JSON.ResourceChanges {
		pool, ok := byResource[rc.Name]
		node, named := rc.Index.(string)
		if !ok || !named || rc.Type != "terraform_data" || rc.Change == nil || !(rc.Change.Actions.NoOp() || rc.Change.Actions.Update()) {
			continue
		}
		err := t.Reader.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		switch {
		case apierrors.IsNotFound(err):
			out[pool] = append(out[pool], node)
		case err != nil:
			return nil, fmt.Errorf("reading node %s: %w", node, err)
		}
	}
	return out, nil
}

// goneNodes names, per onprem or kwok pool, the nodes the plan deletes or
// replaces (the instances of its <pool>_nodes terraform_data resource).
func goneNodes(p *tfrun.Plan) map[schema.PoolName][]string {
	out := map[schema.PoolName][]string{}
	if p.JSON == nil {
		return out
	}
	byResource := nodeResources(p)
	for _, rc := range p.JSON.ResourceChanges {
		pool, ok := byResource[rc.Name]
		if !ok || rc.Type != "terraform_data" || rc.Change == nil {
			continue
		}
		if _, seen := out[pool]; !seen {
			out[pool] = nil
		}
		if a := rc.Change.Actions; a.Delete() || a.Replace() || a.DestroyBeforeCreate() || a.CreateBeforeDestroy() {
			if node, ok := rc.Index.(string); ok {
				out[pool] = append(out[pool], node)
			}
		}
	}
	return out
}

type nodeUse struct {
	pods int
	gpus int64
}

// podsPerNode counts the live pods bound to each node of a pool, DaemonSet
// pods aside.
func (t *Terraform) podsPerNode(ctx context.Context, pool string) (map[string]nodeUse, error) {
	nodes, err := t.nodesOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := map[string]nodeUse{}
	for _, n := range nodes {
		var pods corev1.PodList
		if err := t.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil || daemon(&p) {
				continue
			}
			u := out[n.Name]
			u.pods++
			for _, c := range p.Spec.Containers {
				if q, ok := c.Resources.Limits[nodestate.ResourceGPU]; ok {
					u.gpus += q.Value()
				}
			}
			out[n.Name] = u
		}
	}
	return out, nil
}

// daemon says whether a pod belongs to a DaemonSet: it runs on every node
// (the GPU agent, a log shipper) and goes with its node, as kubectl drain
// treats it; it is no workload a shrink disrupts.
func daemon(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// nodesOf lists the Node objects of a pool.
func (t *Terraform) nodesOf(ctx context.Context, pool string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := t.Reader.List(ctx, &nodes, client.MatchingLabels{contract.LabelPool: pool}); err != nil {
		return nil, fmt.Errorf("listing the nodes of pool %s: %w", pool, err)
	}
	return nodes.Items, nil
}

// nodeUIDs are the UIDs of the pool's Node objects: a node made anew under
// an old name has a new one.
func (t *Terraform) nodeUIDs(ctx context.Context, pool string) (map[types.UID]bool, error) {
	nodes, err := t.nodesOf(ctx, pool)
	if err != nil {
		return nil, err
	}
	seen := make(map[types.UID]bool, len(nodes))
	for i := range nodes {
		seen[nodes[i].UID] = true
	}
	return seen, nil
}

// waitReady waits, bounded, until want of the pool's nodes not in before
// (made since) are usable: Ready, no GPU fault, a healthy GPU. The other
// nodes' health does not hold it: one turning faulty while it waits is
// repair's to handle, not a reason to wait out the timeout.
func (t *Terraform) waitReady(ctx context.Context, pool string, before map[types.UID]bool, want int64) error {
	timeout := t.ReadyTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	var ready int64
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := t.nodesOf(ctx, pool)
		if err != nil {
			return false, nil //nolint:nilerr // a failed list is retried until the timeout
		}
		ready = 0
		for i := range nodes {
			if !before[nodes[i].UID] && nodestate.Read(&nodes[i]).Usable {
				ready++
			}
		}
		return ready >= want, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &NotReadyError{Pool: pool, Ready: ready, Want: want, WaitedFor: timeout}
	}
	return nil
}

func (t *Terraform) event(src *allotv1.CapacitySource, kind, reason, format string, args ...any) {
	if t.Recorder != nil {
		t.Recorder.Eventf(src, nil, kind, reason, "Resize", "%s", apilimits.Note(fmt.Sprintf(format, args...)))
	}
}

// logWriter sends terraform's output to the log, a whole line at a time
// (a secret split between two writes is still found), without the secrets.
type logWriter struct {
	log     interface{ Info(string, ...any) }
	secrets []string
	mu      sync.Mutex
	partial []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	i := bytes.LastIndexByte(w.partial, '\n')
	if i < 0 {
		return len(b), nil
	}
	w.emit(string(w.partial[:i]))
	w.partial = append(w.partial[:0], w.partial[i+1:]...)
	return len(b), nil
}

// Flush logs what is left of the last line.
func (w *logWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit(string(w.partial))
	w.partial = nil
}

func (w *logWriter) emit(lines string) {
	for l := range strings.SplitSeq(lines, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			w.log.Info("terraform", "line", redact(l, w.secrets))
		}
	}
}
