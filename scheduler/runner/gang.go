package runner

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
)

// clusterWorkload is the runner's record of one workload in the cluster (its
// gang): the pods of one Job, of one allot.dev/gang label, or a single pod.
type clusterWorkload struct {
	id   string
	ns   string
	job  types.NamespacedName
	pods map[types.UID]*podInfo
	// spec as last submitted.
	spec scheduler.Workload
	// lifecycle is where it stands with the core.
	lifecycle
	// binding counts its binds in flight.
	binding int
	// stuck says why a running gang could not be accounted for (see setStuck);
	// cleared by a rebuild, which tries again.
	stuck string
	// unbindFails counts the takings back of its pods that failed in a row;
	// bound in part, it is not taken back again before unbindAt.
	unbindFails int
	unbindAt    time.Time
}

// gangID names a workload: the gang label's when the pod also gives the
// gang's size (a gang may span Jobs, e.g. a JobSet's), else the Job's, else
// the gang label's, else the pod's, in its namespace. The kind keeps a Job, a
// gang and a pod of one name apart.
func gangID(ns, job string, labels map[string]string, pod string) string {
	gang := labels[contract.LabelGang]
	_, sized := labels[contract.LabelGangSize]
	switch {
	case gang != "" && (sized || job == ""):
		return ns + "/gang/" + gang
	case job != "":
		return ns + "/job/" + job
	}
	return ns + "/pod/" + pod
}

// sortedPods returns the gang's pods in name order, for stable decisions.
func (g *clusterWorkload) sortedPods(keep func(*podInfo) bool) []*podInfo {
	out := make([]*podInfo, 0, len(g.pods))
	for _, p := range g.pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *podInfo) int { return cmp.Compare(a.name, b.name) })
	return out
}

func isLive(p *podInfo) bool       { return p.live() }
func isBound(p *podInfo) bool      { return p.live() && p.node != "" }
func isUnassigned(p *podInfo) bool { return p.live() && p.node == "" && !p.binding }

// fenced says why the pods of a hub's copy may not start now, or "".
func fenced(j jobInfo, job string, now time.Time) string {
	switch {
	case j.bad:
		return fmt.Sprintf("Job %s: annotation %s is not an RFC 3339 time: the hub's copy waits for the hub to set it", job, contract.AnnotationHubFence)
	case !j.fence.IsZero() && !now.Before(j.fence):
		return fmt.Sprintf("Job %s is a hub's copy whose fence passed at %s: the hub has not reached this cluster since, and may have moved the job elsewhere; it starts when the hub renews the fence", job, j.fence.UTC().Format(time.RFC3339))
	}
	return ""
}

// specError is a gang the core cannot take as it is: the message says which
// label or object to fix.
type specError struct{ msg string }

func (e *specError) Error() string { return e.msg }

// workload derives the core's Workload from the gang's pods' labels (and
// Job), or says what is wrong with them. A pod's team is its namespace's: a
// team label is only checked against it, and only for a gang not yet bound
// (bound is false): a label can be changed after the bind, and a running gang
// is accounted in its namespace's team whatever its labels say since.
func (r *Runner) workload(g *clusterWorkload, live []*podInfo, bound bool) (scheduler.Workload, error) {
	w := scheduler.Workload{ID: scheduler.WorkloadID(g.id), Restarts: r.st.restarts[g.id]}
	first := live[0]
	agree := func(label string) (string, error) {
		v := first.labels[label]
		for _, p := range live[1:] {
			if p.labels[label] != v {
				return "", &specError{fmt.Sprintf("pods %s and %s of the gang disagree on label %s (%q and %q)", first.name, p.name, label, v, p.labels[label])}
			}
		}
		return v, nil
	}
	var err error
	team, err := agree(contract.LabelTeam)
	if err != nil {
		return w, err
	}
	owner, owned := r.namespaceTeam(g.ns)
	switch {
	case owned && team != "" && team != owner && !bound:
		return w, &specError{fmt.Sprintf("pod %s names team %s (label %s) but namespace %s belongs to team %s: a pod's team is its namespace's", first.name, team, contract.LabelTeam, g.ns, owner)}
	case owned:
		team = owner
	case r.opts.StrictTenancy:
		return w, noTeamError(g.ns)
	case team == "":
		return w, &specError{fmt.Sprintf("pod %s has no label %s and namespace %s belongs to no team", first.name, contract.LabelTeam, g.ns)}
	}
	w.Team = scheduler.TeamName(team)
	tier, err := agree(contract.LabelTier)
	if err != nil {
		return w, err
	}
	if tier == "" {
		if tier = r.defaultTier(team); tier == "" {
			return w, &specError{fmt.Sprintf("pod %s has no label %s and team %s has no default tier", first.name, contract.LabelTier, team)}
		}
	}
	if t := r.st.teams[team]; t != nil && len(t.Spec.Tiers) > 0 && !slices.Contains(t.Spec.Tiers, tier) {
		return w, &specError{fmt.Sprintf("pod %s asks for tier %s, which team %s may not use (its tiers: %s)", first.name, tier, team, strings.Join(t.Spec.Tiers, ", "))}
	}
	w.Tier = scheduler.TierName(tier)
	for _, l := range []struct {
		label string
		to    *string
	}{{contract.LabelRequire, &w.Require}, {contract.LabelPrefer, &w.Prefer}, {contract.LabelCluster, &w.Cluster}} {
		if *l.to, err = agree(l.label); err != nil {
			return w, err
		}
	}
	fl, err := agree(contract.LabelFlavor)
	if err != nil {
		return w, err
	}
	for f := range strings.SplitSeq(fl, ",") {
		if f = strings.TrimSpace(f); f != "" {
			w.Flavors = append(w.Flavors, scheduler.Flavor(f))
		}
	}
	for _, p := range live {
		if p.rulesErr != nil {
			return w, &specError{p.rulesErr.Error()}
		}
		if p.rules.key != first.rules.key {
			return w, &specError{fmt.Sprintf("pods %s and %s of the gang disagree on their placement rules (tolerations, nodeSelector, required node affinity): a gang's pods are alike", first.name, p.name)}
		}
	}
	w.Rules = first.rules
	w.GPUsPerPod = first.gpus
	for _, p := range live[1:] {
		if p.gpus != w.GPUsPerPod {
			return w, &specError{fmt.Sprintf("pods %s and %s of the gang request different GPUs (%d and %d): a gang's pods are alike", first.name, p.name, w.GPUsPerPod, p.gpus)}
		}
	}
	if w.GPUsPerPod <= 0 {
		return w, &specError{fmt.Sprintf("pod %s requests no %s: allot schedules GPU pods", first.name, nodestate.ResourceGPU)}
	}
	w.Submitted = first.created
	for _, p := range live {
		if p.created.Before(w.Submitted) {
			w.Submitted = p.created
		}
	}
	switch {
	case g.job.Name != "":
		j, ok := r.st.jobs[g.job]
		if !ok {
			return w, &specError{fmt.Sprintf("waiting for Job %s to be seen", g.job.Name)}
		}
		w.Pods, w.Submitted = j.size, j.created
	case strings.Contains(g.id, "/gang/"):
		s, err := agree(contract.LabelGangSize)
		if err != nil {
			return w, err
		}
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || n < 1 {
			return w, &specError{fmt.Sprintf("pod %s: label %s=%q is not a positive pod count", first.name, contract.LabelGangSize, s)}
		}
		w.Pods = n
	default:
		w.Pods = 1
	}
	return w, nil
}

// boundWorkload is the Workload of a gang found bound (at a restart, a leader
// change or a rebuild of the core): what its bound pods were bound as
// (contract.AnnotationBoundAs), in its namespace's team. What their labels say since
// counts for nothing: a relabelled running gang would otherwise be set aside
// as not accounted for, its GPUs charged to no team, and its team's next pods
// admitted over its quota. Its placement is where it runs: no flavor, domain
// or cluster label is asked of it. Pods bound without a record (created
// bound, or by an allot that wrote none) are taken by their labels, in a
// team's namespace in that team.
func (r *Runner) boundWorkload(g *clusterWorkload, live, bound []*podInfo) (scheduler.Workload, error) {
	// Pods bound into the gang later (replacements) were bound as its size
	// then: the largest is what it was admitted for.
	var as boundAs
	for _, p := range bound {
		if p.as == nil || p.as.Gang != g.id || as.Team != "" && (p.as.Team != as.Team || p.as.Tier != as.Tier) {
			return r.workload(g, live, true)
		}
		as = boundAs{Gang: g.id, Team: p.as.Team, Tier: p.as.Tier, Pods: max(as.Pods, p.as.Pods)}
	}
	w := scheduler.Workload{ID: scheduler.WorkloadID(g.id), Restarts: r.st.restarts[g.id],
		Team: scheduler.TeamName(as.Team), Tier: scheduler.TierName(as.Tier), Pods: as.Pods}
	if owner, owned := r.namespaceTeam(g.ns); owned {
		w.Team = scheduler.TeamName(owner)
	} else if r.opts.StrictTenancy {
		return w, noTeamError(g.ns)
	}
	if j, ok := r.st.jobs[g.job]; ok && g.job.Name != "" {
		w.Pods = min(w.Pods, j.size) // pods that completed are done
	}
	// More pods bound than it was bound as: all of them are accounted.
	w.Pods = max(w.Pods, int64(len(bound)))
	first := bound[0]
	w.GPUsPerPod, w.Submitted = first.gpus, first.created
	if first.rules != nil {
		w.Rules = first.rules
	}
	for _, p := range live {
		if p.gpus != w.GPUsPerPod {
			return w, &specError{fmt.Sprintf("pods %s and %s of the gang request different GPUs (%d and %d): a gang's pods are alike", first.name, p.name, w.GPUsPerPod, p.gpus)}
		}
		if p.created.Before(w.Submitted) {
			w.Submitted = p.created
		}
	}
	return w, nil
}

// noTeamError refuses a pod of a namespace of no team under StrictTenancy.
func noTeamError(ns string) error {
	return &specError{fmt.Sprintf("namespace %s belongs to no team: run pods in a team's namespace, or map this one to a team in the capacity repository (teams.<team>.namespaces)", ns)}
}

// namespaceTeam is the team a namespace belongs to: the team it is named after
// (allot renders one namespace per team, labelled with it), else the team whose
// Team object maps it (allotv1.AnnotationNamespaces).
func (r *Runner) namespaceTeam(ns string) (string, bool) {
	if _, ok := r.st.teams[ns]; ok {
		return ns, true
	}
	t, ok := r.st.nsTeams[ns]
	return t, ok
}

// defaultTier is the tier of a pod that names none: the lowest tier the team
// may use that is not borrowOnly.
func (r *Runner) defaultTier(team string) string {
	return DefaultTier(r.st.teams[team], maps.Values(r.st.tiers))
}

// DefaultTier is the tier of a workload of team t (nil: a team allot does not
// know) that names none: the lowest tier t may use that is not borrowOnly,
// the first by name on a tie; "" when there is none.
func DefaultTier(t *allotv1.Team, tiers iter.Seq[*allotv1.Tier]) string {
	allowed := func(n string) bool { return t == nil || len(t.Spec.Tiers) == 0 || slices.Contains(t.Spec.Tiers, n) }
	best, prio := "", int32(0)
	for tr := range tiers {
		n := tr.Name
		if tr.Spec.BorrowOnly || !allowed(n) {
			continue
		}
		if best == "" || tr.Spec.Priority < prio || (tr.Spec.Priority == prio && n < best) {
			best, prio = n, tr.Spec.Priority
		}
	}
	return best
}

// syncGang brings the core in line with what the API says of one gang.
func (r *Runner) syncGang(g *clusterWorkload, now time.Time, acts *actions) {
	live := g.sortedPods(isLive)
	id := scheduler.WorkloadID(g.id)
	if len(live) == 0 && g.binding == 0 {
		if g.phase != idle {
			_ = r.core.Finish(id)
		}
		g.on(fact{kind: factLeft})
		r.setStuck(g, "")
		if len(g.pods) == 0 {
			delete(r.st.gangs, g.id)
			delete(r.st.retries, g.id)
		}
		return
	}
	switch g.phase {
	case idle:
		r.syncIdle(g, live, acts)
	case queued:
		// Pods gone, or the gang changed while it waited (a Job's
		// parallelism, a label): submitted again as it is now.
		if w, err := r.workload(g, live, false); err != nil || int64(len(live)) < w.Pods || !sameShape(w, g.spec) {
			if n := r.core.Restarts(id); n > 0 {
				r.st.restarts[g.id] = n // kept for the next submission
			}
			_ = r.core.Finish(id)
			g.on(fact{kind: factLeft})
			r.syncIdle(g, live, acts)
		}
	case admitted:
		r.dispatch(g, acts)
		r.checkStarted(g)
	}
}

// checkStarted tells the core a gang started once every one of its pods is
// bound and running, as the pods' status says: until then the gang timeout
// counts.
func (r *Runner) checkStarted(g *clusterWorkload) {
	var running int64
	for _, p := range g.pods {
		if p.live() && p.node != "" && p.running {
			running++
		}
	}
	if g.on(fact{kind: factObserved, running: running, pods: g.spec.Pods, binding: g.binding}) != tellStarted {
		return
	}
	if err := r.core.Started(scheduler.WorkloadID(g.id)); err != nil {
		r.log.V(1).Info("started", "workload", g.id, "error", err.Error())
	}
}

// syncIdle submits a gang whose pods are all there, restores one that is
// already bound whole, and rolls back one that is bound in part (a bind cut
// short by a restart).
func (r *Runner) syncIdle(g *clusterWorkload, live []*podInfo, acts *actions) {
	if len(live) == 0 {
		return
	}
	bound := g.sortedPods(isBound)
	onNodes := g.sortedPods(occupies)
	if len(onNodes) == 0 {
		g.unbindFails, g.unbindAt = 0, time.Time{} // taken back, if it was
	}
	if g.stuck != "" {
		if len(bound) > 0 {
			if g.unbindFails > 0 {
				r.retryUnbind(g, live, bound, acts)
			}
			return // it runs, holding its GPUs, until it ends or a rebuild takes it
		}
		if g.unbindFails > 0 && len(onNodes) > 0 {
			return // being taken back: its pods hold their GPUs until gone
		}
		r.setStuck(g, "") // what ran ended: its new pods are a new submission
	}
	if len(bound) > 0 {
		w, err := r.boundWorkload(g, live, bound)
		if err == nil && int64(len(bound)) == w.Pods {
			if err = r.core.Restore(w, placementOf(bound)); err == nil {
				slots := map[string]int64{}
				for _, p := range bound {
					slots[p.node]++
				}
				g.spec = w
				g.on(fact{kind: factRestored, slots: slots})
				return
			}
		}
		if err == nil && int64(len(bound)) < w.Pods {
			if g.unbindFails > 0 {
				// Taking it back failed: its pods hold their GPUs outside
				// the core, also while it is tried again, until they are gone.
				r.setStuck(g, fmt.Sprintf("%d of its %d pods are bound and could not be taken back", len(bound), w.Pods))
				r.retryUnbind(g, live, bound, acts)
				return
			}
			r.log.Info("rolling back a gang bound in part", "workload", g.id, "bound", len(bound), "pods", w.Pods)
			acts.unbind(g, bound, fmt.Sprintf("gang %s had %d of %d pods bound: rolled back, to be bound whole", g.id, len(bound), w.Pods))
			return
		}
		r.setStuck(g, fmt.Sprintf("running gang not accounted for: %v; its GPUs are held until it ends", err))
		r.log.Error(err, "running gang not accounted for", "workload", g.id)
		acts.event(live[0], "Warning", "NotAccounted", g.stuck)
		return
	}
	w, err := r.workload(g, live, false)
	if j, ok := r.st.jobs[g.job]; ok && g.job.Name != "" {
		// A hub's copy starts only while the hub vouches for it; one that
		// runs already is left to run (above).
		if msg := fenced(j, g.job.Name, r.opts.Now()); msg != "" {
			r.setPending(g, live, contract.ReasonHubFenceExpired, msg, acts)
			return
		}
	}
	if err != nil {
		r.setPending(g, live, "InvalidWorkload", err.Error(), acts)
		return
	}
	if n := int64(len(live)); n < w.Pods {
		r.setPending(g, live, "WaitingForGang", fmt.Sprintf("waiting for the gang's pods: %d of %d exist", n, w.Pods), acts)
		return
	}
	if now := r.opts.Now(); now.Before(g.retryAt) {
		// Its bind was refused and its pods made again: it waits its backoff
		// here, as it would have in the core's queue.
		r.st.retries[g.id] = g.retryAt
		r.setPending(g, live, "BindFailed", fmt.Sprintf("the gang's bind was refused %d times in a row; retrying at %s", g.refusals, g.retryAt.UTC().Format(time.RFC3339)), acts)
		return
	}
	delete(r.st.retries, g.id)
	if err := r.core.Submit(w); err != nil {
		r.setPending(g, live, "InvalidWorkload", err.Error(), acts)
		return
	}
	delete(r.st.restarts, g.id) // the core counts them from here
	g.spec = w
	g.on(fact{kind: factSubmitted})
}

// sameShape says whether two submissions of a gang ask for the same thing.
func sameShape(a, b scheduler.Workload) bool {
	return a.Team == b.Team && a.Tier == b.Tier && a.Pods == b.Pods && a.GPUsPerPod == b.GPUsPerPod &&
		a.Require == b.Require && a.Prefer == b.Prefer && a.Cluster == b.Cluster && slices.Equal(a.Flavors, b.Flavors) && rulesKeyOf(a) == rulesKeyOf(b)
}

// setStuck marks a running gang the core could not take (why says why), or
// clears the mark (why empty). A stuck gang's bound pods hold their GPUs in
// the core, as other schedulers' pods do, so that nothing is placed on them.
func (r *Runner) setStuck(g *clusterWorkload, why string) {
	if (g.stuck != "") != (why != "") {
		for _, p := range g.pods {
			if p.node != "" {
				r.st.heldDirty[p.node] = true
			}
		}
	}
	g.stuck = why
	if why != "" {
		r.st.stuck[g.id] = true
	} else {
		delete(r.st.stuck, g.id)
	}
}

// occupies says whether a pod is on its node, live or on its way out.
func occupies(p *podInfo) bool { return p.node != "" && !p.terminal }

// retryUnbind takes back again, once its backoff is over, the bound pods of a
// gang bound in part that could not all be taken back; it stays stuck (its
// pods held) meanwhile.
func (r *Runner) retryUnbind(g *clusterWorkload, live, bound []*podInfo, acts *actions) {
	if r.opts.Now().Before(g.unbindAt) {
		r.st.retries[g.id] = g.unbindAt
		return
	}
	delete(r.st.retries, g.id)
	if w, err := r.boundWorkload(g, live, bound); err == nil && int64(len(bound)) < w.Pods {
		acts.unbind(g, bound, fmt.Sprintf("gang %s had %d of %d pods bound: rolled back, to be bound whole (try %d)", g.id, len(bound), w.Pods, g.unbindFails+1))
	}
}

func placementOf(bound []*podInfo) []scheduler.PodPlacement {
	per := map[string]int64{}
	var nodes []string
	for _, p := range bound {
		if per[p.node] == 0 {
			nodes = append(nodes, p.node)
		}
		per[p.node]++
	}
	out := make([]scheduler.PodPlacement, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, scheduler.PodPlacement{Node: scheduler.NodeName(n), Pods: per[n]})
	}
	return out
}

// setPending records why a gang's unbound pods wait, for the apply step to write
// where it changed.
func (r *Runner) setPending(g *clusterWorkload, pods []*podInfo, code, msg string, acts *actions) {
	// The namespace's team, not the team a pod's label names: a pod cannot
	// take another team's turn in the writing of reasons.
	team, _ := r.namespaceTeam(g.ns)
	for _, p := range pods {
		if p.node != "" || p.binding {
			continue
		}
		if p.pending != msg {
			p.pending = msg
			acts.pending = append(acts.pending, pendingWrite{pod: podRef{ns: p.ns, name: p.name, uid: p.uid}, team: team, code: code, msg: msg})
		}
	}
}

// dispatch binds the gang's unassigned pods into the free slots of its
// admission, once its victims are gone.
func (r *Runner) dispatch(g *clusterWorkload, acts *actions) {
	for uid := range g.waitFor {
		if p := r.st.pods[uid]; p == nil || p.terminal {
			delete(g.waitFor, uid)
		}
	}
	if len(g.waitFor) > 0 {
		return
	}
	free := map[string]int64{}
	var want int64
	for n, k := range g.slots {
		free[n] = k
	}
	for _, p := range g.pods {
		// A pod on its way out holds its GPUs until it is gone: its
		// replacement waits for the slot rather than being bound beside it.
		if !p.terminal && (p.node != "" || p.binding) {
			free[p.node]--
		}
	}
	nodes := make([]string, 0, len(free))
	for n, k := range free {
		if k > 0 {
			nodes = append(nodes, n)
			want += k
		}
	}
	pods := g.sortedPods(isUnassigned)
	if want == 0 {
		r.beyondSize(g, pods, acts)
		return
	}
	slices.Sort(nodes)
	if g.fresh && int64(len(pods)) < want {
		// Pods left between admission and bind: take the admission back.
		r.requeue(g)
		return
	}
	task := bindTask{gang: g.id, as: boundAs{Gang: g.id, Team: string(g.spec.Team), Tier: string(g.spec.Tier), Pods: g.spec.Pods}}
	for _, n := range nodes {
		for range free[n] {
			if len(pods) == 0 {
				break
			}
			p := pods[0]
			pods = pods[1:]
			p.binding = true
			p.node = n
			g.binding++
			task.pods = append(task.pods, podRef{ns: p.ns, name: p.name, uid: p.uid})
			task.nodes = append(task.nodes, n)
		}
	}
	if len(task.pods) > 0 {
		acts.binds = append(acts.binds, task)
	}
	r.beyondSize(g, pods, acts)
}

// beyondSize says why the pods of an admitted gang left over by its slots
// wait: more pods than its size (one joined a gang that runs), or a
// replacement waiting for the pod it replaces to go.
func (r *Runner) beyondSize(g *clusterWorkload, pods []*podInfo, acts *actions) {
	if len(pods) > 0 {
		r.setPending(g, pods, "GangFull", fmt.Sprintf("gang %s is admitted for %d pods, each of which has its slot: this pod waits for one of them to end", g.id, g.spec.Pods), acts)
	}
}

// requeue takes an admission back into the core's queue, where it waits the
// core's backoff.
func (r *Runner) requeue(g *clusterWorkload) {
	if err := r.core.Requeue(scheduler.WorkloadID(g.id)); err != nil {
		r.log.Error(err, "requeueing", "workload", g.id)
	}
	g.on(fact{kind: factRequeued})
}
