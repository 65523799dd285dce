package runner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
)

// denyCreate installs a ValidatingAdmissionPolicy (and its binding), both
// named name, that refuses creating resource (e.g. "pods", "pods/binding")
// unless expr holds; deleting the binding named name lifts it.
func (cl *cluster) denyCreate(name, resource, expr, message string) {
	cl.t.Helper()
	fail := admissionv1.Fail
	cl.create(&admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: expr, Message: message}},
		},
	})
	cl.create(&admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	})
}

// refuseBinds installs a ValidatingAdmissionPolicy that refuses the bindings
// of the named pod (only the real ones, not their dry runs, when realOnly),
// waits until the API server enforces it, and returns a function that lifts it.
func (cl *cluster) refuseBinds(pod string, realOnly bool) (lift func()) {
	cl.t.Helper()
	return cl.refuseBindsSaying(pod, realOnly, "binding refused by the test")
}

// refuseBindsSaying is refuseBinds with the policy's message.
func (cl *cluster) refuseBindsSaying(pod string, realOnly bool, message string) (lift func()) {
	cl.t.Helper()
	// "probe" is refused too: a binding of that (absent) pod tells when the
	// policy is in force, before the scheduler starts.
	expr := fmt.Sprintf("object.metadata.name != %q && object.metadata.name != 'probe'", pod)
	if realOnly {
		expr = fmt.Sprintf("(request.dryRun == true && object.metadata.name != 'probe') || (%s)", expr)
	}
	cl.denyCreate("refuse-binds", "pods/binding", expr, message)
	probe := func() error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "probe"}}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "probe"}, Target: corev1.ObjectReference{Kind: "Node", Name: "none"}}
		return cl.c.SubResource("binding").Create(context.Background(), p, b)
	}
	eventually(cl.t, 20*time.Second, "the binding policy in force", func() error {
		if err := probe(); apierrors.IsNotFound(err) || err == nil {
			return fmt.Errorf("probe binding not refused: %v", err)
		}
		return nil
	})
	return func() {
		cl.t.Helper()
		ctx := context.Background()
		if err := cl.c.Delete(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "refuse-binds"}}); err != nil {
			cl.t.Fatal(err)
		}
		eventually(cl.t, 20*time.Second, "the binding policy lifted", func() error {
			if err := probe(); !apierrors.IsNotFound(err) {
				return fmt.Errorf("probe binding still refused: %v", err)
			}
			return nil
		})
	}
}

// uids returns the UIDs of the named pods; absent ones are missing.
func (cl *cluster) uids(names []string) map[string]types.UID {
	pods := cl.pods()
	out := map[string]types.UID{}
	for _, n := range names {
		if p, ok := pods[n]; ok {
			out[n] = p.UID
		}
	}
	return out
}

// fastBackoff is the core with a backoff short enough for a test.
func fastBackoff(timeout time.Duration) *scheduler.Options {
	o := scheduler.DefaultOptions()
	o.Backoff, o.GangTimeout = 500*time.Millisecond, timeout
	return &o
}

// checkBackoff checks that a gang whose bind is refused is retried with a
// backoff: 0.5, 1, 2 and 4 s make at most 5 tries in 6 s, where a tight loop
// makes dozens.
func (s *sched) checkBackoff(t *testing.T) {
	t.Helper()
	time.Sleep(6 * time.Second)
	tries, err := s.counter(`allot_scheduler_binds_total{result="error"}`)
	if err != nil {
		t.Fatal(err)
	}
	if tries < 2 || tries > 5 {
		t.Errorf("%v refused bindings in 6s, want 2 to 5 (a doubling backoff from 0.5s)", tries)
	}
}

// gangOfThree is a team alpha of 64 GPUs, four nodes of 8 GPUs in one rack,
// and a gang g of three pods of 8 GPUs, submitted.
func gangOfThree(t *testing.T) (*cluster, []string) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	return cl, cl.submit("g", podSpec{team: "alpha", tier: "production", pods: 3, gpus: 8})
}

// A gang one of whose bindings the API refuses is not bound in part: no pod
// is deleted, it is tried again with a backoff that doubles (not in a tight
// loop), and it binds whole, with its own pods, once the refusal is lifted.
func TestRefusedBindLosesNoPod(t *testing.T) {
	cl, names := gangOfThree(t)
	before := cl.uids(names)
	lift := cl.refuseBinds(names[1], false)
	s := cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitEvent(names[0], "BindFailed", "binding refused by the test")

	s.checkBackoff(t)
	pods := cl.pods()
	for _, n := range names {
		p, ok := pods[n]
		switch {
		case !ok:
			t.Errorf("pod %s lost", n)
		case p.UID != before[n]:
			t.Errorf("pod %s deleted and made again (uid %s, was %s)", n, p.UID, before[n])
		case p.Spec.NodeName != "":
			t.Errorf("pod %s bound to %s while its gang's pod %s is refused", n, p.Spec.NodeName, names[1])
		}
	}

	lift()
	cl.waitBound(names)
	if after := cl.uids(names); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods made again: %v, were %v", after, before)
	}
	cl.checkNoOvercommit(8)
}

// A binding refused after its dry run passed leaves the gang bound in part:
// the bound pods are taken back, the bare ones made again unbound with their
// labels and owner references, and the gang is retried with a backoff until
// it binds whole.
func TestRefusedRealBindRemakesPods(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "owner"}}
	cl.create(owner)
	names := cl.submit("g", podSpec{team: "alpha", tier: "production", pods: 3, gpus: 8})
	ctx := context.Background()
	for _, n := range names {
		var p corev1.Pod
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: n}, &p); err != nil {
			t.Fatal(err)
		}
		p.Labels["app"] = "trainer"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}}
		if err := cl.c.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	before := cl.uids(names)
	lift := cl.refuseBinds(names[1], true)
	s := cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitEvent(names[0], "Unbound", "binding refused by the test")

	s.checkBackoff(t)
	lift()
	cl.waitBound(names)
	pods := cl.pods()
	for _, n := range names {
		p := pods[n]
		if p.Labels["app"] != "trainer" || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != owner.UID {
			t.Errorf("pod %s made again without its labels or owner: %v %v", n, p.Labels, p.OwnerReferences)
		}
	}
	if after := cl.uids(names); after[names[0]] == before[names[0]] {
		t.Errorf("pod %s, bound while %s was refused, was not taken back", names[0], names[1])
	}
	cl.checkNoOvercommit(8)
}

// A leader that stops between taking a bare pod back from its node and
// making it again does not lose it: the pod was written to the record
// (runner.UnboundRecord) before it was deleted, and the next leader makes it
// again, unbound and with its labels, then binds the gang whole.
func TestUnboundPodOutlivesTheLeader(t *testing.T) {
	cl, names := gangOfThree(t)
	ctx := context.Background()
	var p corev1.Pod
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: names[0]}, &p); err != nil {
		t.Fatal(err)
	}
	p.Labels["app"] = "trainer"
	if err := cl.c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	first := p.UID
	release := cl.holdDeletion(names[0])
	record := func() (map[string][]byte, error) {
		var rec corev1.Secret
		err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: runner.UnboundRecord}, &rec)
		return rec.Data, err
	}
	lift := cl.refuseBinds(names[1], true)
	s1 := cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitEvent(names[0], "Unbound", "binding refused by the test")
	cl.waitDeleting(names[0])
	if rec, err := record(); err != nil || rec[string(first)] == nil {
		t.Fatalf("pod %s deleted, not in the record (%d pods there, %v)", names[0], len(rec), err)
	}
	// The leader goes; then the pod's deletion ends.
	s1.stop()
	release()
	eventually(t, 10*time.Second, "pod "+names[0]+" gone", func() error {
		if _, ok := cl.pods()[names[0]]; ok {
			return errors.New("still there")
		}
		return nil
	})
	time.Sleep(time.Second)
	if _, ok := cl.pods()[names[0]]; ok {
		t.Fatalf("pod %s made again with no leader", names[0])
	}
	lift()
	cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitBound(names)
	again := cl.pods()[names[0]]
	if again.UID == first || again.Labels["app"] != "trainer" || len(again.Finalizers) == 0 {
		t.Errorf("pod %s made again as uid %s labels %v finalizers %v: want a new pod with its labels and finalizers", names[0], again.UID, again.Labels, again.Finalizers)
	}
	eventually(t, 10*time.Second, "the record emptied", func() error {
		if rec, err := record(); err != nil || len(rec) > 0 {
			return fmt.Errorf("record holds %d pods (%v)", len(rec), err)
		}
		return nil
	})
	cl.checkNoOvercommit(8)
}

// refusePodCreation makes the API refuse to create a pod named pod, until the
// returned func lifts it (a dry-run pod "probe-create" tells when either is in force).
func (cl *cluster) refusePodCreation(pod string) (lift func()) {
	cl.t.Helper()
	return cl.refusePodCreationSaying(pod, "pod creation refused by the test")
}

// refusePodCreationSaying is refusePodCreation with the policy's message.
func (cl *cluster) refusePodCreationSaying(pod, message string) (lift func()) {
	cl.t.Helper()
	cl.denyCreate("refuse-pods", "pods", fmt.Sprintf("!(object.metadata.name in [%q, 'probe-create'])", pod), message)
	probe := func() error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "probe-create"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		return cl.c.Create(context.Background(), p, client.DryRunAll)
	}
	eventually(cl.t, 20*time.Second, "the pod creation policy in force", func() error {
		if err := probe(); err == nil {
			return errors.New("probe pod not refused")
		}
		return nil
	})
	return func() {
		cl.t.Helper()
		if err := cl.c.Delete(context.Background(), &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "refuse-pods"}}); err != nil {
			cl.t.Fatal(err)
		}
		eventually(cl.t, 20*time.Second, "the pod creation policy lifted", func() error { return probe() })
	}
}

// A bare pod taken back from a gang bound in part is made again even when the
// API refuses that for a while once it is deleted: it is retried until it is
// made, never lost.
func TestRemadePodOutlastsRefusals(t *testing.T) {
	cl, names := gangOfThree(t)
	liftBinds := cl.refuseBinds(names[1], true)
	release := cl.holdDeletion(names[0])
	cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitEvent(names[0], "Unbound", "binding refused by the test")
	cl.waitDeleting(names[0])
	// Refused only now: the dry run before it was deleted passed.
	liftCreate := cl.refusePodCreation(names[0])
	release()
	eventually(t, 10*time.Second, "pod "+names[0]+" taken back", func() error {
		if _, ok := cl.pods()[names[0]]; ok {
			return errors.New("still there")
		}
		return nil
	})
	cl.waitEvent(names[0], "RemakeFailed", "pod creation refused by the test")
	time.Sleep(2 * time.Second) // refused again meanwhile
	// Binds first: the pod made again carries the test's finalizer, and a
	// second rollback would hold it forever.
	liftBinds()
	liftCreate()
	cl.waitBound(names)
	cl.checkNoOvercommit(8)
}

// A bare pod the API would not make again (here an admission policy refuses
// it for good) is not taken back: it stays bound, said so in an event, and
// its gang is tried again with a backoff, not in a tight loop. Once the API
// would make it, it is taken back, and the gang binds whole.
func TestPodKeptBoundWhenItCannotBeMadeAgain(t *testing.T) {
	cl, names := gangOfThree(t)
	liftBinds := cl.refuseBinds(names[1], true)
	liftCreate := cl.refusePodCreation(names[0])
	first := cl.uids(names)[names[0]]
	s := cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitEvent(names[0], "UnbindFailed", "the API would not make it again unbound")
	// Meanwhile the pod kept bound holds its node's GPUs: a gang of four
	// whole nodes cannot have them (3 nodes are free).
	other := cl.submit("h", podSpec{team: "alpha", tier: "production", pods: 4, gpus: 8})
	time.Sleep(4 * time.Second)
	p, ok := cl.pods()[names[0]]
	if !ok || p.UID != first || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
		t.Fatalf("pod %s taken back though the API would not make it again (there %v, node %q)", names[0], ok, p.Spec.NodeName)
	}
	cl.checkNoOvercommit(8)
	if b := bound(cl.nodesOf(other)); b > 0 {
		t.Errorf("%d pods of gang h bound beside the pod kept bound", b)
	}
	// A backoff of 1 s, then 2 s (the test's UnbindRetry): about three tries
	// in 4 s, not hundreds.
	if n, err := s.counter("allot_scheduler_unbind_failures_total{}"); err != nil || n < 1 || n > 5 {
		t.Errorf("%v unbind failures in 4 s (%v): want a few, with a backoff", n, err)
	}
	for _, n := range other {
		if err := cl.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	liftCreate()
	liftBinds()
	cl.waitBound(names)
	if cl.uids(names)[names[0]] == first {
		t.Errorf("pod %s was not taken back once it could be made again", names[0])
	}
	cl.checkNoOvercommit(8)
}

// holdDeletion gives a pod a finalizer of someone else's, so that once
// deleted it stays, terminating, until release.
func (cl *cluster) holdDeletion(name string) (release func()) {
	cl.t.Helper()
	const hold = "test.allot.dev/hold"
	change := func(f func([]string) []string) {
		cl.t.Helper()
		ctx := context.Background()
		var p corev1.Pod
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: name}, &p); err != nil {
			cl.t.Fatal(err)
		}
		p.Finalizers = f(p.Finalizers)
		if err := cl.c.Update(ctx, &p); err != nil {
			cl.t.Fatal(err)
		}
	}
	change(func(fs []string) []string { return append(fs, hold) })
	return func() {
		change(func(fs []string) []string { return slices.DeleteFunc(fs, func(f string) bool { return f == hold }) })
	}
}

// waitDeleting waits until a pod is being deleted.
func (cl *cluster) waitDeleting(name string) {
	cl.t.Helper()
	eventually(cl.t, 20*time.Second, "pod "+name+" deleting", func() error {
		var cur corev1.Pod
		if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: name}, &cur); err != nil || cur.DeletionTimestamp == nil {
			return fmt.Errorf("not deleting: %v", err)
		}
		return nil
	})
}

// The gang timeout counts until every pod runs, as the pods' status says: a
// gang bound whole whose pods never run is taken back and requeued; one whose
// pods run stays.
func TestGangTimeoutCountsUntilRunning(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	s := cl.start(schedOptions{core: fastBackoff(2 * time.Second)})
	runs := cl.submit("runs", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8})
	cl.waitBound(runs)
	ctx := context.Background()
	for _, n := range runs {
		var p corev1.Pod
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: n}, &p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		if err := cl.c.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	running := cl.uids(runs)
	stalls := cl.submit("stalls", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8})
	cl.waitBound(stalls)
	cl.waitEvent(stalls[0], "Unbound", "gang timeout")
	eventually(t, 10*time.Second, "the stalled gang counted as evicted", func() error {
		n, err := s.counter(`allot_scheduler_evictions_total{reason="GangTimeout"}`)
		if err != nil || n < 1 {
			return fmt.Errorf("GangTimeout evictions %v (%v)", n, err)
		}
		return nil
	})
	pods := cl.pods()
	for _, n := range runs {
		if p := pods[n]; p.UID != running[n] || p.Spec.NodeName == "" {
			t.Errorf("running pod %s taken back by the gang timeout", n)
		}
	}
}

// The scheduler schedules nothing while its cache misses a pod the API has
// bound (here: in a namespace the cache does not watch), however long that
// lasts, and says so on /metrics; once the API no longer has such a pod, it
// schedules.
func TestNothingScheduledUntilCacheSynced(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 1, 8, 1)
	ctx := context.Background()
	cl.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hidden"}})
	main := cl.ns
	cl.ns = "hidden"
	hidden := cl.submit("hidden", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	bindTo(t, cl, hidden[0], "a-0")
	cl.ns = main
	waiting := cl.submit("waiting", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})

	s := cl.start(schedOptions{cacheNamespaces: []string{main}})
	// Longer than the test's SyncTimeout (5s), after which the old runner went on.
	time.Sleep(7 * time.Second)
	if p := cl.pods()[waiting[0]]; p.Spec.NodeName != "" {
		t.Fatalf("pod %s bound to %s while the cache missed a pod bound there", p.Name, p.Spec.NodeName)
	}
	if err := s.expect(map[string]float64{"allot_scheduler_cache_synced{}": 0}); err != nil {
		t.Error(err)
	}
	if err := cl.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "hidden", Name: hidden[0]}}); err != nil {
		t.Fatal(err)
	}
	cl.waitBound(waiting)
	if err := s.expect(map[string]float64{"allot_scheduler_cache_synced{}": 1}); err != nil {
		t.Error(err)
	}
}

// A node removed takes its gangs with it (evicted, reason NodeRemoved) and a
// node relabelled while it runs nothing moves to its new domain, both without
// building the core again; a gang then binds on the relabelled node.
func TestNodeRemovedAndRelabelledInPlace(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 3, 8, 1)
	s := cl.start(schedOptions{core: fastBackoff(time.Hour)})
	first := cl.submit("first", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	node := cl.waitBound(first)[0]
	// The cycles count how far they walked and what they considered.
	var walks float64
	for _, w := range []string{"arrivals", "whole", "stopped"} {
		n, err := s.counter(`allot_scheduler_walks_total{walk="` + w + `"}`)
		if err != nil {
			t.Fatal(err)
		}
		walks += n
	}
	if n, err := s.counter(`allot_scheduler_workloads_considered_total{}`); err != nil || n < 1 || walks < 1 {
		t.Errorf("%v cycles, %v workloads considered (%v): want at least one of each", walks, n, err)
	}
	if _, err := s.counter(`allot_scheduler_workloads_skipped_total{}`); err != nil {
		t.Errorf("the workloads passed over are not counted: %v", err)
	}
	rebuilds := func() float64 {
		n, err := s.counter(`allot_scheduler_core_rebuilds_total`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := rebuilds()
	ctx := context.Background()
	if err := cl.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	cl.waitEvent(first[0], "NodeRemoved", "node "+node+" was removed")

	// Relabel an empty node into the rack of another, then ask for a gang
	// of two in one rack: only that rack now has two nodes.
	var empty, other string
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		if n == node {
			continue
		}
		if empty == "" {
			empty = n
		} else {
			other = n
		}
	}
	var nd corev1.Node
	if err := cl.c.Get(ctx, client.ObjectKey{Name: empty}, &nd); err != nil {
		t.Fatal(err)
	}
	var on corev1.Node
	if err := cl.c.Get(ctx, client.ObjectKey{Name: other}, &on); err != nil {
		t.Fatal(err)
	}
	nd.Labels[contract.TopologyLabelPrefix+"rack"] = on.Labels[contract.TopologyLabelPrefix+"rack"]
	if err := cl.c.Update(ctx, &nd); err != nil {
		t.Fatal(err)
	}
	pair := cl.submit("pair", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8, require: "rack"})
	nodes := cl.waitBound(pair)
	if !slices.Contains(nodes, empty) || !slices.Contains(nodes, other) {
		t.Errorf("the rack gang is on %v, want %s and %s (one rack since the relabel)", nodes, empty, other)
	}
	if n := rebuilds(); n != before {
		t.Errorf("the core was rebuilt %v times for a node removed and one relabelled, want 0", n-before)
	}
}

// A pod bound between the check that it waits and the write of its reason
// keeps PodScheduled=True: the writer checked the pod unbound under the lock,
// let go of it and wrote, and the write after the bind turned the bound pod's
// PodScheduled back to False (Unschedulable). The pod is bound in that gap,
// here by the test; every version of it the API server shows is watched, up to
// the reason of a pod that came after it (one writer writes them in turn).
func TestReasonNeverLandsOnBoundPod(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 1, 8, 1)
	wc, err := client.NewWithWatch(cl.env.Config, client.Options{Scheme: cl.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(cl.ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cl.inReasonGap(func(pod *corev1.Pod) error {
		b := &corev1.Binding{ObjectMeta: pod.ObjectMeta, Target: corev1.ObjectReference{Kind: "Node", Name: "a-0"}}
		return cl.c.SubResource("binding").Create(context.Background(), pod, b)
	})
	cl.submit("marker", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 16})
	var seenBound, overwritten bool
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			cond := podScheduled(p)
			switch {
			case p.Name == "late" && p.Spec.NodeName != "":
				seenBound = true
				if cond != nil && cond.Status == corev1.ConditionFalse {
					overwritten = true
					t.Errorf("bound pod late (node %s) carries PodScheduled=False: %s: %s", p.Spec.NodeName, cond.Reason, cond.Message)
				}
			case p.Name == "marker" && cond != nil && cond.Status == corev1.ConditionFalse:
				done = true // late's reason was written (or dropped) before
			}
		case <-timeout:
			t.Fatal("no reason written for pod marker")
		}
	}
	if !seenBound {
		t.Error("pod late was never seen bound")
	}
	if !overwritten {
		var p corev1.Pod
		if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: "late"}, &p); err == nil {
			if c := podScheduled(&p); p.Spec.NodeName == "" || c == nil || c.Status != corev1.ConditionTrue {
				t.Errorf("pod late: node %q, PodScheduled %+v; want bound, True", p.Spec.NodeName, c)
			}
		}
	}
}

// A pod changed but still unbound between the check and the write (a label,
// an annotation) is still told why it waits: the write on the version the
// runner saw is refused, and made again on the pod as it is.
func TestReasonWrittenOnPodChangedInGap(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 1, 8, 1)
	cl.inReasonGap(func(pod *corev1.Pod) error {
		patch := []byte(`{"metadata":{"annotations":{"example.com/touched":"in the gap"}}}`)
		return cl.c.Patch(context.Background(), pod, client.RawPatch(types.MergePatchType, patch))
	})
	cl.waitPending("late", "not enough healthy nodes of h100")
	if p := cl.pods()["late"]; p.Annotations["example.com/touched"] != "in the gap" {
		t.Errorf("pod late not changed in the gap: annotations %v", p.Annotations)
	}
}

// inReasonGap starts the scheduler and submits pod late, of 16 GPUs (more than
// a node has: it waits); do is called on it once, between the runner's check
// that it is unbound and the write of its reason. It returns once do ran.
func (cl *cluster) inReasonGap(do func(pod *corev1.Pod) error) {
	cl.t.Helper()
	ran := make(chan struct{})
	var once sync.Once
	cl.start(schedOptions{runner: func(r *runner.Runner) {
		r.SetBeforeReasonWrite(func(ns, name string) {
			if name != "late" {
				return
			}
			once.Do(func() {
				defer close(ran)
				if err := do(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
					cl.t.Errorf("changing pod late before its reason is written: %v", err)
				}
			})
		})
	}})
	cl.submit("late", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 16})
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		cl.t.Fatal("no reason written for pod late")
	}
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
