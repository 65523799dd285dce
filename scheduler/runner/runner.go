package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/scheduler"
)

// Options configure the runner; zero values take the defaults.
type Options struct {
	// SchedulerName is the spec.schedulerName of the pods allot schedules.
	SchedulerName string
	// Core tunes the scheduling core (reservations, gang timeout, backoff).
	Core *scheduler.Options
	// CycleInterval is the least time between two cycles: events in between are
	// decided together. Default 20ms.
	CycleInterval time.Duration
	// Resync is the most time between two cycles without events (backoffs, gang
	// timeouts). Default 1s.
	Resync time.Duration
	// StatusInterval is how often Team status and the metrics are refreshed.
	// Default 10s.
	StatusInterval time.Duration
	// BindWorkers bounds the binding requests in flight. Default 64.
	BindWorkers int
	// SyncTimeout is how often, while the cache does not yet show every pod the
	// API has bound (before the first cycle), the runner says so and asks the
	// API again; it schedules nothing until then. Default 30s.
	SyncTimeout time.Duration
	// NotReadyGrace is how long a node may stay not Ready before the gangs
	// running on it are evicted; meanwhile it takes no new work. A GPU fault
	// evicts at once. Default 5m; negative: evict at once.
	NotReadyGrace time.Duration
	// StrictTenancy refuses the pods of namespaces that belong to no team (a
	// team's own, or one the capacity repository maps to it); without it their
	// allot.dev/team label names their team. A team's namespace always decides.
	StrictTenancy bool
	// Cluster names the cluster of the nodes that carry no allot.dev/cluster
	// label (the manager's --cluster). The core keeps every gang inside one
	// cluster, and a pod labelled allot.dev/cluster runs only in that one.
	Cluster string
	// UnbindRetry is the longest wait before the pods of a gang bound in part
	// that could not be taken back are tried again (doubling from 1s).
	// Default 5m.
	UnbindRetry time.Duration
	// StateNamespace is where the runner keeps what must outlive a leader: the
	// record of bare pods taken back from their nodes until they are made
	// again (the Secret UnboundRecord). The manager's namespace; empty: no
	// record, and a bare pod taken back is lost if the leader stops between
	// deleting it and making it again.
	StateNamespace string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.SchedulerName == "" {
		o.SchedulerName = contract.SchedulerName
	}
	if o.Core == nil {
		d := scheduler.DefaultOptions()
		o.Core = &d
	}
	if o.CycleInterval <= 0 {
		o.CycleInterval = 20 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = time.Second
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 10 * time.Second
	}
	if o.BindWorkers <= 0 {
		o.BindWorkers = 64
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.NotReadyGrace == 0 {
		o.NotReadyGrace = 5 * time.Minute
	}
	if o.UnbindRetry <= 0 {
		o.UnbindRetry = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/binding;pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=teams;cohorts;tiers;pools,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=teams/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Runner is the embedded scheduler: a manager runnable that needs leader election.
type Runner struct {
	opts   Options
	client client.Client
	reader client.Reader
	cache  ctrlcache.Cache
	events events.EventRecorder
	log    logr.Logger

	// recordMu serializes the updates of the UnboundRecord.
	recordMu sync.Mutex

	mu    sync.Mutex
	st    store
	meter meter
	core  *scheduler.Scheduler
	// coreErr says why the quota objects could not be built into a core.
	coreErr error
	// quotaGen is the generation of each Team the core was built from.
	quotaGen map[string]int64
	// goodCfg is the last quota tree the core took: a refused one leaves it
	// in force, and node changes are still taken in with it.
	goodCfg *scheduler.Config
	// known are the nodes as the core has them.
	known map[string]nodeModel
	// graceEnds are the ends of the grace of the known nodes that are not
	// Ready: the node is looked at again then.
	graceEnds map[string]time.Time

	kick chan struct{}
	sem  chan struct{}
	// pending are the reasons and events to write, in the order decided; one
	// writer drains them, so an older reason never lands after a newer one.
	pending pendingQueue
	// gate bounds the events of pods sent, all teams' and each team's.
	gate  eventGate
	tasks sync.WaitGroup

	// beforeReasonWrite, when set (by tests), is called between the check
	// that a pod is unbound and the write of its reason.
	beforeReasonWrite func(ns, name string)
}

// New returns a runner; SetupWithManager wires it into a manager.
func New(opts Options) *Runner {
	opts = opts.withDefaults()
	return &Runner{
		opts: opts, st: newStore(), meter: newMeter(), known: map[string]nodeModel{}, graceEnds: map[string]time.Time{},
		kick: make(chan struct{}, 1), pending: pendingQueue{kick: make(chan struct{}, 1)}, sem: make(chan struct{}, opts.BindWorkers),
		log: ctrl.Log.WithName("scheduler"),
	}
}

// SetupWithManager registers the runner's informers on the manager's cache and
// adds the runner, which runs only on the leader.
func (r *Runner) SetupWithManager(mgr ctrl.Manager) error {
	r.client, r.reader, r.cache = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetCache()
	r.events = boundedEvents{mgr.GetEventRecorder("allot-scheduler")}
	ctx := context.Background()
	for _, w := range []struct {
		obj            client.Object
		upsert, remove func(any)
	}{
		{&corev1.Pod{}, r.upsertPod, r.deletePod},
		{&corev1.Node{}, r.upsertNode, r.deleteNode},
		{&batchv1.Job{}, r.upsertJob, r.deleteJob},
		{&allotv1.Team{}, r.upsertConfig, r.deleteConfig},
		{&allotv1.Cohort{}, r.upsertConfig, r.deleteConfig},
		{&allotv1.Tier{}, r.upsertConfig, r.deleteConfig},
		{&allotv1.Pool{}, r.upsertConfig, r.deleteConfig},
	} {
		inf, err := r.cache.GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("scheduler: informer for %T: %w", w.obj, err)
		}
		if _, err := inf.AddEventHandler(r.handler(w.upsert, w.remove)); err != nil {
			return fmt.Errorf("scheduler: event handler for %T: %w", w.obj, err)
		}
	}
	return mgr.Add(r)
}

// boundedEvents records the runner's events with their notes cut to what the
// API server takes (apilimits.NoteBytes): a note may quote an API error, a
// pod's or a node's name, a gang's, and the API server drops a longer one
// without a trace.
type boundedEvents struct{ events.EventRecorder }

func (b boundedEvents) Eventf(regarding, related runtime.Object, kind, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, kind, reason, action, "%s", apilimits.Note(fmt.Sprintf(note, args...)))
}

// quoted is an error quoted inside a note, cut to half of what a note holds,
// so that the words around it are kept.
func quoted(err error) string { return apilimits.Truncate(err.Error(), apilimits.NoteBytes/2) }

// NeedLeaderElection makes only the leader schedule.
func (r *Runner) NeedLeaderElection() bool { return true }

func (r *Runner) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Start schedules until ctx ends: it waits for the cache to sync and to show
// every pod the API has bound, rebuilds the core from them, then runs cycles.
func (r *Runner) Start(ctx context.Context) error {
	r.log = ctrl.LoggerFrom(ctx).WithName("scheduler")
	if !r.cache.WaitForCacheSync(ctx) {
		return errors.New("scheduler: the cache did not sync")
	}
	if err := r.barrier(ctx); err != nil {
		return err
	}
	r.log.Info("cache synced, scheduling", "schedulerName", r.opts.SchedulerName)
	r.tasks.Add(3)
	go func() {
		defer r.tasks.Done()
		r.recoverUnbound(ctx)
	}()
	go func() {
		defer r.tasks.Done()
		r.statusLoop(ctx)
	}()
	go func() {
		defer r.tasks.Done()
		r.pendingLoop(ctx)
	}()
	resync := time.NewTicker(r.opts.Resync)
	defer resync.Stop()
	var last time.Time
	for {
		wakeAt := r.step(ctx)
		var wakeC <-chan time.Time
		var timer *time.Timer
		if !wakeAt.IsZero() {
			timer = time.NewTimer(time.Until(wakeAt))
			wakeC = timer.C
		}
		last = time.Now()
		select {
		case <-ctx.Done():
			r.tasks.Wait()
			return nil
		case <-r.kick:
		case <-resync.C:
		case <-wakeC:
		}
		if timer != nil {
			timer.Stop()
		}
		// Decide on a batch: let the events of one burst arrive.
		if d := r.opts.CycleInterval - time.Since(last); d > 0 {
			select {
			case <-ctx.Done():
				r.tasks.Wait()
				return nil
			case <-time.After(d):
			}
		}
	}
}

// barrier waits until the cache shows every pod of ours the API has bound, so
// that the first cycle sees all the capacity in use (Karpenter's "cluster
// synced"): a leader taking over never places on GPUs its predecessor gave away.
// It never gives up: every SyncTimeout it says what it still misses and asks
// the API again (a pod deleted meanwhile is no longer waited for), and until
// then nothing is scheduled (allot_scheduler_cache_synced is 0).
func (r *Runner) barrier(ctx context.Context) error {
	metricSynced.Set(0)
	for {
		missing, err := r.missingBound(ctx)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			metricSynced.Set(1)
			return nil
		}
		r.log.Info("the cache misses pods the API has bound; scheduling nothing until it shows them",
			"missing", len(missing), "example", missing[0], "waited", r.opts.SyncTimeout)
	}
}

// missingBound lists the pods of ours the API has bound and waits, up to
// SyncTimeout, for the cache to show them all on their nodes; it returns the
// ones it still misses (namespace/name).
func (r *Runner) missingBound(ctx context.Context) ([]string, error) {
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.MatchingFields{"spec.schedulerName": r.opts.SchedulerName}); err != nil {
		return nil, fmt.Errorf("scheduler: listing pods before the first cycle: %w", err)
	}
	want := map[types.UID]*corev1.Pod{}
	for i, p := range pods.Items {
		if p.Spec.NodeName != "" {
			want[p.UID] = &pods.Items[i]
		}
	}
	deadline := time.Now().Add(r.opts.SyncTimeout)
	for {
		r.mu.Lock()
		for uid, p := range want {
			if c := r.st.pods[uid]; c != nil && c.node == p.Spec.NodeName {
				delete(want, uid)
			}
		}
		r.mu.Unlock()
		if len(want) == 0 || time.Now().After(deadline) {
			missing := make([]string, 0, len(want))
			for _, p := range want {
				missing = append(missing, p.Namespace+"/"+p.Name)
			}
			slices.Sort(missing)
			return missing, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// step brings the core up to date with the cache, runs a cycle and applies it.
// It returns when a cycle may decide something new without any event.
func (r *Runner) step(ctx context.Context) time.Time {
	r.mu.Lock()
	now := r.opts.Now()
	var acts actions
	if r.core != nil {
		r.core.Advance(now)
	}
	for name, end := range r.graceEnds {
		if !now.Before(end) {
			r.st.nodesDirty[name] = true
		}
	}
	if r.st.configDirty || r.core == nil || r.nodesStructural(&acts) {
		r.rebuild(now, &acts)
	} else {
		r.syncHealth(&acts)
	}
	if r.core == nil {
		r.mu.Unlock()
		r.run(ctx, acts)
		return time.Time{}
	}
	// Gangs whose bind was refused try again once their backoff is over.
	wake := time.Time{}
	for id, at := range r.st.retries {
		if !now.Before(at) {
			r.st.dirty[id] = true
		} else if wake.IsZero() || at.Before(wake) {
			wake = at
		}
	}
	// Preemptors waiting for their victims' pods to go look again.
	for id := range r.st.waiting {
		if g := r.st.gangs[id]; g != nil && len(g.waitFor) > 0 && g.phase == admitted {
			r.st.dirty[id] = true
		} else {
			delete(r.st.waiting, id)
		}
	}
	// In name order: pods created in one second (the API's resolution) are
	// queued in an order that does not change from run to run.
	for _, id := range slices.Sorted(maps.Keys(r.st.dirty)) {
		if g := r.st.gangs[id]; g != nil {
			r.syncGang(g, now, &acts)
		}
	}
	clear(r.st.dirty)
	r.applyHolds()
	start := time.Now()
	res := r.core.Cycle(now)
	metricCycle.Observe(time.Since(start).Seconds())
	metricWalks.WithLabelValues(string(res.Walk)).Inc()
	metricConsidered.Add(float64(res.Considered))
	metricSkipped.Add(float64(res.Skipped))
	r.applyResults(res, now, &acts)
	r.mu.Unlock()
	r.run(ctx, acts)
	if !wake.IsZero() && (res.Wake.IsZero() || wake.Before(res.Wake)) {
		return wake
	}
	return res.Wake
}

// nodesStructural brings the core's nodes up to date in place where it can:
// a node added is added, a node removed is removed (the gangs on it evicted),
// a node relabelled or resized that runs none of the core's pods is removed
// and added again. It says whether what is left needs a rebuild of the core
// (a relabelled node running gangs, or a change the core refuses).
func (r *Runner) nodesStructural(acts *actions) bool {
	for _, name := range slices.Sorted(maps.Keys(r.st.nodesDirty)) {
		m, ok := r.model(name)
		old, had := r.known[name]
		switch {
		case !ok && !had:
			delete(r.st.nodesDirty, name)
		case ok && !had:
			if r.core.AddNode(m.spec) != nil {
				return true
			}
			r.setKnown(name, m)
			delete(r.st.nodesDirty, name)
		case !ok:
			evicted, err := r.core.RemoveNode(scheduler.NodeName(name))
			if err != nil {
				return true
			}
			delete(r.known, name)
			delete(r.graceEnds, name)
			delete(r.st.nodesDirty, name)
			r.evictGangs(evicted, "NodeRemoved", fmt.Sprintf("node %s was removed", name), acts)
		default:
			a, b := m.spec, old.spec
			a.Unhealthy, b.Unhealthy = false, false
			if a.GPUs == b.GPUs && a.Flavor == b.Flavor && a.Class == b.Class && slices.Equal(a.Domains, b.Domains) {
				continue // its health, if anything: syncHealth
			}
			if used, err := r.core.NodeUsed(scheduler.NodeName(name)); err != nil || used > 0 {
				return true
			}
			if _, err := r.core.RemoveNode(scheduler.NodeName(name)); err != nil {
				return true
			}
			if r.core.AddNode(m.spec) != nil {
				return true
			}
			r.setKnown(name, m)
			r.st.heldDirty[name] = true // what other schedulers' pods hold there
		}
	}
	return false
}

// model is a node as the core should have it, now (what other schedulers'
// pods hold there is told with applyHolds).
func (r *Runner) model(name string) (nodeModel, bool) {
	n := r.st.nodes[name]
	if n == nil {
		return nodeModel{}, false
	}
	return modelNode(n, r.st.pools, r.opts.Cluster, r.opts.NotReadyGrace, r.opts.Now())
}

// setKnown records a node as the core has it; a change of whether it is
// closed changes what it holds.
func (r *Runner) setKnown(name string, m nodeModel) {
	old, had := r.known[name]
	r.known[name] = m
	if !had || old.closed() != m.closed() || old.faulty != m.faulty {
		r.st.heldDirty[name] = true
	}
	if m.graceEnds.IsZero() {
		delete(r.graceEnds, name)
	} else {
		r.graceEnds[name] = m.graceEnds
	}
}

// heldOn is what a node's GPUs hold outside the core: all of them when it is
// closed; else its unhealthy GPUs, other schedulers' pods and the bound pods
// of stuck gangs.
func (r *Runner) heldOn(name string) int64 {
	m := r.known[name]
	if m.closed() {
		return m.spec.GPUs
	}
	held := m.faulty + r.st.foreignOn[name]
	for id := range r.st.stuck {
		if g := r.st.gangs[id]; g != nil {
			for _, p := range g.pods {
				if p.node == name && occupies(p) {
					held += heldGPUs(p.gpus)
				}
			}
		}
	}
	return held
}

// applyHolds tells the core what is held on the nodes whose holds changed.
func (r *Runner) applyHolds() {
	for name := range r.st.heldDirty {
		if _, ok := r.known[name]; ok {
			if err := r.core.Hold(scheduler.NodeName(name), r.heldOn(name)); err != nil {
				r.log.Error(err, "holding GPUs", "node", name)
			}
		}
	}
	clear(r.st.heldDirty)
}

// syncHealth tells the core of nodes that turned healthy or unhealthy; the
// gangs on a failed node are evicted whole.
func (r *Runner) syncHealth(acts *actions) {
	for _, name := range slices.Sorted(maps.Keys(r.st.nodesDirty)) {
		m, ok := r.model(name)
		old, had := r.known[name]
		if !ok || !had {
			continue
		}
		r.setKnown(name, m)
		if m.spec.Unhealthy == old.spec.Unhealthy {
			continue
		}
		evicted, err := r.core.SetNodeHealth(scheduler.NodeName(name), !m.spec.Unhealthy)
		if err != nil {
			r.log.Error(err, "setting node health", "node", name)
			continue
		}
		r.evictGangs(evicted, "NodeUnhealthy", unhealthyWhy(name, m, r.opts.NotReadyGrace), acts)
	}
	clear(r.st.nodesDirty)
}

// unhealthyWhy says why a node's gangs are evicted.
func unhealthyWhy(name string, m nodeModel, grace time.Duration) string {
	switch {
	case m.reason == nodestate.ReasonNotReady && grace > 0:
		return fmt.Sprintf("node %s is not Ready for longer than %s", name, grace)
	case m.reason != "":
		return fmt.Sprintf("node %s is unhealthy (%s)", name, m.reason)
	}
	return fmt.Sprintf("node %s is unhealthy", name)
}

// evictGangs evicts whole gangs the core took back, and forgets them: their pods
// (made again by their Job) come back as a new submission, which carries the
// restarts so that it goes ahead of its tier.
func (r *Runner) evictGangs(ids []scheduler.WorkloadID, reason, why string, acts *actions) {
	for _, id := range ids {
		metricEvictions.WithLabelValues(reason).Inc()
		note := why
		if n := r.core.Restarts(id); n > 0 {
			r.st.restarts[string(id)] = n
			note = fmt.Sprintf("%s; restart %d, requeued ahead of its tier", why, n)
		}
		_ = r.core.Finish(id)
		g := r.st.gangs[string(id)]
		if g == nil {
			continue
		}
		acts.evict(g, reason, fmt.Sprintf("gang %s evicted: %s", g.id, note))
		g.on(fact{kind: factLeft})
		r.st.dirty[g.id] = true
	}
}

// rebuild makes a new core from the quota objects and nodes, restores the
// admitted and running gangs into it and resubmits the pending ones in their
// order. A quota tree the core refuses leaves the last good core in force.
func (r *Runner) rebuild(now time.Time, acts *actions) {
	metricRebuilds.Inc()
	cfg, err := quotaConfig(slices.Collect(derefs(r.st.teams)), slices.Collect(derefs(r.st.cohorts)), slices.Collect(derefs(r.st.tiers)))
	var core *scheduler.Scheduler
	if err == nil {
		core, err = scheduler.New(cfg, *r.opts.Core)
	}
	r.st.configDirty = false
	if err != nil {
		if r.coreErr == nil || r.coreErr.Error() != err.Error() {
			r.log.Error(err, "quota objects refused; the last good quota stays in force")
		}
		r.coreErr = err
		if r.goodCfg == nil {
			return
		}
		// Nodes may have changed: rebuild on them with the last good quotas.
		if core, err = scheduler.New(*r.goodCfg, *r.opts.Core); err != nil {
			return
		}
	} else {
		r.coreErr, r.goodCfg = nil, &cfg
		r.quotaGen = map[string]int64{}
		for name, t := range r.st.teams {
			r.quotaGen[name] = t.Generation
		}
	}
	core.Advance(now)
	old := r.core
	r.core, r.known = core, map[string]nodeModel{}
	clear(r.graceEnds)
	// Every stuck gang is tried again. What nodes hold is told once the
	// running gangs are restored (Restore does not count it: what runs, runs).
	for id := range r.st.stuck {
		if g := r.st.gangs[id]; g != nil {
			g.stuck = ""
		}
	}
	clear(r.st.stuck)
	for _, name := range slices.Sorted(maps.Keys(r.st.nodes)) {
		m, ok := r.model(name)
		if !ok {
			continue
		}
		healthy := m.spec
		healthy.Unhealthy = false
		if err := core.AddNode(healthy); err != nil {
			r.log.Error(err, "adding node", "node", name)
			continue
		}
		m.spec.Unhealthy = false
		r.setKnown(name, m)
	}
	clear(r.st.nodesDirty)
	// Admitted gangs first, in their order, then the rest.
	ids := slices.Sorted(maps.Keys(r.st.gangs))
	for _, id := range ids {
		g := r.st.gangs[id]
		if g.phase != admitted || (g.fresh && len(g.sortedPods(isBound)) == 0) {
			// Not placed yet (an admission still waiting for its victims to
			// go, or for its binds): it is decided again, with its timeouts.
			g.on(fact{kind: factLeft})
			continue
		}
		if err := core.Restore(g.spec, slotPlacement(g.slots)); err != nil {
			nodeGone := false
			for n := range g.slots {
				if _, ok := r.known[n]; !ok {
					nodeGone = true
				}
			}
			if nodeGone || g.fresh {
				// Its node left the fleet, or it had not started: take it back.
				r.log.Error(err, "restoring an admitted gang; taking it back", "workload", id)
				acts.unbind(g, g.sortedPods(isBound), fmt.Sprintf("gang %s no longer fits after a change of nodes or quotas: %v", id, err))
			} else {
				// Running work is not stopped by a change of quota objects.
				r.setStuck(g, fmt.Sprintf("running gang not accounted for after a change of quota objects: %v; its GPUs are held until it ends", err))
				r.log.Error(err, "running gang not accounted for; it keeps running", "workload", id)
				if live := g.sortedPods(isLive); len(live) > 0 {
					acts.event(live[0], corev1.EventTypeWarning, "NotAccounted", g.stuck)
				}
			}
			g.on(fact{kind: factLeft})
		}
	}
	for _, id := range ids {
		if g := r.st.gangs[id]; g.phase == idle {
			r.syncGang(g, now, acts)
		}
	}
	r.applyHolds()
	for _, name := range slices.Sorted(maps.Keys(r.st.nodes)) {
		if m, ok := r.model(name); ok && m.spec.Unhealthy {
			r.setKnown(name, m)
			evicted, err := core.SetNodeHealth(scheduler.NodeName(name), false)
			if err == nil {
				r.evictGangs(evicted, "NodeUnhealthy", unhealthyWhy(name, m, r.opts.NotReadyGrace), acts)
			}
		}
	}
	if old == nil {
		r.log.Info("scheduler state rebuilt", "nodes", len(r.known), "gangs", len(ids))
	}
}

func slotPlacement(slots map[string]int64) []scheduler.PodPlacement {
	out := make([]scheduler.PodPlacement, 0, len(slots))
	for _, n := range slices.Sorted(maps.Keys(slots)) {
		if slots[n] > 0 {
			out = append(out, scheduler.PodPlacement{Node: scheduler.NodeName(n), Pods: slots[n]})
		}
	}
	return out
}

func derefs[T any](m map[string]*T) func(func(T) bool) {
	return func(yield func(T) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(*m[k]) {
				return
			}
		}
	}
}

// applyResults turns a cycle's decisions into actions: evictions, preemptions
// (the victims' pods evicted, the preemptor bound once they are gone), bindings
// and pending reasons.
func (r *Runner) applyResults(res scheduler.Results, now time.Time, acts *actions) {
	for _, e := range res.Evicted {
		g := r.st.gangs[string(e.Workload)]
		metricEvictions.WithLabelValues(e.Reason).Inc()
		if g == nil {
			continue
		}
		// The core requeued it (a gang timeout): take back what was bound.
		acts.unbind(g, g.sortedPods(isBound), fmt.Sprintf("gang %s did not have every pod running within the gang timeout; requeued", g.id))
		g.on(fact{kind: factRequeued})
	}
	victimPods := map[scheduler.WorkloadID][]types.UID{}
	for _, p := range res.Preempted {
		metricPreemptions.WithLabelValues(string(p.Reason)).Inc()
		_ = r.core.Finish(p.Victim)
		g := r.st.gangs[string(p.Victim)]
		if g == nil {
			continue
		}
		victimPods[p.By] = append(victimPods[p.By], acts.evict(g, "Preempted",
			fmt.Sprintf("preempted by %s (%s): %s", p.By, p.Reason, preemptWhy(p.Reason)))...)
		g.on(fact{kind: factLeft})
		r.st.dirty[g.id] = true
	}
	for _, a := range res.Admitted {
		g := r.st.gangs[string(a.Workload)]
		if g == nil {
			_ = r.core.Finish(a.Workload)
			continue
		}
		if j, ok := r.st.jobs[g.job]; ok && g.job.Name != "" && fenced(j, g.job.Name, now) != "" {
			// A hub's copy whose fence passed while it waited: not started;
			// submitted again (and told why) when the gang is synced next.
			_ = r.core.Finish(a.Workload)
			g.on(fact{kind: factLeft})
			r.st.dirty[g.id] = true
			continue
		}
		slots := map[string]int64{}
		for _, p := range a.Pods {
			slots[string(p.Node)] += p.Pods
		}
		g.on(fact{kind: factAdmitted, slots: slots, victims: victimPods[a.Workload]})
		if len(g.waitFor) > 0 {
			r.st.waiting[g.id] = true
		}
		metricWait.WithLabelValues(string(g.spec.Tier)).Observe(now.Sub(g.spec.Submitted).Seconds())
		for _, p := range g.pods {
			p.pending = ""
		}
		r.dispatch(g, acts)
	}
	for _, p := range res.Pending {
		if g := r.st.gangs[string(p.Workload)]; g != nil {
			r.setPending(g, g.sortedPods(isLive), string(p.Reason.Code), p.Reason.String(), acts)
		}
	}
}

func preemptWhy(r scheduler.PreemptReason) string {
	switch r {
	case scheduler.PreemptReclaim:
		return "a team under its nominal quota reclaims GPUs this gang's team borrowed"
	case scheduler.PreemptHigherTier:
		return "a higher tier of the same team needs the GPUs of this preemptible tier"
	}
	return string(r)
}
