package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/allot-dev/allot/internal/apilimits"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/evaluate"
	"github.com/allot-dev/allot/planner/render/kube"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/source"
)

// Labels on every object a CapacitySource applies: they select what it owns,
// for pruning, as Flux's kustomize-controller does.
const (
	LabelSourceName      = ownerGroup + "/name"
	LabelSourceNamespace = ownerGroup + "/namespace"
)

// ownerGroup prefixes the ownership labels (fluxcd/pkg/ssa's Owner.Group).
const ownerGroup = "capacity.allot.dev"

// DefaultFieldManager is the server-side apply field manager of allot.
const DefaultFieldManager = "allot"

// DefaultTimeout bounds a reconcile (a Git fetch, a Terraform apply and the
// wait for its nodes).
const DefaultTimeout = 30 * time.Minute

// Reasons of the conditions and events.
const (
	ReasonSucceeded         = "ReconciliationSucceeded"
	ReasonProgressing       = "Progressing"
	ReasonFetchFailed       = "FetchFailed"
	ReasonLimitExceeded     = "LimitExceeded"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonValidationFailed  = "ValidationFailed"
	ReasonRenderFailed      = "RenderFailed"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonCapacityFailed    = "CapacityFailed"
	ReasonDisruptionRefused = "DisruptionRefused"
	ReasonStaleStateLock    = "StaleStateLock"
)

// maxFindings bounds the findings kept in a status.
const maxFindings = 50

// Capacity makes the node-target changes of a step real (Terraform, in
// production) and returns when they are: for growth, when the new nodes are
// Ready. An error stops the apply before the next step, and leaves the quotas
// of the steps after it as they were.
type Capacity interface {
	Resize(ctx context.Context, src *allotv1.CapacitySource, rev Revision, step Step) error
}

// DriftChecker is a Capacity that also checks, on every reconcile, that the
// pools are as large as their targets, and puts back what changed outside
// allot (a lost node, a pool resized by hand). It returns findings for what it
// could not put back.
type DriftChecker interface {
	CheckDrift(ctx context.Context, src *allotv1.CapacitySource, rev Revision) ([]allotv1.Finding, error)
}

// +kubebuilder:rbac:groups=allot.dev,resources=capacitysources,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=allot.dev,resources=capacitysources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=allot.dev,resources=teams;cohorts;tiers;pools,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;list;watch

// Reconciler reconciles CapacitySources.
type Reconciler struct {
	Client client.Client
	// Reader reads uncached where a cache would watch too much (what a
	// Namespace holds before it is pruned); Client when nil.
	Reader  client.Reader
	Fetcher Fetcher
	// Capacity is optional: without it, pool sizes live in the Pool objects only.
	Capacity Capacity
	Recorder events.EventRecorder
	Metrics  *Metrics
	// FieldManager defaults to DefaultFieldManager.
	FieldManager string
	// Timeout bounds one reconcile; default DefaultTimeout.
	Timeout time.Duration
	// Cluster, in a fleet of several clusters with one manager each, names the
	// cluster this one runs in: it applies that cluster's Pools and its share
	// of each team's quota (planner.ForCluster). Empty: the whole
	// configuration applies here.
	Cluster schema.ClusterName
	// FleetQuotas, with Cluster: a hub enforces the teams' quotas fleet-wide
	// (allot manager --hub), so this cluster applies them whole instead of its
	// share (planner.ClusterPools).
	FleetQuotas bool
	// Kueue: the cluster's workloads are admitted by Kueue (allot manager
	// --scheduler=kueue), so each step also applies the Kueue objects of the
	// cluster (planner/render/kueue) with the allot ones.
	Kueue bool
	// KueueLenient applies, under Kueue, a revision with rules Kueue only
	// approximates that their tier, team or pool does not accept
	// (approximate: true); by default such a revision is refused, the last
	// good one staying in force.
	KueueLenient bool
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	start := time.Now()
	src := &allotv1.CapacitySource{}
	if err := r.Client.Get(ctx, req.NamespacedName, src); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := patch.NewSerialPatcher(src, r.Client)
	owned := patch.WithOwnedConditions{Conditions: []string{allotv1.ReadyCondition, allotv1.ReconcilingCondition, allotv1.StalledCondition, allotv1.StateUnlockedCondition}}
	defer func() {
		// A reconcile request is handled once its work is done: 'allot
		// reconcile source' waits for this.
		if v, ok := meta.ReconcileAnnotationValue(src.GetAnnotations()); ok {
			src.Status.LastHandledReconcileAt = v
		}
		if err := patcher.Patch(ctx, src, owned,
			patch.WithStatusObservedGeneration{},
			patch.WithFieldOwner(r.fieldManager()),
		); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, err)
		}
		r.Metrics.observe(src, time.Since(start))
	}()
	if src.Spec.Suspend {
		log.FromContext(ctx).V(1).Info("suspended")
		return ctrl.Result{}, nil
	}
	// Reconciling is visible while the work runs (a fetch, a Terraform
	// apply), not only once it is over.
	conditions.MarkReconciling(src, ReasonProgressing, "reconciling: fetching the source; %s", inForce(src))
	if err := patcher.Patch(ctx, src, owned, patch.WithFieldOwner(r.fieldManager())); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Bound the fetch, the checks and the apply (Terraform included); the
	// status patch above keeps the outer context.
	rctx, cancel := context.WithTimeout(ctx, cmp.Or(r.Timeout, DefaultTimeout))
	defer cancel()
	return r.reconcile(rctx, src)
}

func (r *Reconciler) fieldManager() string {
	if r.FieldManager == "" {
		return DefaultFieldManager
	}
	return r.FieldManager
}

func (r *Reconciler) reconcile(ctx context.Context, src *allotv1.CapacitySource) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	interval := ctrl.Result{RequeueAfter: src.Spec.Interval.Duration}

	art, err := r.Fetcher.Fetch(ctx, src)
	if err != nil {
		var spec *SpecError
		if errors.As(err, &spec) {
			r.stall(src, ReasonInvalidSpec, err.Error())
			return ctrl.Result{}, nil
		}
		// A revision beyond schema's bounds stays so: wait for the next
		// one, as for a revision that does not validate.
		if limit := (*LimitError)(nil); errors.As(err, &limit) {
			if limit.Revision != "" {
				src.Status.LastAttemptedRevision = limit.Revision
			}
			src.Status.Findings = statusFindings(schema.Findings{{Severity: schema.SeverityError, Rule: schema.RuleLimit,
				Pos: schema.Pos{File: limit.Path}, Message: limit.Bound}})
			r.stall(src, ReasonLimitExceeded, fmt.Sprintf("%v; %s", err, inForce(src)))
			return interval, nil
		}
		r.fail(src, ReasonFetchFailed, fmt.Sprintf("%v; %s", err, inForce(src)))
		return ctrl.Result{}, err
	}
	src.Status.LastAttemptedRevision = art.Revision

	judged := evaluate.RepositoryWith(source.Evaluator(ctx, source.DefaultLimits), art.Files, nil)
	findings := judged.Findings
	if r.Kueue && judged.Config != nil {
		findings = append(findings, kueueFindings(judged.Config, r.KueueLenient)...)
	}
	src.Status.Findings = statusFindings(findings)
	if judged.Config == nil || findings.HasErrors() {
		r.stall(src, ReasonValidationFailed, r.invalidMessage(src, art.Revision, findings))
		return interval, nil
	}
	// The clusters Slurm runs are not a manager's: their pools and their
	// share of the quotas are converged by allot slurm apply.
	here := planner.Kubernetes(judged.Config, judged.Plan)
	if r.Cluster != "" {
		switch cl := judged.Config.Clusters[r.Cluster]; {
		case cl == nil:
			r.stall(src, ReasonInvalidSpec, fmt.Sprintf("revision %s declares no cluster %s, the cluster this manager runs in (--cluster)", art.Revision, r.Cluster))
			return interval, nil
		case cl.Scheduler == schema.SchedulerSlurm:
			r.stall(src, ReasonInvalidSpec, fmt.Sprintf("revision %s: Slurm runs cluster %s (--cluster): allot slurm apply converges it, not a manager", art.Revision, r.Cluster))
			return interval, nil
		}
		here = planner.ForCluster(judged.Config, judged.Plan, r.Cluster)
		if r.FleetQuotas {
			here = planner.ClusterPools(planner.Kubernetes(judged.Config, judged.Plan), r.Cluster)
		}
	}
	objs, err := kube.Build(here, judged.Plan)
	if err != nil {
		r.stall(src, ReasonRenderFailed, fmt.Sprintf("revision %s: %v", art.Revision, err))
		return interval, nil
	}
	r.label(src, objs)

	cur, err := r.state(ctx, src)
	if err != nil {
		r.fail(src, ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	// Existing Namespaces and PriorityClasses allot did not create are left
	// alone unless annotated for adoption (adopt.go).
	left, err := r.adopt(ctx, cur, objs)
	if err != nil {
		r.fail(src, ReasonApplyFailed, err.Error())
		return ctrl.Result{}, err
	}
	src.Status.Findings = append(src.Status.Findings, left...)
	// A pool short of healthy GPUs (its status, from the Pool health reconciler)
	// is reported with the revision's findings; the plan itself is not changed,
	// so that a fault never resizes a pool by itself.
	_, short := planner.WithObserved(judged.Config, judged.Plan, observedPools(cur))
	src.Status.Findings = append(src.Status.Findings, statusFindings(short)...)
	rev := Revision{ID: art.Revision, Config: judged.Config, Plan: judged.Plan, Current: map[string]int64{}, Prune: src.PruneEnabled()}
	for _, name := range sortedKeys(cur.Pools) {
		p := cur.Pools[name]
		rev.Current[name] = p.Spec.NodesTarget
		if p.Status.Repair != nil {
			if rev.Repair == nil {
				rev.Repair = map[schema.PoolName]*allotv1.PoolRepairStatus{}
			}
			rev.Repair[schema.PoolName(name)] = p.Status.Repair
		}
		if p.Status.Burst != nil {
			if rev.Burst == nil {
				rev.Burst = map[schema.PoolName]*allotv1.PoolBurstStatus{}
			}
			rev.Burst[schema.PoolName(name)] = p.Status.Burst
		}
		if judged.Config.Pools[schema.PoolName(name)] == nil {
			rev.Gone = append(rev.Gone, p)
		}
	}
	steps := Steps(cur, objs, src.PruneEnabled())
	if r.Kueue {
		ko, err := kueueObjects(judged.Config, judged.Plan, r.Cluster)
		var stale []client.Object
		if err == nil && src.PruneEnabled() {
			stale, err = r.staleKueue(ctx, src, ko)
		}
		if err == nil {
			steps, err = withKueue(steps, ko, map[string]string{LabelSourceName: src.Name, LabelSourceNamespace: src.Namespace}, stale)
		}
		if err != nil {
			r.stall(src, ReasonRenderFailed, fmt.Sprintf("revision %s: rendering for Kueue: %v", art.Revision, err))
			return interval, nil
		}
	}
	// Whatever the API server would refuse (a value out of a CRD's bounds, an
	// admission policy of the platform) stops the revision before its first
	// step, not in the middle.
	if err := r.preflight(ctx, steps); err != nil {
		r.fail(src, ReasonApplyFailed, fmt.Sprintf("revision %s: %v; nothing of it is applied, %s", art.Revision, err, inForce(src)))
		return ctrl.Result{}, err
	}
	var kept []allotv1.Finding
	for _, step := range steps {
		logger.V(1).Info("applying", "revision", art.Revision, "phase", step.Phase, "apply", len(step.Apply), "delete", len(step.Delete), "resize", len(step.Resize))
		k, reason, err := r.run(ctx, src, rev, step)
		kept = append(kept, k...)
		// What this step applied is owned from now on, even if a later
		// step fails: a revision that removes it prunes it.
		src.Status.Inventory = withApplied(src.Status.Inventory, step)
		if err != nil {
			return r.failStep(src, reason, fmt.Sprintf("revision %s, step %s: %v; the steps before it are applied, the rest waits", art.Revision, step.Phase, err), err)
		}
	}
	src.Status.Findings = append(src.Status.Findings, kept...)

	changed := src.Status.LastAppliedRevision != art.Revision
	src.Status.LastAppliedRevision = art.Revision
	src.Status.Plan = summary(judged.Plan)
	src.Status.Inventory = inventory(objs)
	r.Metrics.plan(src, judged.Plan)
	if changed {
		r.event(src, corev1.EventTypeNormal, ReasonSucceeded, "Applied revision %s: %d teams, %d pools, %d GPUs, $%s a month",
			art.Revision, src.Status.Plan.Teams, src.Status.Plan.Pools, src.Status.Plan.GPUs, src.Status.Plan.MonthlyUSD)
	}
	// Between revisions, the pools must stay as large as their targets: a
	// node lost or a pool resized outside allot is put back. The revision is
	// applied whatever comes of it.
	if d, ok := r.Capacity.(DriftChecker); ok {
		fs, err := d.CheckDrift(ctx, src, rev)
		src.Status.Findings = append(src.Status.Findings, fs...)
		if err != nil {
			return r.failStep(src, ReasonCapacityFailed, fmt.Sprintf("revision %s is applied, but putting its pools back to their targets failed: %v", art.Revision, err), err)
		}
	}
	conditions.Delete(src, allotv1.ReconcilingCondition)
	conditions.Delete(src, allotv1.StalledCondition)
	if conditions.Has(src, allotv1.StateUnlockedCondition) {
		conditions.MarkTrue(src, allotv1.StateUnlockedCondition, ReasonSucceeded, "no stale Terraform state lock")
	}
	conditions.MarkTrue(src, allotv1.ReadyCondition, ReasonSucceeded, "Applied revision: %s", art.Revision)
	return interval, nil
}

// failStep reports a failed step (msg says which): one a person must act on
// (approve a disruption, set --cluster) waits for the interval or the
// approval; any other is retried with backoff.
func (r *Reconciler) failStep(src *allotv1.CapacitySource, reason, msg string, err error) (ctrl.Result, error) {
	var refused *DisruptionError
	var scope *ClusterScopeError
	var stale *StaleLockError
	if errors.As(err, &stale) {
		// Its own condition; a person must act, so no backoff.
		conditions.MarkFalse(src, allotv1.StateUnlockedCondition, ReasonStaleStateLock, "%v", stale)
		r.fail(src, ReasonStaleStateLock, msg)
		return ctrl.Result{RequeueAfter: src.Spec.Interval.Duration}, nil
	}
	if errors.As(err, &refused) || errors.As(err, &scope) {
		reason := ReasonDisruptionRefused
		if scope != nil {
			reason = ReasonInvalidSpec
		}
		r.fail(src, reason, msg)
		return ctrl.Result{RequeueAfter: src.Spec.Interval.Duration}, nil
	}
	r.fail(src, reason, msg+" for a retry")
	return ctrl.Result{}, errors.New(msg)
}

// stall marks a revision that retrying cannot fix: Ready=False and Stalled.
func (r *Reconciler) stall(src *allotv1.CapacitySource, reason, msg string) {
	conditions.Delete(src, allotv1.ReconcilingCondition)
	msg = apilimits.Condition(msg)
	conditions.MarkStalled(src, reason, "%s", msg)
	conditions.MarkFalse(src, allotv1.ReadyCondition, reason, "%s", msg)
	r.event(src, corev1.EventTypeWarning, reason, "%s", msg)
}

// fail marks a failure that a retry may fix.
func (r *Reconciler) fail(src *allotv1.CapacitySource, reason, msg string) {
	conditions.Delete(src, allotv1.StalledCondition)
	conditions.MarkFalse(src, allotv1.ReadyCondition, reason, "%s", apilimits.Condition(msg))
	r.event(src, corev1.EventTypeWarning, reason, "%s", msg)
}

func (r *Reconciler) event(src *allotv1.CapacitySource, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(src, nil, kind, reason, "Reconcile", "%s", apilimits.Note(fmt.Sprintf(format, args...)))
	}
}

// invalidMessage says what is wrong with a revision and what stays in force.
func (r *Reconciler) invalidMessage(src *allotv1.CapacitySource, rev string, fs schema.Findings) string {
	var errs []string
	for _, f := range fs {
		if f.Severity == schema.SeverityError {
			errs = append(errs, apilimits.Truncate(f.String(), maxFindingBytes))
		}
	}
	shown := errs[:min(len(errs), 5)]
	more := ""
	if len(errs) > len(shown) {
		more = fmt.Sprintf("\n... and %d more", len(errs)-len(shown))
	}
	return fmt.Sprintf("revision %s has %d error(s); %s:\n%s%s", rev, len(errs), inForce(src), strings.Join(shown, "\n"), more)
}

// inForce says which revision stays in force after a failure.
func inForce(src *allotv1.CapacitySource) string {
	if src.Status.LastAppliedRevision != "" {
		return "revision " + src.Status.LastAppliedRevision + " stays in force"
	}
	return "nothing was applied"
}

// observedPools reads the pools' observed health from their status; pools
// without one (no nodes seen yet) are left out.
func observedPools(cur State) map[schema.PoolName]planner.Observed {
	out := map[schema.PoolName]planner.Observed{}
	for name, p := range cur.Pools {
		if p.Status.ObservedGeneration > 0 || p.Status.Nodes > 0 {
			out[schema.PoolName(name)] = planner.Observed{Nodes: p.Status.Nodes, UsableNodes: p.Status.ReadyNodes, HealthyGPUs: p.Status.HealthyGPUs}
		}
	}
	return out
}

func statusFindings(fs schema.Findings) []allotv1.Finding {
	var out []allotv1.Finding
	for _, f := range fs[:min(len(fs), maxFindings)] {
		out = append(out, allotv1.Finding{Severity: string(f.Severity), Rule: f.Rule, File: f.Pos.File, Line: int64(f.Pos.Line), Column: int64(f.Pos.Col), Message: apilimits.Truncate(f.Message, maxFindingBytes)})
	}
	return out
}

func summary(p *planner.Plan) *allotv1.PlanSummary {
	s := &allotv1.PlanSummary{Teams: int64(len(p.Teams)), Pools: int64(len(p.Pools)), MonthlyUSD: allotv1.Decimal(p.TotalMonthlyUSD.Fixed(2))}
	for _, pp := range p.Pools {
		s.Nodes += pp.NodesTarget
		s.GPUs += pp.GPUsTarget
	}
	return s
}

// label marks every object with the source that owns it.
func (r *Reconciler) label(src *allotv1.CapacitySource, objs *kube.Objects) {
	for _, o := range all(objs) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[LabelSourceName], l[LabelSourceNamespace] = src.Name, src.Namespace
		o.SetLabels(l)
	}
}

func all(o *kube.Objects) []client.Object {
	var out []client.Object
	out = append(out, ptrs(o.Namespaces)...)
	out = append(out, ptrs(o.PriorityClasses)...)
	out = append(out, ptrs(o.Cohorts)...)
	out = append(out, ptrs(o.Tiers)...)
	out = append(out, ptrs(o.Pools)...)
	out = append(out, ptrs(o.Teams)...)
	return out
}

// withApplied adds to inv the objects step applied.
func withApplied(inv []string, step Step) []string {
	for _, obj := range step.Apply {
		if e := kindOf(obj) + "/" + obj.GetName(); !slices.Contains(inv, e) {
			inv = append(inv, e)
		}
	}
	slices.Sort(inv)
	return inv
}

func inventory(o *kube.Objects) []string {
	var out []string
	for _, obj := range all(o) {
		out = append(out, kindOf(obj)+"/"+obj.GetName())
	}
	slices.Sort(out)
	return out
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Namespace:
		return "Namespace"
	case *schedulingv1.PriorityClass:
		return "PriorityClass"
	case *allotv1.Cohort:
		return "Cohort"
	case *allotv1.Tier:
		return "Tier"
	case *allotv1.Pool:
		return "Pool"
	case *allotv1.Team:
		return "Team"
	case *unstructured.Unstructured:
		return obj.GetObjectKind().GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

// state reads what src owns in the cluster now: the objects its status
// inventory names that still carry its ownership labels (an object someone
// else took over, or deleted, is not its any more).
func (r *Reconciler) state(ctx context.Context, src *allotv1.CapacitySource) (State, error) {
	st := State{
		Namespaces:      map[string]*corev1.Namespace{},
		PriorityClasses: map[string]*schedulingv1.PriorityClass{},
		Cohorts:         map[string]*allotv1.Cohort{},
		Tiers:           map[string]*allotv1.Tier{},
		Pools:           map[string]*allotv1.Pool{},
		Teams:           map[string]*allotv1.Team{},
	}
	owned, err := r.labelled(ctx, src)
	if err != nil {
		return st, err
	}
	for _, entry := range append(slices.Clone(src.Status.Inventory), owned...) {
		kind, name, _ := strings.Cut(entry, "/")
		obj, forget := st.slot(kind, name)
		if obj == nil || name == "" {
			continue // not a kind allot applies: nothing of it to prune
		}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			forget()
			if apierrors.IsNotFound(err) {
				continue
			}
			return st, fmt.Errorf("reading %s of the inventory: %w", entry, err)
		}
		if l := obj.GetLabels(); l[LabelSourceName] != src.Name || l[LabelSourceNamespace] != src.Namespace {
			forget()
		}
	}
	return st, nil
}

// ownedKinds are the kinds a CapacitySource applies, by the name its
// inventory gives them (kindOf).
var ownedKinds = map[string]client.Object{
	"Namespace": &corev1.Namespace{}, "PriorityClass": &schedulingv1.PriorityClass{},
	"Cohort": &allotv1.Cohort{}, "Tier": &allotv1.Tier{}, "Pool": &allotv1.Pool{}, "Team": &allotv1.Team{},
}

// labelled lists, as inventory entries, the objects that carry src's
// ownership labels: those a reconcile applied and could not record in the
// inventory (the manager stopped, or the status patch failed, before its
// end). Without them a revision that no longer declares such an object would
// not prune it, and one that does would take it for another source's.
func (r *Reconciler) labelled(ctx context.Context, src *allotv1.CapacitySource) ([]string, error) {
	var out []string
	for _, kind := range sortedKeys(ownedKinds) {
		gvk, err := apiutil.GVKForObject(ownedKinds[kind], r.Client.Scheme())
		if err != nil {
			return nil, err
		}
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.reader().List(ctx, &l, client.MatchingLabels{LabelSourceName: src.Name, LabelSourceNamespace: src.Namespace}); err != nil {
			return nil, fmt.Errorf("listing the %ss of the source: %w", kind, err)
		}
		for _, o := range l.Items {
			if e := kind + "/" + o.Name; !slices.Contains(src.Status.Inventory, e) {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// slot returns an empty object of a kind a CapacitySource applies, by the name
// its inventory gives the kind (kindOf), already in st under name, and the
// function that takes it out again; nil for another kind.
func (st State) slot(kind, name string) (client.Object, func()) {
	switch kind {
	case "Namespace":
		return put(st.Namespaces, name)
	case "PriorityClass":
		return put(st.PriorityClasses, name)
	case "Cohort":
		return put(st.Cohorts, name)
	case "Tier":
		return put(st.Tiers, name)
	case "Pool":
		return put(st.Pools, name)
	case "Team":
		return put(st.Teams, name)
	}
	return nil, nil
}

func put[T any, P interface {
	*T
	client.Object
}](m map[string]P, name string) (client.Object, func()) {
	o := P(new(T))
	m[name] = o
	return o, func() { delete(m, name) }
}

// run applies one step through fluxcd/pkg/ssa: objects (Namespaces and
// PriorityClasses first, waited for with kstatus), then the capacity changes,
// then the Pools whose size changed, then deletions.
// It returns a finding per object it kept instead of deleting (keepOnPrune),
// and the reason of a failure.
func (r *Reconciler) run(ctx context.Context, src *allotv1.CapacitySource, rev Revision, s Step) ([]allotv1.Finding, string, error) {
	rm := r.resources()
	// A Pool's node target is recorded once its capacity is real: a resize that
	// fails leaves the old target in force, and the retry resizes again.
	var objs, pools []*unstructured.Unstructured
	for _, obj := range s.Apply {
		u, err := r.unstructured(obj)
		if err != nil {
			return nil, ReasonApplyFailed, err
		}
		if _, ok := obj.(*allotv1.Pool); ok && r.Capacity != nil {
			pools = append(pools, u)
		} else {
			objs = append(objs, u)
		}
	}
	opts := ssa.DefaultApplyOptions()
	opts.WaitInterval = 500 * time.Millisecond
	if len(objs) > 0 {
		if _, err := rm.ApplyAllStaged(ctx, objs, opts); err != nil {
			return nil, ReasonApplyFailed, err
		}
	}
	if r.Capacity != nil && len(s.Resize) > 0 {
		if err := r.Capacity.Resize(ctx, src, rev, s); err != nil {
			return nil, ReasonCapacityFailed, err
		}
	}
	if len(pools) > 0 {
		if _, err := rm.ApplyAll(ctx, pools, opts); err != nil {
			return nil, ReasonApplyFailed, err
		}
	}
	var kept []allotv1.Finding
	for _, obj := range s.Delete {
		why, err := r.keepOnPrune(ctx, src, obj)
		if err != nil {
			return kept, ReasonApplyFailed, err
		}
		if why != nil {
			kept = append(kept, *why)
			continue
		}
		u, err := r.unstructured(obj)
		if err != nil {
			return kept, ReasonApplyFailed, err
		}
		if _, err := rm.Delete(ctx, u, ssa.DeleteOptions{PropagationPolicy: metav1.DeletePropagationBackground, Exclusions: pruneDisabled}); err != nil {
			return kept, ReasonApplyFailed, fmt.Errorf("deleting %s/%s: %w", kindOf(obj), obj.GetName(), err)
		}
	}
	return kept, "", nil
}

// preflight asks the API server, in a server-side apply dry run, whether it
// accepts every object the steps apply, as it stands now. An object in a
// namespace the revision makes is left to its step.
func (r *Reconciler) preflight(ctx context.Context, steps []Step) error {
	for _, s := range steps {
		for _, obj := range s.Apply {
			u, err := r.unstructured(obj)
			if err != nil {
				return err
			}
			//lint:ignore SA1019 a server-side apply of an unstructured object, as fluxcd/pkg/ssa applies them (Client.Apply takes typed apply configurations)
			err = r.Client.Patch(ctx, u, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner(r.fieldManager()))
			var status apierrors.APIStatus
			if apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "namespaces" {
				continue
			}
			if err != nil {
				return fmt.Errorf("the API server refuses %s/%s: %w", kindOf(obj), obj.GetName(), err)
			}
		}
	}
	return nil
}

// resources is the ResourceManager that applies and deletes for r: its
// field manager, and the ownership labels capacity.allot.dev/name and
// capacity.allot.dev/namespace.
func (r *Reconciler) resources() *ssa.ResourceManager {
	poller := polling.NewStatusPoller(r.Client, r.Client.RESTMapper(), polling.Options{})
	return ssa.NewResourceManager(r.Client, poller, ssa.Owner{Field: r.fieldManager(), Group: ownerGroup})
}

// unstructured converts obj for server-side apply: its kind set, no status,
// no creation time.
func (r *Reconciler) unstructured(obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, r.Client.Scheme())
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
