package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/scheduler"
)

type podRef struct {
	ns, name string
	uid      types.UID
}

func (p podRef) object() *corev1.Pod {
	o := &corev1.Pod{}
	o.Namespace, o.Name, o.UID = p.ns, p.name, p.uid
	return o
}

// bindTask binds pods of one gang, pods[i] to nodes[i].
type bindTask struct {
	gang string
	// as is what the pods are bound as, written on each with its bind.
	as    boundAs
	pods  []podRef
	nodes []string
}

type pendingWrite struct {
	pod podRef
	// team is the team of the pod's namespace ("" for a namespace of no
	// team): reasons are written a team at a time in turn.
	team      string
	code, msg string
}

type podEvent struct {
	pod podRef
	// gang is the pod's workload: what one emits in a step is bounded.
	gang string
	// team is the team of the pod's namespace, set as the event is sent
	// (emit): what a team's pods emit is bounded too.
	team                       string
	kind, reason, action, note string
}

// eventsPerWorkload is the most events of its own pods one workload emits in
// a step, one a pod; the rest of its pods' events of a reason are told in one
// event. The event broadcaster drops what comes while its queue (1,000)
// is full, whoever's it is: a gang of thousands of pods, bound or rolled back
// at once, filled it and other teams' events were lost.
const eventsPerWorkload = 16

// boundEvents keeps, of each workload's events, the first eventsPerWorkload;
// its events past those are told, a reason at a time, by one event on the
// first pod of them, which says how many pods it stands for.
func boundEvents(evs []podEvent) []podEvent {
	type key struct{ gang, reason string }
	n := map[string]int{}
	cut := map[key]int{} // index in out of the event that stands for the rest
	var out []podEvent
	more := map[int]int{}
	for _, e := range evs {
		n[e.gang]++
		if n[e.gang] <= eventsPerWorkload {
			out = append(out, e)
			continue
		}
		k := key{e.gang, e.reason}
		if i, ok := cut[k]; ok {
			more[i]++
			continue
		}
		cut[k] = len(out)
		out = append(out, e)
	}
	for i, m := range more {
		e := &out[i]
		e.note = fmt.Sprintf("this pod and %d more of gang %s, told in this event only: %s", m, e.gang, e.note)
	}
	return out
}

// evictTask evicts the pods of a victim through the Eviction API.
type evictTask struct {
	pods   []podRef
	reason string
	note   string
}

// unbindTask takes back pods bound as part of a gang that could not be bound
// whole: a controlled pod is deleted (its controller makes a new one); a bare
// pod is deleted and made again unbound, so the gang is whole again.
type unbindTask struct {
	pods []podInfo
	note string
}

// actions are what a step decided and what the API must be told, outside the lock.
type actions struct {
	binds   []bindTask
	evicts  []evictTask
	unbinds []unbindTask
	pending []pendingWrite
	events  []podEvent
}

func (a *actions) event(p *podInfo, kind, reason, note string) {
	a.events = append(a.events, podEvent{pod: podRef{ns: p.ns, name: p.name, uid: p.uid}, gang: p.gang, kind: kind, reason: reason, action: "Schedule", note: note})
}

// evict marks a gang's live pods as on their way out and queues their eviction.
func (a *actions) evict(g *clusterWorkload, reason, note string) []types.UID {
	var t evictTask
	var uids []types.UID
	t.reason, t.note = reason, note
	for _, p := range g.pods {
		if !p.live() {
			continue
		}
		p.evicting = true
		t.pods = append(t.pods, podRef{ns: p.ns, name: p.name, uid: p.uid})
		if p.node != "" {
			uids = append(uids, p.uid)
		}
	}
	if len(t.pods) > 0 {
		a.evicts = append(a.evicts, t)
	}
	return uids
}

// unbind marks bound pods as on their way out and queues taking them back.
func (a *actions) unbind(g *clusterWorkload, pods []*podInfo, note string) {
	var t unbindTask
	t.note = note
	for _, p := range pods {
		p.evicting = true
		t.pods = append(t.pods, *p)
	}
	if len(t.pods) > 0 {
		a.unbinds = append(a.unbinds, t)
	}
}

// run carries the actions out concurrently: binds go first and are bounded by
// the bind workers; the rest follow.
func (r *Runner) run(ctx context.Context, a actions) {
	for _, t := range a.binds {
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			r.bindGang(ctx, t)
		}()
	}
	for _, t := range a.evicts {
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			r.evictPods(ctx, t)
		}()
	}
	for _, t := range a.unbinds {
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			r.unbindPods(ctx, t)
		}()
	}
	r.pending.add(a.pending, boundEvents(a.events))
}

// pendingQueue holds the pending reasons and events to write: the latest
// reason per pod, and the events in order. Reasons are taken a team at a
// time in turn, within a team a namespace at a time in turn, within a
// namespace in the order they came: neither one namespace's flood of pods
// nor a team's many namespaces of a pod each hold up another team's reason
// for more than a turn.
type pendingQueue struct {
	mu     sync.Mutex
	writes map[types.UID]pendingWrite
	// teams are the teams with a reason queued, in turn (the namespaces of
	// no team take one turn, as team ""); queued are their pods, by
	// namespace in turn.
	teams  []string
	queued map[string]*rota[string, types.UID]
	events []podEvent
	kick   chan struct{}
}

// pendingBatch is the most reasons written before the queue is looked at
// again: a namespace that queued thousands holds up another's for one batch.
const pendingBatch = 32

func (q *pendingQueue) add(writes []pendingWrite, evs []podEvent) {
	if len(writes) == 0 && len(evs) == 0 {
		return
	}
	q.mu.Lock()
	if q.writes == nil {
		q.writes, q.queued = map[types.UID]pendingWrite{}, map[string]*rota[string, types.UID]{}
	}
	for _, w := range writes {
		if _, ok := q.writes[w.pod.uid]; !ok {
			namespaces := q.queued[w.team]
			if namespaces == nil {
				namespaces = &rota[string, types.UID]{}
				q.queued[w.team] = namespaces
				q.teams = append(q.teams, w.team)
			}
			namespaces.push(w.pod.ns, w.pod.uid)
		}
		q.writes[w.pod.uid] = w
	}
	q.events = append(q.events, evs...)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// take returns up to n reasons, a team at a time in turn (and a namespace
// of it at a time in turn), and the events; more says reasons are left.
func (q *pendingQueue) take(n int) (writes []pendingWrite, evs []podEvent, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(writes) < n && len(q.teams) > 0 {
		team := q.teams[0]
		q.teams = q.teams[1:]
		namespaces := q.queued[team]
		uid := namespaces.next()
		writes = append(writes, q.writes[uid])
		delete(q.writes, uid)
		if namespaces.empty() {
			delete(q.queued, team)
		} else {
			q.teams = append(q.teams, team)
		}
	}
	evs, q.events = q.events, nil
	return writes, evs, len(q.teams) > 0
}

// rota takes its keys in turn: each key holds its items in the order they
// came, and goes to the back of the line after each turn while it holds
// any; a key with none left is forgotten.
type rota[K comparable, V any] struct {
	line  []K
	items map[K][]V
}

func (r *rota[K, V]) push(k K, v V) {
	if r.items == nil {
		r.items = map[K][]V{}
	}
	if len(r.items[k]) == 0 {
		r.line = append(r.line, k)
	}
	r.items[k] = append(r.items[k], v)
}

// next takes the first item of the key whose turn it is; the rota must not
// be empty.
func (r *rota[K, V]) next() V {
	k := r.line[0]
	r.line = r.line[1:]
	vs := r.items[k]
	if len(vs) > 1 {
		r.items[k] = vs[1:]
		r.line = append(r.line, k)
	} else {
		delete(r.items, k)
	}
	return vs[0]
}

func (r *rota[K, V]) empty() bool { return len(r.line) == 0 }

// pendingLoop is the one writer of pending reasons and events (a pod's
// reasons land in the order decided).
func (r *Runner) pendingLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pending.kick:
		}
		for more := true; more && ctx.Err() == nil; {
			var writes []pendingWrite
			var evs []podEvent
			writes, evs, more = r.pending.take(pendingBatch)
			r.writePending(ctx, writes, evs)
		}
	}
}

// bindGang binds a gang's pods in parallel through the Binding subresource and
// reports back. The binds are tried first as a dry run, so that one the API
// refuses (an admission policy, a pod changed meanwhile) leaves the whole gang
// unbound and no pod has to be taken back.
func (r *Runner) bindGang(ctx context.Context, t bindTask) {
	errs := r.bindPods(ctx, t, client.DryRunAll)
	dry := slices.ContainsFunc(errs, func(err error) bool { return err != nil })
	if !dry {
		errs = r.bindPods(ctx, t)
	}
	r.bound(ctx, t, errs, dry)
}

// bindPods sends the gang's bindings, pods[i] to nodes[i], and returns their errors.
func (r *Runner) bindPods(ctx context.Context, t bindTask, opts ...client.SubResourceCreateOption) []error {
	errs := make([]error, len(t.pods))
	var wg sync.WaitGroup
	for i, p := range t.pods {
		wg.Add(1)
		r.sem <- struct{}{}
		go func() {
			defer func() { <-r.sem; wg.Done() }()
			b := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, UID: p.uid, Annotations: map[string]string{contract.AnnotationBoundAs: t.as.encode()}},
				Target:     corev1.ObjectReference{Kind: "Node", Name: t.nodes[i]},
			}
			errs[i] = r.client.SubResource("binding").Create(ctx, p.object(), b, opts...)
		}()
	}
	wg.Wait()
	return errs
}

// bound takes the results of a gang's binds (dry: of their dry run, when one
// was refused, and nothing was bound). A gang not bound whole is rolled back:
// what was bound is taken back, and it is requeued with a backoff.
func (r *Runner) bound(ctx context.Context, t bindTask, errs []error, dry bool) {
	var acts actions
	r.mu.Lock()
	g := r.st.gangs[t.gang]
	var failed error
	var ok []*podInfo
	for i, ref := range t.pods {
		p := r.st.pods[ref.uid]
		if errs[i] != nil {
			metricBinds.WithLabelValues("error").Inc()
			if failed == nil {
				failed = fmt.Errorf("binding pod %s to node %s: %w", ref.name, t.nodes[i], errs[i])
			}
		} else if !dry {
			metricBinds.WithLabelValues("ok").Inc()
		}
		if g != nil {
			g.binding--
		}
		if p == nil {
			continue
		}
		p.binding = false
		if errs[i] != nil || dry {
			p.node = ""
		} else {
			ok = append(ok, p)
			p.as = &t.as
			if p.scheduledAt.IsZero() {
				p.scheduledAt = r.opts.Now()
			}
		}
	}
	if g != nil {
		now := r.opts.Now()
		switch g.on(fact{kind: factBound, refused: failed != nil, binding: g.binding, now: now, backoff: r.opts.Core.Backoff}) {
		case rollBack:
			r.log.Error(failed, "gang bind refused, rolling back", "workload", g.id, "bound", len(ok), "pods", len(t.pods))
			acts.unbind(g, ok, fmt.Sprintf("gang %s rolled back: %v", g.id, failed))
			if err := r.core.Requeue(scheduler.WorkloadID(g.id)); err != nil {
				r.log.Error(err, "requeueing", "workload", g.id)
			}
			for _, p := range g.sortedPods(isLive) {
				acts.event(p, corev1.EventTypeWarning, "BindFailed", fmt.Sprintf("gang %s could not be bound whole; requeued, retried in %s at the earliest: %v", g.id, g.retryAt.Sub(now).Round(time.Second), failed))
			}
		case boundWhole:
			for _, p := range ok {
				acts.event(p, corev1.EventTypeNormal, "Scheduled", fmt.Sprintf("bound to %s with gang %s", p.node, g.id))
			}
		default:
			if failed != nil && g.phase == admitted {
				r.log.Error(failed, "binding a pod of a running gang", "workload", g.id)
			}
		}
	}
	if g != nil {
		r.st.dirty[g.id] = true
	}
	r.mu.Unlock()
	r.wake()
	r.run(ctx, acts)
}

// evictPods evicts a victim's pods through the Eviction API, with an event on
// each naming the reason.
func (r *Runner) evictPods(ctx context.Context, t evictTask) {
	for _, p := range t.pods {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name}}
		err := retryTransient(ctx, func() error { return r.client.SubResource("eviction").Create(ctx, p.object(), ev) })
		if err != nil && !apierrors.IsNotFound(err) {
			r.log.Error(err, "evicting", "pod", p.name, "namespace", p.ns)
			r.emit(podEvent{pod: p, kind: corev1.EventTypeWarning, reason: t.reason, action: "Evict", note: fmt.Sprintf("eviction failed (%s): %s", quoted(err), t.note)})
			r.stillThere(p.uid)
			continue
		}
		r.emit(podEvent{pod: p, kind: corev1.EventTypeWarning, reason: t.reason, action: "Evict", note: t.note})
	}
}

// unbindPods deletes pods bound as part of a gang that was not bound whole;
// bare pods come back unbound under their own name. No pod is lost to a
// transient error: reading a bare pod is retried (one that cannot be read is
// left bound and accounted for again), and making it again is retried with a
// backoff until the API takes it, however long a refusal lasts. Nor to a
// leader change: a bare pod is written to the record (UnboundRecord) before
// it is deleted, and the next leader makes again what is still there.
func (r *Runner) unbindPods(ctx context.Context, t unbindTask) {
	for _, p := range t.pods {
		ref := podRef{ns: p.ns, name: p.name, uid: p.uid}
		key := client.ObjectKey{Namespace: p.ns, Name: p.name}
		var again *corev1.Pod
		if !p.controlled {
			var full corev1.Pod
			err := retryTransient(ctx, func() error { return r.reader.Get(ctx, key, &full) })
			if apierrors.IsNotFound(err) || (err == nil && full.UID != p.uid) {
				continue // already gone
			}
			if err == nil {
				again = unboundCopy(&full)
				if err = r.canRemake(ctx, again); err == nil {
					err = r.keep(ctx, p.uid, again)
				}
			}
			if err != nil {
				r.log.Error(err, "a bare pod cannot be taken back safely; it stays bound", "pod", p.name, "namespace", p.ns)
				r.emit(podEvent{pod: ref, kind: corev1.EventTypeWarning, reason: "UnbindFailed", action: "Unbind",
					note: fmt.Sprintf("%s; the pod stays bound: %s", apilimits.Truncate(t.note, apilimits.NoteBytes/2), quoted(err))})
				r.unbindFailed(p.uid)
				continue
			}
		}
		r.emit(podEvent{pod: ref, kind: corev1.EventTypeWarning, reason: "Unbound", action: "Unbind", note: t.note})
		r.markDisrupted(ctx, ref, t.note)
		err := retryTransient(ctx, func() error {
			return r.client.Delete(ctx, ref.object(), client.GracePeriodSeconds(0), client.Preconditions{UID: &p.uid})
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && r.deleting(ctx, ref) {
			err = nil // the delete went through though its answer was lost
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			r.log.Error(err, "deleting a pod to unbind it", "pod", p.name, "namespace", p.ns)
			if again != nil {
				r.forget(ctx, p.uid)
			}
			r.unbindFailed(p.uid)
			continue
		}
		if again != nil {
			r.remakeWhenGone(ctx, ref, again)
		}
	}
}

// deleting says whether the pod is gone or on its way out: after a delete
// whose answer was lost (a timeout), it may have gone through.
func (r *Runner) deleting(ctx context.Context, ref podRef) bool {
	var cur corev1.Pod
	err := retryTransient(ctx, func() error {
		return r.reader.Get(ctx, client.ObjectKey{Namespace: ref.ns, Name: ref.name}, &cur)
	})
	return goneOrReplaced(err, &cur, ref.uid) || (err == nil && cur.DeletionTimestamp != nil)
}

// unbindFailed is stillThere for a pod that could not be taken back: its gang
// is not taken back again before a backoff that doubles from 1 s up to
// Options.UnbindRetry (never a tight loop of refusals).
func (r *Runner) unbindFailed(uid types.UID) {
	metricUnbindFailures.Inc()
	r.mu.Lock()
	if p := r.st.pods[uid]; p != nil {
		if g := r.st.gangs[p.gang]; g != nil {
			g.unbindFails++
			g.unbindAt = r.opts.Now().Add(min(time.Second<<min(g.unbindFails-1, 16), r.opts.UnbindRetry))
			if g.phase == queued && r.core != nil {
				// Requeued by a rollback, it would be placed again with a pod
				// still bound outside its placement: out of the core until it
				// is taken back (syncIdle holds its bound pods meanwhile).
				_ = r.core.Finish(scheduler.WorkloadID(g.id))
				g.on(fact{kind: factLeft})
			}
		}
	}
	r.mu.Unlock()
	r.stillThere(uid)
}

// markDisrupted gives a pod the scheduler deletes the DisruptionTarget
// condition, as kube-scheduler does before it preempts (the Eviction API adds
// it itself): a Job whose podFailurePolicy ignores DisruptionTarget does not
// count the pod against its backoffLimit. A pod already gone needs nothing.
func (r *Runner) markDisrupted(ctx context.Context, ref podRef, why string) {
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: apilimits.Condition(why), LastTransitionTime: metav1.Now()}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err == nil {
		err = r.client.Status().Patch(ctx, ref.object(), client.RawPatch(types.StrategicMergePatchType, patch))
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.log.Error(err, "marking a pod as disrupted", "pod", ref.name, "namespace", ref.ns)
	}
}

// stillThere takes back the mark of a pod whose eviction or unbinding failed:
// it runs and holds its GPUs, so its gang is accounted for again (restored
// where it runs) and may be evicted again by a later decision.
func (r *Runner) stillThere(uid types.UID) {
	r.mu.Lock()
	if p := r.st.pods[uid]; p != nil {
		p.evicting = false
		r.st.dirty[p.gang] = true
	}
	r.mu.Unlock()
	r.wake()
}

// writePending writes PodScheduled=False with the core's reason on pending pods,
// and the events: an Unschedulable event of each reason written, then evs,
// as far as the runner's budget of events goes (emit).
func (r *Runner) writePending(ctx context.Context, writes []pendingWrite, evs []podEvent) {
	now := metav1.Now()
	var told []podEvent
	for _, w := range writes {
		// Decided before the pod was bound, or overtaken by a newer reason.
		r.mu.Lock()
		p := r.st.pods[w.pod.uid]
		stale := p == nil || p.node != "" || p.binding || p.pending != w.msg
		var rv string
		if !stale {
			rv = p.rv
		}
		r.mu.Unlock()
		if stale {
			continue
		}
		if r.beforeReasonWrite != nil {
			r.beforeReasonWrite(w.pod.ns, w.pod.name)
		}
		if !r.writeReason(ctx, w, rv, now) {
			continue
		}
		told = append(told, podEvent{pod: w.pod, kind: corev1.EventTypeWarning, reason: corev1.PodReasonUnschedulable, action: "Schedule", note: w.code + ": " + w.msg})
	}
	r.emit(append(told, evs...)...)
}

// emit sends the runner's events of pods, those its budget lets through
// (eventGate): the rest are counted, and summed up on their team.
func (r *Runner) emit(evs ...podEvent) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	for i := range evs {
		evs[i].team, _ = r.namespaceTeam(evs[i].pod.ns)
	}
	r.mu.Unlock()
	for _, e := range r.gate.admit(r.opts.Now(), evs) {
		r.events.Eventf(e.pod.object(), nil, e.kind, e.reason, e.action, "%s", e.note)
	}
}

// summarizeHeldEvents tells, on each Team, how many of its pods' events were
// held back, at most once an eventWindow; the namespaces of no team are
// told in the log only.
func (r *Runner) summarizeHeldEvents() {
	for _, h := range r.gate.summaries(r.opts.Now()) {
		r.log.Info("events of a team's pods held back", "team", h.team, "events", h.total())
		r.mu.Lock()
		var team *allotv1.Team
		if t := r.st.teams[h.team]; t != nil {
			team = &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: t.Name, UID: t.UID, ResourceVersion: t.ResourceVersion}}
		}
		r.mu.Unlock()
		if team != nil {
			r.events.Eventf(team, nil, corev1.EventTypeWarning, contract.ReasonEventsSuppressed, "Schedule", "%s", h.note())
		}
	}
}

// reasonAttempts is the most writes of one reason that a pod changed meanwhile
// (and still unbound) refuses.
const reasonAttempts = 3

// writeReason writes a pod's reason on version rv of the pod only, the version
// the runner saw unbound: the pod may be bound (by the runner or another)
// between the check and the write, and a write after the bind would turn its
// PodScheduled from True back to False. On a conflict the pod is read again,
// and the reason is written on the new version while the pod is unbound, or
// dropped. It says whether the reason was written.
func (r *Runner) writeReason(ctx context.Context, w pendingWrite, rv string, now metav1.Time) bool {
	cond := corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: apilimits.Condition(w.msg), LastTransitionTime: now, LastProbeTime: now,
	}
	for range reasonAttempts {
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": rv},
			"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
		})
		obj := w.pod.object()
		err := r.client.Status().Patch(ctx, obj, client.RawPatch(types.StrategicMergePatchType, patch))
		switch {
		case err == nil:
			r.mu.Lock()
			if p := r.st.pods[w.pod.uid]; p != nil && p.rv == rv {
				p.rv = obj.ResourceVersion // the next reason need not wait for the informer
			}
			r.mu.Unlock()
			return true
		case apierrors.IsNotFound(err):
			return false
		case !apierrors.IsConflict(err):
			r.log.Error(err, "writing the pending reason", "pod", w.pod.name, "namespace", w.pod.ns)
			return false
		}
		// Changed since: bound, or changed otherwise (a label, a reason
		// written by another scheduler) and still waiting.
		var cur corev1.Pod
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: w.pod.ns, Name: w.pod.name}, &cur); err != nil {
			if !apierrors.IsNotFound(err) {
				r.log.Error(err, "reading the pod for its pending reason", "pod", w.pod.name, "namespace", w.pod.ns)
			}
			return false
		}
		if cur.UID != w.pod.uid || cur.Spec.NodeName != "" || cur.DeletionTimestamp != nil {
			return false
		}
		rv = cur.ResourceVersion
	}
	r.log.Info("pending reason not written: the pod changed at each write", "pod", w.pod.name, "namespace", w.pod.ns)
	r.mu.Lock()
	if p := r.st.pods[w.pod.uid]; p != nil && p.pending == w.msg {
		p.pending = "" // written again at the next decision
	}
	r.mu.Unlock()
	return false
}

// retryTransient retries what the API refused for now (too many requests, a
// disruption budget, a timeout) a few times.
func retryTransient(ctx context.Context, f func() error) error {
	var err error
	for i := range 5 {
		if err = f(); err == nil || !(apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(100<<i) * time.Millisecond):
		}
	}
	return err
}
