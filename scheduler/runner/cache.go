package runner

import (
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/scheduler"
)

// podInfo is what the runner keeps of one of its pods.
type podInfo struct {
	uid      types.UID
	ns, name string
	node     string
	created  time.Time
	gpus     int64
	labels   map[string]string
	gang     string
	// as is what allot bound it as (contract.AnnotationBoundAs), if it did.
	as *boundAs
	// rules are the pod's placement rules, or rulesErr why allot cannot
	// honour them.
	rules    *podRules
	rulesErr error
	// controlled pods have a controller (a Job) that recreates them.
	controlled bool
	terminal   bool
	deleting   bool
	// running: its containers run or ran to success (pod status), as the gang
	// timeout wants of every pod of a gang.
	running bool
	// What the runner is doing to the pod, until the API says it is done.
	binding  bool
	evicting bool
	// pending is the PodScheduled=False message last written.
	pending string
	// rv is the resourceVersion of the pod as last seen: a reason is
	// written on that version only, never on one bound since.
	rv string
	// scheduledAt is when the pod was bound (PodScheduled=True), if known.
	scheduledAt time.Time
	// deletedAt is when the pod asked to go must be gone (its deletion
	// timestamp: the end of its grace period), if it was asked.
	deletedAt time.Time
}

// live pods count toward their gang: not finished, not on their way out.
func (p *podInfo) live() bool { return !p.terminal && !p.deleting && !p.evicting }

// jobInfo is what a Job says of its gang.
type jobInfo struct {
	size    int64
	created time.Time
	// fence is the Job's contract.AnnotationHubFence (zero: not a hub's copy); bad
	// says it does not parse (the copy is not started).
	fence time.Time
	bad   bool
}

// foreignPod is a pod of another scheduler that holds GPUs on a node.
type foreignPod struct {
	node string
	gpus int64
}

// store is the cache the informers feed; the runner's mutex guards it.
type store struct {
	pods    map[types.UID]*podInfo
	gangs   map[string]*clusterWorkload
	nodes   map[string]*corev1.Node
	jobs    map[types.NamespacedName]jobInfo
	teams   map[string]*allotv1.Team
	cohorts map[string]*allotv1.Cohort
	tiers   map[string]*allotv1.Tier
	pools   map[string]poolInfo
	foreign map[types.UID]foreignPod
	// foreignOn sums, per node, the GPUs other schedulers' pods hold there.
	foreignOn map[string]int64
	// stuck are the gangs that run but could not be accounted for in the core:
	// the core is told their GPUs are held, like other schedulers' pods.
	stuck map[string]bool
	// What changed since the last cycle.
	configDirty bool
	nodesDirty  map[string]bool
	// heldDirty are nodes whose held GPUs (heldOn) may have changed.
	heldDirty map[string]bool
	dirty     map[string]bool
	// waiting are admitted gangs waiting for their victims' pods to go.
	waiting map[string]bool
	// jobGangs is the gang of each Job's pods (a Job's own, or one spanning
	// Jobs): the restarts kept for it go with the Job.
	jobGangs map[types.NamespacedName]string
	// restarts are the restarts of gangs evicted from a failed node, kept for
	// their pods' return.
	restarts map[string]int
	// nsTeams maps the namespaces Team objects claim (allotv1.AnnotationNamespaces)
	// to their team.
	nsTeams map[string]string
	// retries are when gangs whose bind was refused, out of the core, may be
	// submitted again.
	retries map[string]time.Time
}

func newStore() store {
	return store{
		pods: map[types.UID]*podInfo{}, gangs: map[string]*clusterWorkload{}, nodes: map[string]*corev1.Node{},
		jobs: map[types.NamespacedName]jobInfo{}, teams: map[string]*allotv1.Team{}, cohorts: map[string]*allotv1.Cohort{},
		tiers: map[string]*allotv1.Tier{}, pools: map[string]poolInfo{}, foreign: map[types.UID]foreignPod{},
		foreignOn: map[string]int64{}, stuck: map[string]bool{}, heldDirty: map[string]bool{},
		nodesDirty: map[string]bool{}, dirty: map[string]bool{}, waiting: map[string]bool{}, restarts: map[string]int{}, retries: map[string]time.Time{}, nsTeams: map[string]string{},
		jobGangs: map[types.NamespacedName]string{},
	}
}

// handler adapts informer callbacks to one upsert and one delete function, run
// under the runner's lock, and wakes the loop.
func (r *Runner) handler(upsert func(obj any), remove func(obj any)) toolscache.ResourceEventHandler {
	do := func(f func(any), obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		r.mu.Lock()
		f(obj)
		r.mu.Unlock()
		r.wake()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { do(upsert, obj) },
		UpdateFunc: func(_, obj any) { do(upsert, obj) },
		DeleteFunc: func(obj any) { do(remove, obj) },
	}
}

func (r *Runner) upsertPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	st := &r.st
	if p.Spec.SchedulerName != r.opts.SchedulerName {
		r.foreignPod(p)
		return
	}
	old := st.pods[p.UID]
	pi := &podInfo{
		uid: p.UID, ns: p.Namespace, name: p.Name, node: p.Spec.NodeName, rv: p.ResourceVersion, created: p.CreationTimestamp.Time,
		gpus: PodGPUs(p), labels: allotLabels(p.Labels), as: parseBoundAs(p.Namespace, p.Annotations),
		terminal: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
		running:  p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded,
		deleting: p.DeletionTimestamp != nil,
	}
	if p.DeletionTimestamp != nil {
		pi.deletedAt = p.DeletionTimestamp.Time
	}
	pi.rules, pi.rulesErr = rulesOf(p)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			pi.scheduledAt = c.LastTransitionTime.Time
		}
	}
	job := ""
	if ref := ownerRef(p); ref != nil {
		pi.controlled = true
		if ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
			job = ref.Name
		}
	}
	pi.gang = gangID(p.Namespace, job, p.Labels, p.Name)
	switch {
	case old != nil && old.node != "":
		// A pod on its node stays in the gang it was bound with, whatever
		// its labels (or owner) say since: moved to a gang of its own, it
		// ran outside its gang's slot, and that slot was given to another
		// pod beside it.
		pi.gang = old.gang
	case pi.node != "" && pi.as != nil:
		pi.gang = pi.as.Gang // the same, seen first after a restart
	}
	if job != "" {
		st.jobGangs[types.NamespacedName{Namespace: p.Namespace, Name: job}] = pi.gang
	}
	if old != nil {
		r.touchHeld(old) // before it may leave its gang, and the gang its stuck mark
		pi.binding, pi.evicting, pi.pending = old.binding, old.evicting, old.pending
		if pi.scheduledAt.IsZero() {
			pi.scheduledAt = old.scheduledAt
		}
		if old.node != "" && pi.node == "" {
			pi.node = old.node // the informer has not seen our bind yet
		}
		if old.node != "" && old.as != nil {
			pi.as = old.as // as bound, whatever the pod says since
		}
		if old.gang != pi.gang {
			r.leaveGang(old)
		}
	}
	st.pods[p.UID] = pi
	r.touchHeld(pi)
	if old != nil && !old.terminal && pi.terminal {
		// Metered up to when its containers stopped, as the kubelet says,
		// not to when the informer told us.
		until := r.opts.Now()
		if end := finishedAt(p); !end.IsZero() && end.Before(until) {
			until = end
		}
		r.stopMetering(pi, until)
	}
	g := st.gangs[pi.gang]
	if g == nil {
		g = &clusterWorkload{id: pi.gang, ns: p.Namespace, pods: map[types.UID]*podInfo{}}
		if job != "" && pi.gang == gangID(p.Namespace, job, nil, "") {
			g.job = types.NamespacedName{Namespace: p.Namespace, Name: job}
		}
		st.gangs[pi.gang] = g
	}
	g.pods[p.UID] = pi
	st.dirty[pi.gang] = true
}

func (r *Runner) deletePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if f, ok := r.st.foreign[p.UID]; ok {
		r.setForeign(p.UID, f, false)
	}
	if pi := r.st.pods[p.UID]; pi != nil {
		r.touchHeld(pi)
		if !pi.terminal {
			r.stopMetering(pi, r.opts.Now())
		}
		r.leaveGang(pi)
		delete(r.st.pods, p.UID)
	}
}

func (r *Runner) leaveGang(pi *podInfo) {
	if g := r.st.gangs[pi.gang]; g != nil {
		delete(g.pods, pi.uid)
		r.st.dirty[pi.gang] = true
		if len(g.pods) == 0 && g.phase == idle && g.binding == 0 {
			// Nothing to tell the core: forget it (a standby replica, which
			// runs no cycles, would otherwise keep every gang it ever saw).
			delete(r.st.gangs, pi.gang)
			delete(r.st.retries, pi.gang)
			delete(r.st.dirty, pi.gang)
			delete(r.st.stuck, pi.gang)
		}
	}
}

// foreignPod tracks other schedulers' pods holding GPUs: their GPUs are not
// allot's to give. The core is told they are held; the node is not rebuilt.
func (r *Runner) foreignPod(p *corev1.Pod) {
	old, had := r.st.foreign[p.UID]
	gpus := heldGPUs(PodGPUs(p))
	holds := p.Spec.NodeName != "" && gpus > 0 && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
	now := foreignPod{node: p.Spec.NodeName, gpus: gpus}
	switch {
	case holds && (!had || old != now):
		if had {
			r.setForeign(p.UID, old, false)
		}
		r.setForeign(p.UID, now, true)
	case !holds && had:
		r.setForeign(p.UID, old, false)
	}
}

// heldGPUs is what a pod allot does not account for holds on its node: what
// it asks, but no more than any node has (scheduler.MaxGPUsPerPod), so that
// the counts of such pods add up without overflow (two asking int64's
// largest summed to -2: their node was given out whole).
func heldGPUs(gpus int64) int64 { return min(gpus, scheduler.MaxGPUsPerPod) }

// setForeign adds or removes a foreign pod and its GPUs on its node.
func (r *Runner) setForeign(uid types.UID, f foreignPod, add bool) {
	st := &r.st
	if add {
		st.foreign[uid] = f
		st.foreignOn[f.node] += f.gpus
	} else {
		delete(st.foreign, uid)
		if st.foreignOn[f.node] -= f.gpus; st.foreignOn[f.node] <= 0 {
			delete(st.foreignOn, f.node)
		}
	}
	st.heldDirty[f.node] = true
}

// touchHeld marks the node of a pod of a stuck gang: what is held there changed.
func (r *Runner) touchHeld(p *podInfo) {
	if p != nil && p.node != "" && r.st.stuck[p.gang] {
		r.st.heldDirty[p.node] = true
	}
}

func (r *Runner) upsertNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		r.st.nodes[n.Name] = n
		r.st.nodesDirty[n.Name] = true
	}
}

func (r *Runner) deleteNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		delete(r.st.nodes, n.Name)
		r.st.nodesDirty[n.Name] = true
	}
}

func (r *Runner) upsertJob(obj any) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	size := int64(1)
	if j.Spec.Parallelism != nil {
		size = int64(*j.Spec.Parallelism)
	}
	if j.Spec.Completions != nil {
		// Pods that completed are done: the gang is what is left to run.
		size = min(size, max(1, int64(*j.Spec.Completions)-int64(j.Status.Succeeded)))
	}
	key := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
	info := jobInfo{size: size, created: j.CreationTimestamp.Time}
	if v, ok := j.Annotations[contract.AnnotationHubFence]; ok {
		t, err := time.Parse(time.RFC3339, v)
		info.fence, info.bad = t, err != nil
	}
	if old, ok := r.st.jobs[key]; !ok || old.size != size || !old.fence.Equal(info.fence) || old.bad != info.bad {
		r.st.dirty[gangID(j.Namespace, j.Name, nil, "")] = true
	}
	r.st.jobs[key] = info
}

func (r *Runner) deleteJob(obj any) {
	if j, ok := obj.(*batchv1.Job); ok {
		key := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
		delete(r.st.jobs, key)
		r.st.dirty[gangID(j.Namespace, j.Name, nil, "")] = true
		delete(r.st.restarts, gangID(j.Namespace, j.Name, nil, ""))
		if g, ok := r.st.jobGangs[key]; ok {
			delete(r.st.restarts, g) // a gang spanning Jobs goes with any of them
			delete(r.st.jobGangs, key)
		}
	}
}

// upsertConfig keeps the quota objects; a change of their spec (a new
// generation) rebuilds the core. Status writes, the runner's own among them,
// do not.
func (r *Runner) upsertConfig(obj any) {
	var changed bool
	switch o := obj.(type) {
	case *allotv1.Team:
		r.meter.seed(o)
		old := r.st.teams[o.Name]
		changed = old == nil || old.Generation != o.Generation || old.Annotations[allotv1.AnnotationNamespaces] != o.Annotations[allotv1.AnnotationNamespaces]
		r.st.teams[o.Name] = o
		r.mapNamespaces()
	case *allotv1.Cohort:
		old := r.st.cohorts[o.Name]
		changed = old == nil || old.Generation != o.Generation
		r.st.cohorts[o.Name] = o
	case *allotv1.Tier:
		old := r.st.tiers[o.Name]
		changed = old == nil || old.Generation != o.Generation
		r.st.tiers[o.Name] = o
	case *allotv1.Pool:
		pi := poolInfoOf(o)
		old, had := r.st.pools[o.Name]
		changed = !had || old.flavor != pi.flavor || old.cost != pi.cost || !slices.Equal(old.levels, pi.levels)
		r.st.pools[o.Name] = pi
	default:
		return
	}
	r.st.configDirty = r.st.configDirty || changed
}

func (r *Runner) deleteConfig(obj any) {
	switch o := obj.(type) {
	case *allotv1.Team:
		delete(r.st.teams, o.Name)
		r.mapNamespaces()
	case *allotv1.Cohort:
		delete(r.st.cohorts, o.Name)
	case *allotv1.Tier:
		delete(r.st.tiers, o.Name)
	case *allotv1.Pool:
		delete(r.st.pools, o.Name)
	default:
		return
	}
	r.st.configDirty = true
}

// finishedAt is when the last of a pod's containers terminated; zero when
// the kubelet has not said.
func finishedAt(p *corev1.Pod) time.Time {
	var end time.Time
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.FinishedAt.After(end) {
			end = t.FinishedAt.Time
		}
	}
	return end
}

func ownerRef(p *corev1.Pod) *metaOwner {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return &metaOwner{Kind: o.Kind, APIVersion: o.APIVersion, Name: o.Name}
		}
	}
	return nil
}

type metaOwner struct{ Kind, APIVersion, Name string }

func allotLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{contract.LabelTeam, contract.LabelTier, contract.LabelGang, contract.LabelGangSize, contract.LabelRequire, contract.LabelPrefer, contract.LabelFlavor, contract.LabelCluster} {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	return out
}

// mapNamespaces rebuilds the namespaces the Team objects claim. A namespace
// two teams claim (the capacity repository's checks refuse it) goes to the
// first by name.
func (r *Runner) mapNamespaces() {
	r.st.nsTeams = NamespaceTeams(r.st.teams)
}

// NamespaceTeams maps the namespaces Team objects claim
// (allotv1.AnnotationNamespaces) to their team; a namespace two teams claim
// goes to the first by name. A team's own namespace (its name) is not in it:
// it belongs to the team whatever others claim.
func NamespaceTeams(teams map[string]*allotv1.Team) map[string]string {
	out := map[string]string{}
	for _, name := range slices.Backward(slices.Sorted(maps.Keys(teams))) {
		for ns := range strings.SplitSeq(teams[name].Annotations[allotv1.AnnotationNamespaces], ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				out[ns] = name
			}
		}
	}
	return out
}
