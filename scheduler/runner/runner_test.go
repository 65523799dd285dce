package runner_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// A gang is bound whole or not at all: a gang that does not fit binds no pod
// while it waits, and binds every pod at once when room appears.
func TestGangWholeOrNothing(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 2)
	cl.start(schedOptions{})

	first := cl.submit("first", podSpec{team: "alpha", tier: "production", pods: 3, gpus: 8})
	nodes := cl.waitBound(first)
	if distinct(nodes) != 3 {
		t.Fatalf("3 pods of 8 GPUs on 8-GPU nodes share a node: %v", nodes)
	}

	second := cl.submit("second", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8})
	msg := cl.waitPending(second[0], "not enough healthy nodes of h100")
	if !strings.Contains(msg, "requests 16 GPUs, 8 usable free") {
		t.Errorf("pending reason without the numbers: %q", msg)
	}
	for range 10 { // it stays so: never a part of the gang
		if b := bound(cl.nodesOf(second)); b != 0 {
			t.Fatalf("%d of 2 pods of a gang that does not fit were bound", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl.finish(first)
	cl.waitBound(second)
	cl.checkNoOvercommit(8)
}

// A gang found bound in part (a bind cut short by a crash) is rolled back and
// bound whole; a pod alone with its node set is simply accounted for.
func TestPartlyBoundGangRolledBack(t *testing.T) {
	cl, names := gangOfThree(t)
	// Bind one pod of the gang by hand, as a scheduler that died mid-gang would have.
	bindTo(t, cl, names[0], "a-3")
	// The pod rolled back is deleted marked DisruptionTarget, so that its Job
	// (with a podFailurePolicy) does not count it as a failure.
	gone := cl.watchDeletion(names[0])
	cl.start(schedOptions{})
	if p := gone(); !disrupted(p) {
		t.Errorf("pod %s deleted without a DisruptionTarget condition: %+v", p.Name, p.Status.Conditions)
	}
	eventually(t, 20*time.Second, "gang rolled back and bound whole", func() error {
		pods := cl.pods()
		var nodes []string
		for _, n := range names {
			p, ok := pods[n]
			if !ok {
				return fmt.Errorf("pod %s not recreated yet", n)
			}
			nodes = append(nodes, p.Spec.NodeName)
		}
		if bound(nodes) != 3 {
			return fmt.Errorf("bound: %v", nodes)
		}
		return nil
	})
	cl.checkNoOvercommit(8)
}

// Within a team a higher tier preempts a lower, preemptible one: the victim is
// evicted whole through the Eviction API, with an event naming the reason.
func TestPreemptionByTier(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})

	low := cl.submit("low", podSpec{team: "alpha", tier: "research", pods: 2, gpus: 8})
	cl.waitBound(low)
	gone := cl.watchDeletion(low[0])
	high := cl.submit("high", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	cl.waitBound(high)
	// Evicted through the Eviction API, which marks it DisruptionTarget.
	if p := gone(); !disrupted(p) {
		t.Errorf("preempted pod %s deleted without a DisruptionTarget condition: %+v", p.Name, p.Status.Conditions)
	}
	pods := cl.pods()
	for _, n := range low {
		if _, ok := pods[n]; ok {
			t.Errorf("victim pod %s still there after its gang was preempted", n)
		}
	}
	cl.waitEvent(low[0], "Preempted", "HigherTier")
	cl.checkNoOvercommit(8)
}

// A team under its nominal quota reclaims what another team of its cohort
// borrows, whatever the borrower's tier; the metrics say so.
func TestPreemptionByReclaim(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.cohort("ml")
	cl.team("alpha", "ml", "h100", 8)
	cl.team("beta", "ml", "h100", 8)
	cl.pool("a", "h100", 2, 8, 2)
	s := cl.start(schedOptions{})

	borrower := cl.submit("borrower", podSpec{team: "beta", tier: "production", pods: 2, gpus: 8})
	cl.waitBound(borrower)
	eventually(t, 10*time.Second, "beta's borrowing in its status and metrics", func() error {
		var team allotv1.Team
		if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "beta"}, &team); err != nil {
			return err
		}
		if len(team.Status.Flavors) != 1 || team.Status.Flavors[0].BorrowedGPUs != 8 || team.Status.Flavors[0].UsedGPUs != 16 {
			return fmt.Errorf("status %+v", team.Status)
		}
		return s.expect(map[string]float64{
			`allot_team_used_gpus{flavor="h100",team="beta"}`:     16,
			`allot_team_borrowed_gpus{flavor="h100",team="beta"}`: 8,
			`allot_team_lent_gpus{flavor="h100",team="alpha"}`:    8,
			`allot_scheduler_binds_total{result="ok"}`:            2,
		})
	})

	owner := cl.submit("owner", podSpec{team: "alpha", tier: "research", pods: 1, gpus: 8})
	cl.waitBound(owner)
	if b := bound(cl.nodesOf(borrower)); b != 0 {
		t.Fatalf("the borrowing gang kept %d pods after the reclaim", b)
	}
	cl.waitEvent(borrower[0], "Preempted", "ReclaimBorrowed")
	eventually(t, 10*time.Second, "preemption metrics", func() error {
		return s.expect(map[string]float64{
			`allot_scheduler_preemptions_total{reason="ReclaimBorrowed"}`: 1,
			`allot_team_used_gpus{flavor="h100",team="alpha"}`:            8,
			`allot_team_pending_workloads{team="beta",tier="production"}`: 0,
		})
	})
	cl.checkNoOvercommit(8)
}

// A quota lowered below what a team runs (docs/scheduling.md): the running work
// stays; the excess counts as borrowed, so the team admits nothing new of that
// flavor and its cohort may reclaim the excess.
func TestQuotaLoweredBelowUse(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.cohort("ml")
	cl.team("alpha", "ml", "h100", 16)
	cl.team("beta", "ml", "h100", 8)
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})

	running := append(cl.submit("run-1", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8}),
		cl.submit("run-2", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})...)
	before := cl.waitBound(running)

	var team allotv1.Team
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "alpha"}, &team); err != nil {
		t.Fatal(err)
	}
	team.Spec.Quota[0].Nominal = 8
	if err := cl.c.Update(context.Background(), &team); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "alpha's excess counted as borrowed", func() error {
		var cur allotv1.Team
		if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "alpha"}, &cur); err != nil {
			return err
		}
		if len(cur.Status.Flavors) != 1 || cur.Status.Flavors[0].BorrowedGPUs != 8 {
			return fmt.Errorf("status %+v", cur.Status.Flavors)
		}
		// The scheduler says the new generation is the quota in force.
		if !conditions.IsTrue(&cur, allotv1.QuotaAppliedCondition) || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("QuotaApplied %q, observed generation %d of %d",
				conditions.GetMessage(&cur, allotv1.QuotaAppliedCondition), cur.Status.ObservedGeneration, cur.Generation)
		}
		return nil
	})
	if after := cl.nodesOf(running); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("running pods moved or went when the quota was lowered: %v, then %v", before, after)
	}

	// beta, under its nominal, reclaims the excess: one of alpha's pods goes.
	claim := cl.submit("claim", podSpec{team: "beta", tier: "research", pods: 1, gpus: 8})
	cl.waitBound(claim)
	if b := bound(cl.nodesOf(running)); b != 1 {
		t.Fatalf("alpha runs %d pods after beta reclaimed 8 GPUs; want 1 (its new nominal)", b)
	}
	cl.checkNoOvercommit(8)
}

// A scheduler stopped in the middle of a stream and started again (a restart,
// or a new leader) rebuilds its state from the bound pods: nothing is bound
// twice, nothing running moves, no node is over-committed.
func TestRestartWithoutDoubleBinding(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 1000)
	cl.pool("a", "h100", 6, 8, 3)
	s1 := cl.start(schedOptions{})

	var names []string
	for i := range 24 {
		names = append(names, cl.submit(fmt.Sprintf("p%02d", i), podSpec{team: "alpha", tier: "production", pods: 1, gpus: 2})...)
	}
	// Stop as soon as some are bound: binds may be in flight.
	eventually(t, 20*time.Second, "some pods bound", func() error {
		if b := bound(cl.nodesOf(names)); b < 4 {
			return fmt.Errorf("%d bound", b)
		}
		return nil
	})
	s1.stop()
	mid := cl.nodesOf(names)

	for i := range 4 {
		names = append(names, cl.submit(fmt.Sprintf("late%d", i), podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})...)
	}
	cl.start(schedOptions{})
	// 24 x 2 GPUs fill 6 of the 6 nodes' 48 GPUs: the late 8-GPU pods wait.
	cl.waitBound(names[:24])
	after := cl.nodesOf(names[:24])
	for i, n := range mid {
		if n != "" && after[i] != n {
			t.Errorf("pod %s moved from %s to %s across the restart", names[i], n, after[i])
		}
	}
	// Either reason is true, depending on whether late0 was first considered
	// in the same cycle as the last 2-GPU pods (which took the free GPUs
	// ahead of it) or after: the reason says why it waits as of the cycle
	// that last considered it.
	cl.waitPendingMatch("late0", regexp.MustCompile(`not enough healthy nodes|waiting behind workloads ordered first on h100: requests 8 GPUs, 0 left`))
	cl.checkNoOvercommit(8)
}

// With leader election, only the leader schedules; when it stops, the other
// replica takes over and schedules from the state in the API.
func TestLeaderElectionHandOver(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 2, 8, 2)
	first := cl.start(schedOptions{leaderElection: true})
	one := cl.submit("one", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	cl.waitBound(one)
	holder := cl.leaseHolder()

	cl.start(schedOptions{leaderElection: true})
	first.stop()
	eventually(t, 30*time.Second, "a new leader", func() error {
		if h := cl.leaseHolder(); h == holder || h == "" {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	// Created within one second (the API's resolution), either may go first.
	late := append(cl.submit("two", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8}),
		cl.submit("three", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})...)
	// The new leader knows "one" holds a node: only one of them fits.
	var waiting string
	eventually(t, 20*time.Second, "one of two and three bound", func() error {
		nodes := cl.nodesOf(late)
		if bound(nodes) != 1 {
			return fmt.Errorf("bound: %v", nodes)
		}
		waiting = late[0]
		if nodes[0] != "" {
			waiting = late[1]
		}
		return nil
	})
	cl.waitPending(waiting, "h100")
	cl.checkNoOvercommit(8)
}

func (cl *cluster) leaseHolder() string {
	var l coordinationv1.Lease
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "allot-scheduler-test"}, &l); err != nil {
		return ""
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func bindTo(t *testing.T, cl *cluster, pod, node string) {
	t.Helper()
	var p corev1.Pod
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: pod}, &p); err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	b.Name, b.Namespace = pod, cl.ns
	if err := cl.c.SubResource("binding").Create(context.Background(), &p, b); err != nil {
		t.Fatal(err)
	}
}

func distinct(xs []string) int {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return len(m)
}

// checkNoOvercommit fails when the live pods bound to a node ask more GPUs than
// it has.
func (cl *cluster) checkNoOvercommit(gpusPerNode int64) {
	cl.t.Helper()
	per := map[string]int64{}
	for _, p := range cl.pods() {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]
		per[p.Spec.NodeName] += q.Value()
	}
	for n, g := range per {
		if g > gpusPerNode {
			cl.t.Errorf("node %s over-committed: %d GPUs of %d", n, g, gpusPerNode)
		}
	}
}

// waitEvent waits for an event on a pod (by name) with the reason and a note
// containing want.
func (cl *cluster) waitEvent(pod, reason, want string) {
	cl.t.Helper()
	eventually(cl.t, 10*time.Second, "event "+reason+" on "+pod, func() error {
		var evs eventsv1.EventList
		if err := cl.c.List(context.Background(), &evs, client.InNamespace(cl.ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name == pod {
				note := e.Note
				if e.Reason == reason && strings.Contains(note, want) {
					return nil
				}
				seen = append(seen, e.Reason+": "+note)
			}
		}
		return fmt.Errorf("events %q", seen)
	})
}

// scrape reads /metrics as 'name{labels}': value.
func (s *sched) scrape() (map[string]float64, error) {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return samples(families), nil
}

// expect scrapes /metrics and compares the given samples ('name{labels}': value).
func (s *sched) expect(want map[string]float64) error {
	got, err := s.scrape()
	if err != nil {
		return err
	}
	for k, v := range want {
		g, ok := got[k]
		g -= s.base[k] // counters count from the test's start: the registry is the process's
		if !ok && v == 0 {
			continue // a zero gauge may be absent
		}
		if !ok || g != v {
			return fmt.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	return nil
}

// counter is one counter sample, counted from the test's start.
func (s *sched) counter(key string) (float64, error) {
	got, err := s.scrape()
	return got[key] - s.base[key], err
}

// expectAtLeast scrapes /metrics and checks one sample is at least min (no
// baseline: the metric continues from persisted totals).
func (s *sched) expectAtLeast(key string, min float64) error {
	got, err := s.scrape()
	if err != nil {
		return err
	}
	if g, ok := got[key]; !ok || g < min {
		return fmt.Errorf("%s = %v (present %v), want at least %v", key, g, ok, min)
	}
	return nil
}

// samples flattens metric families to 'name{labels}': value; counters and
// gauges only.
func samples(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.Metric {
			out[sampleKey(name, m)] = value(m)
		}
	}
	return out
}

func sampleKey(name string, m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// alphaOnTwoNodes is team alpha of 16 GPUs on two nodes of 8, scheduled.
func alphaOnTwoNodes(t *testing.T) (*cluster, *sched) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.pool("a", "h100", 2, 8, 2)
	return cl, cl.start(schedOptions{})
}

// The GPU time of the pods the scheduler bound is metered per team, flavor and
// tier, matches the pods' bound time, and continues across a restart.
func TestMetering(t *testing.T) {
	cl, s := alphaOnTwoNodes(t)

	short := cl.submit("short", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 2})
	long := cl.submit("long", podSpec{team: "alpha", tier: "research", pods: 1, gpus: 4})
	cl.waitBound(append(short, long...))
	time.Sleep(2 * time.Second)
	cl.finish(short)
	time.Sleep(time.Second)
	s.stop() // a restart: the next scheduler carries on from the Team's status
	time.Sleep(time.Second)
	s = cl.start(schedOptions{})
	time.Sleep(time.Second)
	cl.finish(long)

	// What the pods really held: from their PodScheduled time to their end,
	// as the API server recorded them.
	want := map[string]float64{}
	for _, name := range []string{"short", "long"} {
		p := cl.pods()[name]
		var start time.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				start = c.LastTransitionTime.Time
			}
		}
		end := p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Time // as the kubelet said
		q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]
		want[p.Labels["allot.dev/tier"]] = float64(q.Value()) * end.Sub(start).Seconds()
	}
	eventually(t, 10*time.Second, "metered GPU-seconds", func() error {
		var team allotv1.Team
		if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "alpha"}, &team); err != nil {
			return err
		}
		got := map[string]float64{}
		for _, m := range team.Status.Metered {
			if m.Flavor != "h100" {
				return fmt.Errorf("metered flavor %q", m.Flavor)
			}
			got[m.Tier] = float64(m.GPUSeconds)
		}
		for tier, w := range want {
			// Whole seconds (the API's resolution): within 1 s of GPU time per GPU.
			if g := got[tier]; g < w-5 || g > w+5 {
				return fmt.Errorf("tier %s: metered %v GPU-s, want %.1f (all: %v)", tier, g, w, got)
			}
		}
		return s.expectAtLeast(`allot_team_gpu_seconds_total{flavor="h100",team="alpha",tier="research"}`, want["research"]-5)
	})
}

// A pod on its way out holds its GPUs until it is gone: the replacement its
// controller makes waits for the slot instead of being bound beside it (where
// the kubelet would refuse it).
func TestReplacementWaitsForTheLeavingPod(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})
	ctx := context.Background()

	names := cl.submit("g", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8})
	nodes := cl.waitBound(names)
	// g-1 leaves slowly: a finalizer holds it, as a long grace period would.
	var leaving corev1.Pod
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: names[1]}, &leaving); err != nil {
		t.Fatal(err)
	}
	leaving.Finalizers = []string{"test.allot.dev/hold"}
	if err := cl.c.Update(ctx, &leaving); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Delete(ctx, &leaving); err != nil {
		t.Fatal(err)
	}
	// Its replacement, as a Job controller would make it.
	repl := &corev1.Pod{}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: names[0]}, repl); err != nil {
		t.Fatal(err)
	}
	repl = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "g-2", Labels: repl.Labels}, Spec: *repl.Spec.DeepCopy()}
	repl.Spec.NodeName = ""
	cl.create(repl)
	for range 20 {
		if n := cl.nodesOf([]string{"g-2"})[0]; n != "" {
			t.Fatalf("the replacement was bound to %s while the pod it replaces still holds %s", n, nodes[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: names[1]}, &leaving); err != nil {
		t.Fatal(err)
	}
	leaving.Finalizers = nil
	if err := cl.c.Update(ctx, &leaving); err != nil {
		t.Fatal(err)
	}
	if got := cl.waitBound([]string{"g-2"}); got[0] != nodes[1] {
		t.Errorf("the replacement went to %s, want the freed %s", got[0], nodes[1])
	}
}
