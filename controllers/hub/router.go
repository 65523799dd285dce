package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
	"github.com/allot-dev/allot/schema/quantity"
)

// The hub's contract with the Jobs it routes (docs/scheduling.md, "A fleet of
// several clusters").
const (
	// ManagedBy is the spec.managedBy of a Job the hub routes: the hub's own
	// Job controller leaves it alone (no pods on the hub), as with Kueue's
	// MultiKueue.
	ManagedBy = "allot.dev/hub"
	// AnnotationCluster on a hub Job names the worker it is routed to.
	AnnotationCluster = "hub.allot.dev/cluster"
	// AnnotationAttempt on a hub Job counts its routings (1 the first time, one
	// more at each failover); on the worker's copy it says which routing the
	// copy belongs to: a copy of an older one is stale.
	AnnotationAttempt = "hub.allot.dev/attempt"
	// AnnotationPlacement on a hub Job records the nodes the hub counted the
	// job on ("node=pods,..."), so that each pass accounts it again.
	AnnotationPlacement = "hub.allot.dev/placement"
	// AnnotationPending on a hub Job says why it is not routed yet, with each
	// cluster's free GPUs and price.
	AnnotationPending = "hub.allot.dev/pending"
	// AnnotationWhy on a hub Job says why it went where it was routed, and
	// why not to the other clusters, with the numbers.
	AnnotationWhy = "hub.allot.dev/why"
	// AnnotationConflict on a hub Job says that its worker has a Job of the
	// same name the hub did not make, so that its copy cannot be made there.
	AnnotationConflict = "hub.allot.dev/conflict"
	// AnnotationAccounted on a hub Job routed to a worker where the nodes
	// recorded in its placement no longer hold it (deleted, renamed,
	// relabelled out of its flavor, unhealthy) says how the hub counts it
	// instead: it counts in its team's quota for as long as it is routed.
	AnnotationAccounted = "hub.allot.dev/accounted"
	// ReasonPlacementGone is the reason of the warning event on a hub Job
	// when AnnotationAccounted changes.
	ReasonPlacementGone = "PlacementGone"
	// ReasonRoutingEdited is the reason of the event on a hub Job whose
	// routing annotations were edited, and written back.
	ReasonRoutingEdited = "RoutingEdited"
	// LabelHubJob on a worker's copy is the UID of the hub Job it copies.
	LabelHubJob = "hub.allot.dev/job"
	// maxPlacementBytes bounds the placement annotation.
	maxPlacementBytes = 32 << 10
	// DefaultPassTimeout is a pass's bound on its calls to the workers.
	DefaultPassTimeout = 10 * time.Second
)

// The rights to write the hub's Jobs are in config/hub (a hub's only), not in
// the manager's role: a worker's manager never writes a Job.
// +kubebuilder:rbac:groups=allot.dev,resources=teams;cohorts;tiers;pools,verbs=get;list;watch

// Router routes the hub's Jobs and JobSets (spec.managedBy allot.dev/hub;
// kinds) to worker clusters with a scheduling core over every worker's
// nodes and the teams' fleet-wide quotas: the cheapest cluster where the job fits now, then the
// best fit (scheduler/cluster.go). It creates the job's copy in the worker,
// in the same namespace, pinned there (label allot.dev/cluster on its pods,
// which the worker's manager honours), mirrors the copy's status back, moves
// the jobs of a Lost worker to others, and deletes a worker's stale copies
// (of a routing that is no longer the hub's) as soon as it is reached again.
type Router struct {
	// Client reads and writes the hub's Jobs and reads its Teams, Cohorts,
	// Tiers and Pools.
	Client  client.Client
	Workers *Workers
	// Core tunes the scheduling core; default scheduler.DefaultOptions
	// without gang timeout (the hub does not see the pods).
	Core *scheduler.Options
	// Interval between two routing passes; default 2s.
	Interval time.Duration
	// PassTimeout bounds the calls of a pass to the workers: each worker's
	// copies are listed within half of it (a worker that has not answered
	// by then takes no job this pass, and holds up no other), and what the
	// pass does in the workers is done within it; default
	// DefaultPassTimeout.
	PassTimeout time.Duration
	// NewClient makes a worker's client; default client.New with Scheme.
	NewClient func(*rest.Config) (client.Client, error)
	Scheme    *runtime.Scheme
	Now       func() time.Time
	Log       logr.Logger
	// Metrics, if set, counts routings, failovers and waiting jobs.
	Metrics *Metrics
	// Recorder, if set, says on a Job when its routing annotations were
	// edited and written back; default the manager's.
	Recorder events.EventRecorder

	mu     sync.Mutex
	routed map[types.UID]routing
}

// Start runs a routing pass every Interval until ctx ends (a manager
// Runnable; it needs leader election like the rest of the manager).
func (r *Router) Start(ctx context.Context) error {
	d := r.Interval
	if d <= 0 {
		d = 2 * time.Second
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "routing pass")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: one hub routes.
func (r *Router) NeedLeaderElection() bool { return true }

// SetupWithManager adds the router to the hub's manager.
func (r *Router) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Log.GetSink() == nil {
		r.Log = ctrl.Log.WithName("hub-router")
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("allot-hub")
	}
	return mgr.Add(r)
}

// hubJob is one of the hub's Jobs as a pass sees it.
type hubJob struct {
	// job is the hub's object (a Job, a JobSet: kind).
	job     client.Object
	kind    kind
	spec    scheduler.Workload
	specErr error
	// cluster, attempt and placement are the job's routing as the hub holds
	// it (own): the Job's annotations are anyone's who may edit the Job.
	cluster   string
	attempt   int
	placement string
	// remembered: this router wrote the routing (Router.routed).
	remembered bool
	// lostFrom is the lost worker a failover takes the job from.
	lostFrom string
	// failovers counts the times this router took the job from a lost
	// worker (Router.routed): a job failed over waits ahead of its team's
	// jobs of its tier (scheduler.Workload.Restarts), as the core requeues
	// a workload that lost a node. The count is the router's own, never the
	// Job's word: a new leader starts it at 0.
	failovers int
	// unclaimed: the Job read as routed where the hub has no copy of it and
	// never routed it (sweep); its routing annotations are removed.
	unclaimed bool
}

func (r *Router) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Pass routes what waits, mirrors what runs and cleans up what is stale, once.
func (r *Router) Pass(ctx context.Context) error {
	now, start := r.now(), time.Now()
	newClient := r.NewClient
	if newClient == nil {
		newClient = func(cfg *rest.Config) (client.Client, error) {
			cfg = rest.CopyConfig(cfg)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return noRetryAfter{rt} })
			return client.New(cfg, client.Options{Scheme: r.Scheme, Mapper: workerMapper()})
		}
	}
	timeout := r.PassTimeout
	if timeout <= 0 {
		timeout = DefaultPassTimeout
	}
	workers, err := r.Workers.snapshot(r.now(), newClient)
	if err != nil {
		return err
	}
	var clusters allotv1.ClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return err
	}
	workers = withUnprobed(workers, clusters.Items)
	var teams allotv1.TeamList
	var cohorts allotv1.CohortList
	var tiers allotv1.TierList
	var pools allotv1.PoolList
	for _, l := range []client.ObjectList{&teams, &cohorts, &tiers, &pools} {
		if err := r.Client.List(ctx, l); err != nil {
			return err
		}
	}
	cfg, err := runner.QuotaConfig(teams.Items, cohorts.Items, tiers.Items)
	if err != nil {
		return err
	}
	ten := newTenancy(teams.Items, tiers.Items)
	var jobs []*hubJob
	live := map[types.UID]bool{}
	// A hub without a kind's CRD has none of it (and the copies of those
	// there were are stale). A kind it cannot read otherwise fails the pass:
	// without its jobs' claims, sweep would delete their copies. The bound
	// keeps an informer that cannot sync (its rights are missing) from
	// holding up every pass for good.
	reading, cancelReading := context.WithTimeout(ctx, timeout)
	defer cancelReading()
	for _, k := range kinds {
		list, err := k.List(reading, r.Client)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("listing the hub's %ss: %w", k.Name(), err)
		}
		for _, j := range list {
			live[j.GetUID()] = true
			if !k.Managed(j) || j.GetDeletionTimestamp() != nil {
				continue
			}
			a := j.GetAnnotations()
			h := &hubJob{job: j, kind: k, cluster: a[AnnotationCluster], placement: a[AnnotationPlacement]}
			h.attempt = parseAttempt(a[AnnotationAttempt])
			jobs = append(jobs, h)
		}
	}
	r.forgetGone(live)
	for _, h := range jobs {
		r.recall(h)
		h.spec, h.specErr = h.kind.Workload(h.job, ten)
	}

	// Each worker's copies first: a routing read from a Job is the hub's only
	// where its copy is (or the router wrote it), and stale copies go before
	// anything is created in their worker. A worker that does not answer
	// within half the pass's bound is left out of this pass, and holds up no
	// other.
	listing, cancel := context.WithDeadline(ctx, start.Add(timeout/2))
	defer cancel()
	errs := r.eachWorker(workers, func(w *snapshot) error {
		if w.state != Ready || w.client == nil {
			return nil
		}
		if err := w.listCopies(listing); err != nil {
			w.state = Unreachable // for this pass: it keeps its jobs, takes none
			return fmt.Errorf("listing the hub's jobs in %s: %w", w.name, err)
		}
		return nil
	})
	r.own(jobs, workers)
	asCopied(jobs, workers, ten)
	claims := map[types.UID]claim{}
	for _, h := range jobs {
		claims[h.job.GetUID()] = claim{h.cluster, h.attempt}
	}
	opts := scheduler.DefaultOptions()
	if r.Core != nil {
		opts = *r.Core
	}
	d, err := decide(cfg, opts, workers, pools.Items, jobs, now)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	d.routes = slices.DeleteFunc(d.routes, func(rt routed) bool {
		for _, w := range workers {
			if w.name == rt.a.Cluster && w.unserved[rt.h.kind.Name()] {
				d.pending[rt.h] = fmt.Sprintf("NoMatchingNodes: cluster %s, where it fits, does not serve %ss (install their CRD and controller there, and give the hub's account the rights of config/hub-worker), or pin it with label %s to one that does",
					w.name, rt.h.kind.Name(), contract.LabelCluster)
				return true
			}
		}
		return false
	})
	for _, h := range d.failovers {
		r.Log.Info("worker lost: the job is routed again", "job", client.ObjectKeyFromObject(h.job), "cluster", h.lostFrom)
		if r.Metrics != nil {
			r.Metrics.failovers.WithLabelValues(h.lostFrom).Inc()
		}
		errs = append(errs, r.unroute(ctx, h))
	}
	for _, h := range jobs {
		switch {
		case h.unclaimed:
			errs = append(errs, r.unroute(ctx, h))
		case h.lostFrom == "" && !h.kind.Finished(h.job) && (h.cluster != "" || h.remembered):
			errs = append(errs, r.restore(ctx, h))
		}
	}
	errs = append(errs, r.sayRecounted(ctx, d, workers)...)
	wctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	errs = append(errs, r.eachWorker(workers, func(w *snapshot) error {
		if w.state != Ready || w.client == nil {
			return nil
		}
		errs := []error{r.sweep(wctx, w, claims)}
		if unanswered(errs[0]) {
			return errs[0]
		}
		for _, h := range d.mirror {
			if h.cluster == w.name && !w.unserved[h.kind.Name()] {
				err := r.mirror(wctx, w, h)
				if errs = append(errs, err); unanswered(err) {
					return errors.Join(errs...) // one timeout a pass, not one a job
				}
			}
		}
		if err := r.hear(wctx, w, d.mirror); err != nil {
			if errs = append(errs, err); unanswered(err) {
				return errors.Join(errs...)
			}
		}
		for _, rt := range d.routes {
			if rt.a.Cluster == w.name {
				err := r.route(wctx, w, rt.h, rt.a, rt.why)
				if errs = append(errs, err); unanswered(err) {
					return errors.Join(errs...)
				}
			}
		}
		return errors.Join(errs...)
	})...)
	if r.Metrics != nil {
		r.Metrics.pending.Set(float64(len(d.pending)))
	}
	for _, h := range jobs {
		if why, ok := d.pending[h]; ok {
			errs = append(errs, r.annotate(ctx, h, AnnotationPending, why))
		}
	}
	return errors.Join(errs...)
}

// withUnprobed adds the registered Clusters that no probe has reached or
// missed yet (the hub has just become the leader) as Unreachable: they keep
// their jobs until a probe says otherwise, and take no new ones. Only a
// worker found Lost, or whose Cluster is gone (once its copies' fence has
// passed: Workers.forget), gives its jobs up.
func withUnprobed(workers []snapshot, clusters []allotv1.Cluster) []snapshot {
	known := map[string]bool{}
	for _, w := range workers {
		known[w.name] = true
	}
	for _, c := range clusters {
		if !known[c.Name] && c.DeletionTimestamp == nil {
			workers = append(workers, snapshot{name: c.Name, state: Unreachable})
		}
	}
	slices.SortFunc(workers, func(a, b snapshot) int { return strings.Compare(a.name, b.name) })
	return workers
}

// decision is what one pass does, decided without I/O (decide).
type decision struct {
	// failovers were routed to a lost (or deregistered) worker: each is
	// routed again as a new attempt (h.attempt counts it already).
	failovers []*hubJob
	// mirror are routed to a worker that is not lost.
	mirror []*hubJob
	// recounted are routed jobs the core could not count on the nodes
	// recorded for them, and how they are counted instead (recount).
	recounted []recounted
	routes    []routed
	// pending says why each job that waits waits.
	pending map[*hubJob]string
}

type routed struct {
	h   *hubJob
	a   scheduler.Admission
	why string
}

// decide routes the jobs that wait with a core over the workers' nodes and
// the teams' quotas, after counting the jobs routed before on the nodes
// recorded for them. It changes the jobs' cluster and attempt in memory for
// the failovers; the Router writes what it decided.
func decide(cfg scheduler.Config, opts scheduler.Options, workers []snapshot, pools []allotv1.Pool, jobs []*hubJob, now time.Time) (*decision, error) {
	// The hub routes and accounts; the workers run the jobs: no gang
	// timeout, and no preemption across clusters.
	opts.GangTimeout, opts.NoPreemption = 0, true
	core, err := scheduler.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("the hub's quota tree: %w", err)
	}
	d := &decision{pending: map[*hubJob]string{}}
	state := map[string]State{}
	nodes := map[string][]scheduler.Node{}
	clusterOf := map[scheduler.NodeName]string{}
	dearest := map[scheduler.Flavor]int64{}
	for _, w := range workers {
		state[w.name] = w.state
		if w.state == Lost {
			continue // its nodes are gone from the fleet; its jobs go elsewhere
		}
		nodes[w.name] = runner.FleetNodes(w.nodes, pools, w.name)
		for _, n := range nodes[w.name] {
			if err := core.AddNode(n); err != nil {
				return nil, fmt.Errorf("worker %s: %w", w.name, err)
			}
			clusterOf[n.Name] = w.name
			dearest[n.Flavor] = max(dearest[n.Flavor], n.Cost)
		}
	}
	var stale []*hubJob
	whyStale := map[*hubJob]error{}
	var pending []*hubJob
	for _, h := range jobs {
		switch {
		case h.kind.Finished(h.job):
			continue
		case h.specErr != nil:
			d.pending[h] = "InvalidWorkload: " + h.specErr.Error()
			continue
		case h.cluster == "":
			pending = append(pending, h)
			continue
		}
		if st, ok := state[h.cluster]; !ok || st == Lost {
			h.lostFrom, h.cluster = h.cluster, ""
			h.attempt = max(h.attempt, 1) + 1
			h.failovers++
			d.failovers = append(d.failovers, h)
			pending = append(pending, h)
			continue
		}
		pl := parsePlacement(h.placement)
		err := inCluster(pl, h.cluster, clusterOf)
		if err == nil {
			err = core.Restore(h.spec, pl)
		}
		if err != nil {
			stale, whyStale[h] = append(stale, h), err
		}
		d.mirror = append(d.mirror, h)
	}
	// A routed job runs (or waits) in its worker whatever became of the
	// nodes it was counted on: it is counted again, after every job whose
	// nodes still hold it, on what the worker has left (recount), so that it
	// always counts in its team's quota while it is routed.
	held := map[scheduler.NodeName]scheduler.GPUs{}
	for _, h := range stale {
		d.recounted = append(d.recounted, recount(core, cfg, h, whyStale[h], nodes[h.cluster], dearest, held))
	}
	// A worker that is unreachable within its grace keeps its jobs and takes
	// no new ones: its free GPUs are held.
	for _, w := range workers {
		if w.state != Unreachable {
			continue
		}
		for _, n := range nodes[w.name] {
			if used, err := core.NodeUsed(n.Name); err == nil && n.GPUs > used {
				_ = core.Hold(n.Name, n.GPUs-used)
			}
		}
	}
	rooms := fleetRooms(core, workers, nodes, held)
	byID := map[scheduler.WorkloadID]*hubJob{}
	for _, h := range pending {
		h.spec.Restarts = h.failovers
		if err := core.Submit(h.spec); err != nil {
			d.pending[h] = "InvalidWorkload: " + err.Error()
			continue
		}
		byID[h.spec.ID] = h
	}
	res := core.Cycle(now)
	for _, a := range res.Admitted {
		h := byID[a.Workload]
		if h == nil {
			continue
		}
		why := rooms.why(a, h.spec)
		rooms.take(a)
		d.routes = append(d.routes, routed{h, a, why})
		delete(byID, a.Workload)
	}
	for id, h := range byID {
		if why, ok := core.Reason(id); ok {
			d.pending[h] = string(why.Code) + ": " + why.String() + "; " + rooms.summary(h.spec)
		}
	}
	return d, nil
}

// route creates the job's copy in worker w and records the routing on the
// hub's Job.
func (r *Router) route(ctx context.Context, w *snapshot, h *hubJob, a scheduler.Admission, why string) error {
	if w == nil || w.client == nil {
		return fmt.Errorf("job %s routed to %s, which the hub cannot reach", h.job.GetName(), a.Cluster)
	}
	attempt := h.attempt
	if attempt == 0 {
		attempt = 1
	}
	// The routing is recorded first: a copy exists only for a recorded
	// routing (one whose record failed is made by the next pass's mirror).
	// It is written over the Job as read, or not at all: a second hub, or
	// this one reading an older Job, routes no job that was routed since.
	patch := client.MergeFromWithOptions(deepCopy(h.job), client.MergeFromWithOptimisticLock{})
	setAnnotation(h.job, AnnotationCluster, a.Cluster)
	setAnnotation(h.job, AnnotationAttempt, strconv.Itoa(attempt))
	setAnnotation(h.job, AnnotationPlacement, formatPlacement(a.Pods))
	setAnnotation(h.job, AnnotationWhy, bounded(why))
	h.placement = h.job.GetAnnotations()[AnnotationPlacement]
	setAnnotation(h.job, AnnotationPending, "")
	if err := r.Client.Patch(ctx, h.job, patch); err != nil {
		return fmt.Errorf("recording the routing of job %s/%s: %w", h.job.GetNamespace(), h.job.GetName(), err)
	}
	r.remember(h.job, a.Cluster, attempt, h.failovers)
	if r.Metrics != nil {
		r.Metrics.routed.WithLabelValues(a.Cluster).Inc()
	}
	r.Log.Info("job routed", "job", client.ObjectKeyFromObject(h.job), "cluster", a.Cluster, "attempt", attempt)
	cp := h.kind.Copy(h.job, a.Cluster, attempt, h.placement, w.fence)
	if err := w.client.Create(ctx, cp); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s/%s in %s: %w", h.kind.Name(), cp.GetNamespace(), cp.GetName(), a.Cluster, err)
	}
	return nil
}

// routing is what the router last wrote of a job's routing.
type routing struct {
	cluster, placement string
	attempt, failovers int
}

// remember notes a routing this router wrote, so that a pass that reads an
// older copy of the Job from the cache does not take it for unrouted, and
// the job's failovers.
func (r *Router) remember(j client.Object, cluster string, attempt, failovers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routed == nil {
		r.routed = map[types.UID]routing{}
	}
	r.routed[j.GetUID()] = routing{cluster: cluster, placement: j.GetAnnotations()[AnnotationPlacement], attempt: attempt, failovers: failovers}
}

// forgetGone drops what the router remembers of Jobs that are gone.
func (r *Router) forgetGone(live map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.routed {
		if !live[uid] {
			delete(r.routed, uid)
		}
	}
}

// recall takes what the router wrote of the Job's routing over what the
// Job says: the Job may be an older read (the cache lags), or edited since.
func (r *Router) recall(h *hubJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.routed[h.job.GetUID()]; ok {
		h.cluster, h.attempt, h.placement, h.remembered = m.cluster, m.attempt, m.placement, true
		h.failovers = m.failovers
	}
}

// own settles the routing of each job this router does not remember
// writing (the hub has just become the leader) on what the hub can trust:
// its copies of the Job in the workers that answered this pass, else what
// the Job says where it names a worker that could not be asked. A Job that
// names a worker that answered without its copy, or no registered worker,
// has the routing of its copy; with no copy, it was not routed by the hub
// (its annotations were written by hand): it is routed again, as a new
// attempt, through the core and the quotas. A copy of an older attempt than
// the Job says, where the Job is unrouted or names a worker that could not
// be asked, is stale (the job moved while that worker was lost): it is not
// taken back, where it could run beside a newer copy.
//
// The Job's word, taken where its worker cannot be asked, may be a forgery
// by whoever may write the Job. It is bounded to the job's own team and
// worker: decide counts the job in its team's quota, on nodes of the worker
// it names only (a placement on another cluster's nodes, of garbage, or on
// nodes gone is counted again there: recount), and that worker, unreachable,
// takes no new job whatever is counted on it; so the forgery takes no GPU
// another team could use, and lets its team run no more than its quota (it
// holds some of it for a job that does not run). It lasts until the worker
// answers without its copy (the Job is then routed again as a new attempt,
// through the core) or is Lost (a failover, counted in
// allot_hub_failovers_total of that registered worker). A forged later
// attempt naming such a worker, where the copy is in one that answered,
// makes that copy stale: the job's own copy restarts, nobody else's.
func (r *Router) own(jobs []*hubJob, workers []snapshot) {
	state := map[string]State{}
	unservedBy := map[string]map[string]bool{}
	newest := map[types.UID]routing{}
	for _, w := range workers {
		state[w.name] = w.state
		unservedBy[w.name] = w.unserved
		if w.state != Ready {
			continue
		}
		for _, cp := range w.copies {
			uid, a := types.UID(cp.GetLabels()[LabelHubJob]), parseAttempt(cp.GetAnnotations()[AnnotationAttempt])
			if n, ok := newest[uid]; !ok || a > n.attempt {
				newest[uid] = routing{cluster: w.name, attempt: a, placement: cp.GetAnnotations()[AnnotationPlacement]}
			}
		}
	}
	for _, h := range jobs {
		if h.remembered {
			continue
		}
		cp, copied := newest[h.job.GetUID()]
		st, known := state[h.cluster]
		// The worker it names could not be asked: down, or its copies of
		// this kind cannot be read there.
		doubt := known && (st != Ready || unservedBy[h.cluster][h.kind.Name()])
		switch {
		case copied && (cp.attempt >= max(h.attempt, 1) || h.cluster != "" && !doubt):
			if cp.placement == "" && cp.cluster == h.cluster && cp.attempt == h.attempt {
				cp.placement = h.placement // a copy made before copies carried it
			}
			h.cluster, h.attempt, h.placement = cp.cluster, cp.attempt, cp.placement
			continue
		case h.cluster == "" || doubt:
			continue // unrouted; or its worker cannot say (Lost: failover)
		case known:
			r.Log.Info("a Job says it is routed to a cluster where the hub has no copy of it, nor routed it: it is routed again", "job", client.ObjectKeyFromObject(h.job), "cluster", h.cluster)
		default:
			r.Log.Info("a Job says it is routed to a cluster that is not registered, where the hub did not route it: it is routed again", "job", client.ObjectKeyFromObject(h.job), "cluster", apilimits.Truncate(h.cluster, 253))
		}
		h.cluster, h.attempt, h.placement, h.unclaimed = "", max(h.attempt, 1)+1, "", true
	}
}

// asCopied reads each routed job whose copy its worker listed this pass as
// that copy: the copy, made from the Job as it was routed, is what the
// worker runs. Whoever may write the Job may edit it since (its
// parallelism; while it is suspended and has not started, its template's
// labels, its team's and tier's among them): what the Job says now would
// count the job for fewer GPUs, or in no team's quota, while its copy runs
// as routed. A job whose worker cannot be asked is read from the Job.
func asCopied(jobs []*hubJob, workers []snapshot, ten *tenancy) {
	byName := map[string]*snapshot{}
	for i := range workers {
		byName[workers[i].name] = &workers[i]
	}
	for _, h := range jobs {
		w := byName[h.cluster]
		if h.cluster == "" || w == nil {
			continue
		}
		cp := w.byUID[h.job.GetUID()]
		if cp == nil || cp.GetAnnotations()[AnnotationAttempt] != strconv.Itoa(max(h.attempt, 1)) || kindOf(cp) != h.kind {
			continue
		}
		h.spec, h.specErr = h.kind.Workload(cp, ten)
		h.spec.Submitted = h.job.GetCreationTimestamp().Time
	}
}

// restore writes the hub's routing back on a Job whose routing annotations
// say otherwise (edited by whoever may write the Job: the routing stays the
// hub's), and says so in an event.
func (r *Router) restore(ctx context.Context, h *hubJob) error {
	want := map[string]string{AnnotationCluster: h.cluster, AnnotationPlacement: h.placement, AnnotationAttempt: ""}
	if h.attempt > 0 {
		want[AnnotationAttempt] = strconv.Itoa(h.attempt)
	}
	read := h.job.GetAnnotations()
	if read[AnnotationCluster] == want[AnnotationCluster] && read[AnnotationAttempt] == want[AnnotationAttempt] && read[AnnotationPlacement] == want[AnnotationPlacement] {
		return nil
	}
	// A read older than what this router wrote (the cache lags) differs too:
	// the patch changes nothing then, and nothing is said.
	a := parseAttempt(read[AnnotationAttempt])
	edited := !h.remembered || a > h.attempt || a == h.attempt && read[AnnotationCluster] != ""
	patch := client.MergeFrom(deepCopy(h.job))
	for k, v := range want {
		if v == "" {
			setAnnotation(h.job, k, "")
		} else {
			setAnnotation(h.job, k, v)
		}
	}
	if err := r.Client.Patch(ctx, h.job, patch); err != nil {
		return fmt.Errorf("writing the routing of job %s/%s back: %w", h.job.GetNamespace(), h.job.GetName(), err)
	}
	if !edited {
		return nil
	}
	where := "not routed yet"
	if h.cluster != "" {
		where = fmt.Sprintf("routed to %s (attempt %d)", h.cluster, h.attempt)
	}
	r.Log.Info("the Job's routing annotations were edited: the hub's routing is written back", "job", client.ObjectKeyFromObject(h.job), "cluster", h.cluster, "attempt", h.attempt,
		"edited", apilimits.Truncate(read[AnnotationCluster], 253))
	if r.Recorder != nil {
		r.Recorder.Eventf(h.job, nil, corev1.EventTypeWarning, ReasonRoutingEdited, "Route", "%s",
			apilimits.Note(fmt.Sprintf("%s, %s and %s are the hub's, and were edited (cluster %q, attempt %q): the job stays %s; the edit is undone",
				AnnotationCluster, AnnotationAttempt, AnnotationPlacement, apilimits.Truncate(read[AnnotationCluster], 64), apilimits.Truncate(read[AnnotationAttempt], 16), where)))
	}
	return nil
}

// unroute forgets a routing to a lost worker: the next routing is a new
// attempt, and the lost worker's copy is stale when it comes back.
func (r *Router) unroute(ctx context.Context, h *hubJob) error {
	patch := client.MergeFrom(deepCopy(h.job))
	setAnnotation(h.job, AnnotationCluster, "")
	setAnnotation(h.job, AnnotationPlacement, "")
	setAnnotation(h.job, AnnotationWorkerPending, "") // the next worker's to say
	setAnnotation(h.job, AnnotationWorkerEvents, "")
	setAnnotation(h.job, AnnotationAttempt, strconv.Itoa(h.attempt))
	if err := r.Client.Patch(ctx, h.job, patch); err != nil {
		return err
	}
	r.remember(h.job, "", h.attempt, h.failovers)
	return nil
}

// sayRecounted tells of the routed jobs whose recorded nodes no longer hold
// them (decide counts them again: recount): a gauge by worker and how they
// are counted, and, on each Job of a worker the hub reads now, the
// annotation hub.allot.dev/accounted and a PlacementGone warning event when
// it changes; the annotation is removed once the job is counted on its nodes
// again. A worker that cannot be read now (a new leader has not probed it,
// say) changes no annotation: the nodes it had are not known to be gone.
func (r *Router) sayRecounted(ctx context.Context, d *decision, workers []snapshot) []error {
	ready := map[string]bool{}
	for _, w := range workers {
		ready[w.name] = w.state == Ready
	}
	if r.Metrics != nil {
		r.Metrics.placementGone.Reset()
	}
	var errs []error
	said := map[*hubJob]bool{}
	for _, rc := range d.recounted {
		h := rc.h
		said[h] = true
		if r.Metrics != nil {
			r.Metrics.placementGone.WithLabelValues(h.cluster, rc.counted).Inc()
		}
		if !ready[h.cluster] {
			continue
		}
		msg := bounded(rc.message())
		if h.job.GetAnnotations()[AnnotationAccounted] == msg {
			continue
		}
		r.Log.Info("a routed job's nodes no longer hold it: it is counted again", "job", client.ObjectKeyFromObject(h.job), "cluster", h.cluster, "counted", rc.counted, "on", apilimits.Truncate(rc.on, 253))
		if r.Recorder != nil {
			r.Recorder.Eventf(h.job, nil, corev1.EventTypeWarning, ReasonPlacementGone, "Route", "%s", apilimits.Note(msg))
		}
		errs = append(errs, r.annotate(ctx, h, AnnotationAccounted, msg))
	}
	for _, h := range d.mirror {
		if !said[h] && ready[h.cluster] {
			errs = append(errs, r.annotate(ctx, h, AnnotationAccounted, ""))
		}
	}
	return errs
}

// annotate sets the hub Job's annotation key to value (bounded; "" removes
// it), when it changes.
func (r *Router) annotate(ctx context.Context, h *hubJob, key, value string) error {
	value = bounded(value)
	if h.job.GetAnnotations()[key] == value {
		return nil
	}
	patch := client.MergeFrom(deepCopy(h.job))
	if value == "" {
		setAnnotation(h.job, key, "")
	} else {
		setAnnotation(h.job, key, value)
	}
	return r.Client.Patch(ctx, h.job, patch)
}

// mirror copies the status of the job's copy in w to the hub's Job; a copy
// that is gone (deleted in the worker) is made again.
func (r *Router) mirror(ctx context.Context, w *snapshot, h *hubJob) error {
	// The copy as listed this pass, if it is there: a call a job a pass was
	// too many (a worker's client makes 5 a second: 60 jobs in a worker
	// held every pass 10 s, and its jobs past the pass's bound went without
	// their fence renewed).
	cp := h.kind.New()
	var err error
	if listed := w.byUID[h.job.GetUID()]; listed != nil && listed.GetAnnotations()[AnnotationAttempt] == strconv.Itoa(max(h.attempt, 1)) && kindOf(listed) == h.kind {
		cp = listed
	} else {
		err = w.client.Get(ctx, client.ObjectKeyFromObject(h.job), cp)
	}
	switch {
	case apierrors.IsNotFound(err):
		return w.client.Create(ctx, h.kind.Copy(h.job, w.name, max(h.attempt, 1), h.placement, w.fence))
	case err != nil:
		return fmt.Errorf("reading %s %s/%s in %s: %w", h.kind.Name(), h.job.GetNamespace(), h.job.GetName(), w.name, err)
	case cp.GetLabels()[LabelHubJob] != string(h.job.GetUID()):
		// Not ours: an object of the same name made in the worker. It is
		// left alone; the hub object says why it does not run.
		why := fmt.Sprintf("cluster %s has a %s %s/%s this hub did not make (its %s label is %q, not this %s's UID): the copy cannot be made there; delete or rename that %s, or this one",
			w.name, h.kind.Name(), cp.GetNamespace(), cp.GetName(), LabelHubJob, cp.GetLabels()[LabelHubJob], h.kind.Name(), h.kind.Name())
		if h.job.GetAnnotations()[AnnotationConflict] != bounded(why) {
			r.Log.Info("an object of the same name that the hub did not make is in the worker: the copy cannot be made", "kind", h.kind.Name(), "job", client.ObjectKeyFromObject(h.job), "cluster", w.name)
		}
		return r.annotate(ctx, h, AnnotationConflict, why)
	}
	if err := r.annotate(ctx, h, AnnotationConflict, ""); err != nil {
		return err
	}
	// The fence is renewed once half of it is gone, to failoverAfter after
	// the worker's last successful probe (snapshot.fence): it always passes
	// before the hub could move the job, so a copy never starts after its
	// job went elsewhere. A JobSet's Jobs carry it too: the worker's
	// scheduler reads it on the Job of a pod.
	if err := r.renewFence(ctx, w, cp); err != nil {
		return err
	}
	for _, m := range w.members[h.job.GetUID()] {
		if m.Annotations[AnnotationAttempt] == cp.GetAnnotations()[AnnotationAttempt] {
			if err := r.renewFence(ctx, w, m); err != nil {
				return err
			}
		}
	}
	patch := client.MergeFrom(deepCopy(h.job))
	if !h.kind.TakeStatus(h.job, cp) {
		return nil
	}
	return r.Client.Status().Patch(ctx, h.job, patch)
}

// renewFence moves the fence of the copy (or a JobSet's Job) o in w to the
// worker's, once half of it is gone.
func (r *Router) renewFence(ctx context.Context, w *snapshot, o client.Object) error {
	fence, err := time.Parse(time.RFC3339, o.GetAnnotations()[contract.AnnotationHubFence])
	if err == nil && (fence.Sub(r.now()) >= w.failoverAfter/2 || !w.fence.After(fence)) {
		return nil
	}
	p := client.MergeFrom(deepCopy(o))
	setAnnotation(o, contract.AnnotationHubFence, w.fence.UTC().Format(fenceLayout))
	if err := w.client.Patch(ctx, o, p); err != nil {
		return fmt.Errorf("renewing the fence of %s/%s in %s: %w", o.GetNamespace(), o.GetName(), w.name, err)
	}
	return nil
}

// claim is a Job's routing as the pass read it (the Job's annotations, or
// what the router wrote since).
type claim struct {
	cluster string
	attempt int
}

// sweep deletes the copies in w whose hub Job is gone, routed elsewhere,
// or routed again since (an older attempt): they must not run beside the
// live copy. claims is every job's routing (own).
func (r *Router) sweep(ctx context.Context, w *snapshot, claims map[types.UID]claim) error {
	var errs []error
	for _, cp := range w.copies {
		c, ok := claims[types.UID(cp.GetLabels()[LabelHubJob])]
		if ok && c.cluster == w.name && cp.GetAnnotations()[AnnotationAttempt] == strconv.Itoa(max(c.attempt, 1)) {
			continue
		}
		r.Log.Info("deleting a stale copy", "cluster", w.name, "job", client.ObjectKeyFromObject(cp), "attempt", cp.GetAnnotations()[AnnotationAttempt])
		err := w.client.Delete(ctx, cp, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			if unanswered(err) {
				break // one timeout a pass, not one a copy
			}
		}
	}
	return errors.Join(errs...)
}

// eachWorker runs f for every worker at once (each its own calls, in order)
// and returns their errors: a worker that hangs delays the pass by its own
// timeout, once, and no other worker's calls. What a worker answered may
// echo the credentials the hub sent it: they are cut out of its errors,
// which the manager logs.
func (r *Router) eachWorker(workers []snapshot, f func(*snapshot) error) []error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if err := f(&workers[i]); err != nil && workers[i].cfg != nil {
				errs[i] = unquoted(err, workers[i].cfg)
			} else {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errs
}

// unanswered says whether err is a worker's silence (a timeout, a refused or
// broken connection) rather than an answer of its API server, or an answer
// that asks to be left alone (429 Too Many Requests, 503): the rest of the
// pass leaves the worker alone.
func unanswered(err error) bool {
	var st apierrors.APIStatus
	return err != nil && (!errors.As(err, &st) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err))
}

// noRetryAfter drops Retry-After from a worker's 429 and 5xx answers:
// client-go would sleep on it (an hour, if the worker says so) and ask
// again, up to its client's timeout at every call, holding up the pass and,
// while its copies are listed, every other worker's routing. The call fails
// at once instead, and the next pass asks again.
type noRetryAfter struct{ rt http.RoundTripper }

// WrappedRoundTripper lets client-go cancel a request through it.
func (t noRetryAfter) WrappedRoundTripper() http.RoundTripper { return t.rt }

// workerMapper maps the kinds the router reads and writes in a worker (its
// Jobs and JobSets; the pods and events of their copies, read only): no discovery,
// whose calls take no context (a worker that froze held each pass for its
// client's timeout, past the pass's bound), and two calls fewer to a worker
// that answers.
func workerMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{batchv1.SchemeGroupVersion, corev1.SchemeGroupVersion, eventsv1.SchemeGroupVersion, jobsetv1.SchemeGroupVersion})
	m.Add(batchv1.SchemeGroupVersion.WithKind("Job"), meta.RESTScopeNamespace)
	m.Add(jobsetv1.SchemeGroupVersion.WithKind("JobSet"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	m.Add(eventsv1.SchemeGroupVersion.WithKind("Event"), meta.RESTScopeNamespace)
	return m
}

func (t noRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError) {
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// workerCopy is the hub Job as the worker runs it: same namespace, name,
// labels and pod template, not managed by the hub, its pods pinned to the
// worker, labelled with the hub Job's UID and annotated with the attempt,
// the placement the hub counted it on (read back by a hub that has just
// become the leader) and the fence (until when the hub vouches for it:
// contract.AnnotationHubFence).
func workerCopy(j *batchv1.Job, cluster string, attempt int, placement string, fence time.Time) *batchv1.Job {
	cp := &batchv1.Job{ObjectMeta: copyMeta(j, cluster, attempt, placement, fence)}
	cp.Spec = *j.Spec.DeepCopy()
	cp.Spec.ManagedBy, cp.Spec.Selector, cp.Spec.ManualSelector, cp.Spec.Suspend = nil, nil, nil, nil
	labels := map[string]string{}
	for k, v := range cp.Spec.Template.Labels {
		if !generatedLabel(k) {
			labels[k] = v
		}
	}
	labels[contract.LabelCluster] = cluster
	cp.Spec.Template.Labels = labels
	return cp
}

// generatedLabel says whether the API server put the label on a Job or its
// template (the hub's Job UID and name): the worker sets its own.
func generatedLabel(k string) bool {
	switch k {
	case "controller-uid", "job-name", batchv1.ControllerUidLabel, batchv1.JobNameLabel:
		return true
	}
	return false
}

// tenancy is what decides a Job's team and default tier, as the workers'
// schedulers read it (runner.NamespaceTeams, runner.DefaultTier): read once
// a pass.
type tenancy struct {
	teams   map[string]*allotv1.Team
	nsTeams map[string]string
	tiers   []*allotv1.Tier
}

func newTenancy(teams []allotv1.Team, tiers []allotv1.Tier) *tenancy {
	t := &tenancy{teams: map[string]*allotv1.Team{}}
	for i := range teams {
		t.teams[teams[i].Name] = &teams[i]
	}
	for i := range tiers {
		t.tiers = append(t.tiers, &tiers[i])
	}
	t.nsTeams = runner.NamespaceTeams(t.teams)
	return t
}

// jobWorkload reads a hub Job as the core's workload: the team is its
// namespace's (a Team of that name, or the Team that maps the namespace;
// a label on the pod template must agree); the tier, topology, cluster and flavors
// come from the template's labels, as for pods (docs/scheduling.md); its
// gang is its parallelism (at most its completions).
func jobWorkload(j *batchv1.Job, ten *tenancy) (scheduler.Workload, error) {
	labels := j.Spec.Template.Labels
	w := scheduler.Workload{ID: scheduler.WorkloadID(j.Namespace + "/" + j.Name), Submitted: j.CreationTimestamp.Time}
	team := j.Namespace
	if ten.teams[team] == nil {
		team = ten.nsTeams[j.Namespace]
	}
	switch l := labels[contract.LabelTeam]; {
	case team == "":
		// As the workers' schedulers (--strict-tenancy): the hub copies a
		// Job into the same namespace of a worker, so only a team's own
		// namespaces may submit.
		return w, fmt.Errorf("namespace %s belongs to no team: submit in a team's namespace, or map this one to a team in the capacity repository (teams.<team>.namespaces)", j.Namespace)
	case l != "" && l != team:
		return w, fmt.Errorf("the pod template names team %s but namespace %s belongs to team %s", l, j.Namespace, team)
	}
	w.Team = scheduler.TeamName(team)
	tier := labels[contract.LabelTier]
	if tier == "" {
		tier = runner.DefaultTier(ten.teams[team], slices.Values(ten.tiers))
	}
	if tier == "" {
		return w, fmt.Errorf("the pod template has no label %s and team %s has no default tier", contract.LabelTier, team)
	}
	w.Tier = scheduler.TierName(tier)
	w.Require, w.Prefer, w.Cluster = labels[contract.LabelRequire], labels[contract.LabelPrefer], labels[contract.LabelCluster]
	for f := range strings.SplitSeq(labels[contract.LabelFlavor], ",") {
		if f = strings.TrimSpace(f); f != "" {
			w.Flavors = append(w.Flavors, scheduler.Flavor(f))
		}
	}
	w.Pods = 1
	if p := j.Spec.Parallelism; p != nil {
		w.Pods = int64(*p)
	}
	if c := j.Spec.Completions; c != nil && int64(*c) < w.Pods {
		w.Pods = int64(*c)
	}
	if w.Pods < 1 {
		return w, fmt.Errorf("parallelism %d: nothing to run", w.Pods)
	}
	w.GPUsPerPod = runner.PodGPUs(&corev1.Pod{Spec: j.Spec.Template.Spec})
	if w.GPUsPerPod <= 0 {
		return w, errors.New("the pod template requests no nvidia.com/gpu: the hub routes GPU jobs")
	}
	return w, nil
}

// maxAttempt bounds the attempt read from a Job (its annotation is anyone's
// who may write the Job): no count of routings reaches it.
const maxAttempt = 1 << 20

func parseAttempt(s string) int {
	a, err := strconv.Atoi(s)
	if err != nil || a < 0 || a > maxAttempt {
		return 0
	}
	return a
}

// finished says whether the Job completed or failed.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func statusEqual(a, b *batchv1.JobStatus) bool {
	return a.Active == b.Active && a.Succeeded == b.Succeeded && a.Failed == b.Failed &&
		ptrEq(a.Ready, b.Ready) && len(a.Conditions) == len(b.Conditions) &&
		a.StartTime.Equal(b.StartTime) && a.CompletionTime.Equal(b.CompletionTime)
}

func ptrEq(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func formatPlacement(pods []scheduler.PodPlacement) string {
	var b strings.Builder
	for i, p := range pods {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", p.Node, p.Pods)
		if b.Len() > maxPlacementBytes {
			return "" // too long to record: accounted on no node
		}
	}
	return b.String()
}

func parsePlacement(s string) []scheduler.PodPlacement {
	var out []scheduler.PodPlacement
	for part := range strings.SplitSeq(s, ",") {
		name, n, ok := strings.Cut(part, "=")
		pods, err := strconv.ParseInt(n, 10, 64)
		if ok && err == nil && pods > 0 {
			out = append(out, scheduler.PodPlacement{Node: scheduler.NodeName(name), Pods: pods})
		}
	}
	return out
}

// fenceLayout writes a fence to the millisecond (RFC 3339: the worker parses
// it with time.RFC3339), so that a short failoverAfter is kept exactly.
const fenceLayout = "2006-01-02T15:04:05.000Z07:00"

// bounded cuts an annotation's text at 2 KiB (on a rune boundary).
func bounded(s string) string {
	const most = 2 << 10
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// room is what one cluster offers of one flavor at the start of a pass.
type room struct {
	free, total scheduler.GPUs
	// cost is the least price of its nodes, per GPU-hour in millionths of
	// a dollar.
	cost  int64
	state State
}

// rooms are the fleet's clusters and what each offers, by flavor: the
// numbers the hub gives for its choices.
type rooms struct {
	clusters []string // by name
	state    map[string]State
	by       map[string]map[scheduler.Flavor]*room
}

func fleetRooms(core *scheduler.Scheduler, workers []snapshot, nodes map[string][]scheduler.Node, held map[scheduler.NodeName]scheduler.GPUs) *rooms {
	rs := &rooms{state: map[string]State{}, by: map[string]map[scheduler.Flavor]*room{}}
	for _, w := range workers {
		rs.clusters = append(rs.clusters, w.name)
		rs.state[w.name] = w.state
		rs.by[w.name] = map[scheduler.Flavor]*room{}
		if w.state == Lost {
			continue
		}
		for _, n := range nodes[w.name] {
			rm := rs.by[w.name][n.Flavor]
			if rm == nil {
				rm = &room{cost: n.Cost, state: w.state}
				rs.by[w.name][n.Flavor] = rm
			}
			rm.cost = min(rm.cost, n.Cost)
			if n.Unhealthy {
				continue
			}
			rm.total += n.GPUs
			if used, err := core.NodeUsed(n.Name); err == nil && w.state == Ready {
				rm.free += max(0, n.GPUs-used-held[n.Name])
			}
		}
	}
	return rs
}

// take counts an admission's GPUs as used.
func (rs *rooms) take(a scheduler.Admission) {
	if rm := rs.by[a.Cluster][a.Flavor]; rm != nil {
		for _, p := range a.Pods {
			rm.free -= p.GPUs
		}
	}
}

// why says why an admission went to its cluster and not elsewhere.
func (rs *rooms) why(a scheduler.Admission, w scheduler.Workload) string {
	need := w.GPUs()
	rm := rs.by[a.Cluster][a.Flavor]
	var b strings.Builder
	if w.Cluster != "" {
		fmt.Fprintf(&b, "routed to %s: its pod template names it (%s)", a.Cluster, contract.LabelCluster)
	} else {
		fmt.Fprintf(&b, "routed to %s: the cheapest cluster where %d GPUs of %s fit now, then the best fit", a.Cluster, need, a.Flavor)
	}
	if rm != nil {
		fmt.Fprintf(&b, " (%s, %d of %d GPUs free)", price(rm.cost), rm.free, rm.total)
	}
	for _, c := range rs.clusters {
		if c == a.Cluster || w.Cluster != "" {
			continue
		}
		b.WriteString("; not " + c + ": " + rs.whyNot(c, a.Flavor, need, rm))
	}
	return b.String()
}

// whyNot says why cluster c was not chosen for need GPUs of f, given the
// chosen cluster's room.
func (rs *rooms) whyNot(c string, f scheduler.Flavor, need scheduler.GPUs, chosen *room) string {
	switch rs.state[c] {
	case Lost:
		return "lost (unreachable longer than its failoverAfter)"
	case Unreachable:
		return "unreachable (it takes no new jobs)"
	}
	o := rs.by[c][f]
	switch {
	case o == nil || o.total == 0:
		return "no healthy node of " + string(f)
	case o.free < need:
		return fmt.Sprintf("%d of %d GPUs free, fewer than %d (%s)", o.free, o.total, need, price(o.cost))
	case chosen != nil && o.cost > chosen.cost:
		return fmt.Sprintf("%s, dearer (%d of %d GPUs free)", price(o.cost), o.free, o.total)
	}
	return fmt.Sprintf("no better: %s, %d of %d GPUs free (none of its nodes or domains holds the gang as well, or the GPUs free are not on nodes that hold whole pods)", price(o.cost), o.free, o.total)
}

// summary lists each cluster's free GPUs of the job's flavors and price.
func (rs *rooms) summary(w scheduler.Workload) string {
	var parts []string
	for _, c := range rs.clusters {
		switch rs.state[c] {
		case Lost:
			parts = append(parts, c+" lost")
			continue
		case Unreachable:
			parts = append(parts, c+" unreachable")
			continue
		}
		for _, f := range slices.Sorted(maps.Keys(rs.by[c])) {
			if len(w.Flavors) > 0 && !slices.Contains(w.Flavors, f) {
				continue
			}
			o := rs.by[c][f]
			parts = append(parts, fmt.Sprintf("%s %d of %d %s GPUs free (%s)", c, o.free, o.total, f, price(o.cost)))
		}
	}
	if w.Cluster != "" {
		parts = append(parts, "pinned to "+w.Cluster)
	}
	return "clusters: " + strings.Join(parts, ", ")
}

// price writes a cost per GPU-hour in millionths of a dollar.
func price(micro int64) string {
	return quantity.USD(quantity.Frac(micro, 1_000_000)) + " per GPU-hour"
}
