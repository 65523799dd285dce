package runner_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/internal/apilimits"
)

// The tests of this file treat everything in a pod as a researcher's untrusted
// input: a bad pod is told why on itself, binds nothing, and stops no one else.

// rawPod is a pod as an untrusted researcher may write it: any labels, and
// each container's (and init container's) nvidia.com/gpu limit as written.
type rawPod struct {
	labels     map[string]string
	gpus, init []string
}

// createRaw creates the pod in the cluster's namespace, or returns the API's
// refusal.
func (cl *cluster) createRaw(name string, p rawPod) error {
	cl.t.Helper()
	container := func(n, q string) corev1.Container {
		return corev1.Container{Name: n, Image: "trainer:1", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{nodestate.ResourceGPU: resource.MustParse(q)}}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Labels: p.labels},
		Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName}}
	for i, q := range p.gpus {
		pod.Spec.Containers = append(pod.Spec.Containers, container(fmt.Sprintf("c%d", i), q))
	}
	for i, q := range p.init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, container(fmt.Sprintf("i%d", i), q))
	}
	return cl.c.Create(context.Background(), pod)
}

// tenants is tenancy's two teams on two nodes of 8 GPUs, scheduled.
func tenants(t *testing.T) *cluster {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})
	return cl
}

// neverBound fails the test if any of the named pods is bound, looking a few
// times over a second: what waits must stay waiting.
func (cl *cluster) neverBound(names ...string) {
	cl.t.Helper()
	for range 10 {
		for i, n := range cl.nodesOf(names) {
			if n != "" {
				cl.t.Errorf("pod %s bound to %s", names[i], n)
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Gang labels are the researcher's: members that disagree on the gang's size
// or tier (or team), and a size that is no pod count (zero, not a number,
// beyond int64; a negative one is no label value the API server takes) or
// one no fleet has (a billion), leave the gang unbound with
// its reason on every pod — also for pods whose names are the longest the API
// takes, whose reason is an event too (the API drops a note over 1 KiB) —
// while a good pod of the same team binds.
func TestUntrustedGangLabels(t *testing.T) {
	cl := tenants(t)
	long := strings.Repeat("p", 240)
	gang := func(name, size string, extra map[string]string) map[string]string {
		l := map[string]string{contract.LabelGang: name, contract.LabelGangSize: size}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	cases := []struct {
		pods map[string]map[string]string
		want string
	}{
		{map[string]map[string]string{long + "-size-0": gang("size", "2", nil), long + "-size-1": gang("size", "3", nil)},
			`disagree on label allot.dev/gang-size ("2" and "3")`},
		{map[string]map[string]string{"tier-0": gang("tier", "2", map[string]string{contract.LabelTier: "production"}), "tier-1": gang("tier", "2", map[string]string{contract.LabelTier: "research"})},
			`disagree on label allot.dev/tier ("production" and "research")`},
		{map[string]map[string]string{"billion-0": gang("billion", "1000000000", nil)}, "waiting for the gang's pods: 1 of 1000000000 exist"},
		{map[string]map[string]string{"huge-0": gang("huge", "99999999999999999999", nil)}, `allot.dev/gang-size="99999999999999999999" is not a positive pod count`},
		{map[string]map[string]string{"zero-0": gang("zero", "0", nil)}, `allot.dev/gang-size="0" is not a positive pod count`},
		{map[string]map[string]string{"word-0": gang("word", "eight", nil)}, `allot.dev/gang-size="eight" is not a positive pod count`},
		{map[string]map[string]string{"teams-0": gang("teams", "2", nil), "teams-1": gang("teams", "2", map[string]string{contract.LabelTeam: "beta"})},
			`disagree on label allot.dev/team ("" and "beta")`},
	}
	var bad []string
	cl.in("alpha", func() {
		// A negative size is no label value the API server takes.
		if err := cl.createRaw("negative", rawPod{labels: gang("negative", "-3", nil), gpus: []string{"8"}}); !apierrors.IsInvalid(err) {
			t.Errorf("a pod of gang size -3: the API server answered %v, want Invalid", err)
		}
		for _, c := range cases {
			for name, labels := range c.pods {
				if err := cl.createRaw(name, rawPod{labels: labels, gpus: []string{"8"}}); err != nil {
					t.Fatalf("creating %s: %v", name, err)
				}
				bad = append(bad, name)
			}
		}
		good := cl.submit("good", podSpec{pods: 1, gpus: 8})
		cl.waitBound(good)
		for _, c := range cases {
			for name := range c.pods {
				cl.waitPending(name, c.want)
			}
		}
		cl.waitEvent(long+"-size-1", "Unschedulable", `disagree on label allot.dev/gang-size ("2" and "3")`)
		cl.neverBound(bad...)
	})
}

// A GPU count is the researcher's: a limit beyond any node (up to int64's
// largest), counts whose sum overflows int64 (to 1 GPU, if summed as they
// come), an init container's, are waited on with their reason and never
// bound; fractional and negative counts the API server refuses.
func TestUntrustedGPUCounts(t *testing.T) {
	cl := tenants(t)
	const maxInt64 = "9223372036854775807"
	cl.in("alpha", func() {
		for name, gpus := range map[string][]string{"fraction": {"0.5"}, "negative": {"-1"}, "milli": {"1500m"}} {
			if err := cl.createRaw(name, rawPod{gpus: gpus}); !apierrors.IsInvalid(err) {
				t.Errorf("pod %s asking %v GPUs: the API server answered %v, want Invalid", name, gpus, err)
			}
		}
		cases := map[string]struct {
			pod  rawPod
			want string
		}{
			"largest":  {rawPod{gpus: []string{maxInt64}}, "more than any fleet holds"},
			"overflow": {rawPod{gpus: []string{maxInt64, maxInt64, "3"}}, "more than any fleet holds"},
			"init":     {rawPod{gpus: []string{"1"}, init: []string{maxInt64}}, "more than any fleet holds"},
			"beyond":   {rawPod{gpus: []string{"1e30"}}, "more than any fleet holds"},
		}
		var names []string
		for name, c := range cases {
			if err := cl.createRaw(name, c.pod); err != nil {
				t.Fatalf("creating %s: %v", name, err)
			}
			names = append(names, name)
		}
		cl.waitBound(cl.submit("good", podSpec{pods: 1, gpus: 8}))
		for name, c := range cases {
			cl.waitPending(name, c.want)
		}
		cl.neverBound(names...)
	})
}

// Labels stay the researcher's after the bind: a pod of a running gang
// relabelled into a gang of its own stays in the gang it was bound with (it
// left its slot free for another pod beside it), and a pod that joins the
// running gang waits, told why, also under the next leader, which reads the
// gang as it was bound (allot.dev/bound-as), not as relabelled: the gang
// keeps running whole.
func TestRelabelledBoundPod(t *testing.T) {
	cl, s := alphaOnTwoNodes(t)
	g := cl.submit("g", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 8})
	cl.waitBound(g)
	var p corev1.Pod
	ctx := context.Background()
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: g[1]}, &p); err != nil {
		t.Fatal(err)
	}
	p.Labels[contract.LabelGang], p.Labels[contract.LabelGangSize] = "h", "1"
	if err := cl.c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if err := cl.createRaw("g-2", rawPod{labels: map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production",
		contract.LabelGang: "g", contract.LabelGangSize: "2"}, gpus: []string{"8"}}); err != nil {
		t.Fatal(err)
	}
	cl.waitPending("g-2", "gang jobs/gang/g is admitted for 2 pods, each of which has its slot")
	cl.neverBound("g-2")
	cl.checkNoOvercommit(8)
	s.stop()
	cl.start(schedOptions{})
	cl.waitPending("g-2", "gang jobs/gang/g is admitted for 2 pods, each of which has its slot")
	cl.neverBound("g-2")
	for _, name := range g {
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: name}, &p); err != nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			t.Errorf("pod %s of the running gang under the new leader: %v, node %q, deleting %v", name, err, p.Spec.NodeName, p.DeletionTimestamp != nil)
		}
	}
	cl.checkNoOvercommit(8)
}

// One researcher's thousand pods at once (each its own workload, far over
// the team's quota) hold up no other team's decision: a pod of another team
// submitted after them binds while they wait, another is told at once why it
// waits (reasons are written a team at a time in turn), and theirs bind
// no further than their quota.
func TestFloodHoldsUpNoOtherTeam(t *testing.T) {
	cl := tenants(t)
	cl.floodHoldsUpNoOtherTeam(func(int) string { return "alpha" }, 5*time.Second)
}

// Nor do a thousand namespaces of one pod each (a namespace per experiment,
// all team alpha's): a team takes one turn in the writing of reasons,
// whatever its number of namespaces. When each namespace took a turn, team
// beta's pod was told why it waits behind them all: 3.95 s after it came
// (0.23 s now).
func TestManyNamespacesHoldUpNoOtherTeam(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	nsOf := func(i int) string { return fmt.Sprintf("exp-%04d", i) }
	var names []string
	for i := range flood {
		names = append(names, nsOf(i))
	}
	ctx := context.Background()
	cl.concurrently(func(_ cluster, i int) error {
		return cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsOf(i)}})
	})
	var alpha allotv1.Team
	if err := cl.c.Get(ctx, client.ObjectKey{Name: "alpha"}, &alpha); err != nil {
		t.Fatal(err)
	}
	alpha.Annotations = map[string]string{allotv1.AnnotationNamespaces: strings.Join(names, ",")}
	if err := cl.c.Update(ctx, &alpha); err != nil {
		t.Fatal(err)
	}
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})
	cl.floodHoldsUpNoOtherTeam(nsOf, 2500*time.Millisecond)
}

// flood is the number of team alpha's pods in the flood tests.
const flood = 1000

// floodHoldsUpNoOtherTeam creates team alpha's flood, pod i in namespace
// nsOf(i), and checks that team beta's pods (namespace shared) are decided
// meanwhile, one told why it waits within told, and that alpha's bind no
// further than its quota.
func (cl *cluster) floodHoldsUpNoOtherTeam(nsOf func(int) string, told time.Duration) {
	t := cl.t
	cl.concurrently(func(c cluster, i int) error {
		c.ns = nsOf(i)
		return c.createRaw(fmt.Sprintf("flood-%04d", i), rawPod{gpus: []string{"8"}})
	})
	cl.in("shared", func() {
		start := time.Now()
		cl.waitBound(cl.submit("other", podSpec{pods: 1, gpus: 8}))
		t.Logf("team beta's pod bound %s after team alpha's %d pods", time.Since(start).Round(time.Millisecond), flood)
		// Its reason is not written behind the flood's: it waited 11.7 s
		// behind theirs when every reason was written in the order decided.
		start = time.Now()
		cl.submit("more", podSpec{pods: 1, gpus: 8})
		cl.waitPending("more", "over quota on h100")
		d := time.Since(start)
		t.Logf("team beta's pod told why it waits %s after it came", d.Round(time.Millisecond))
		if d > told {
			t.Errorf("team beta's pod told why it waits %s after it came, behind team alpha's %d", d.Round(time.Millisecond), flood)
		}
	})
	cl.in(nsOf(flood-1), func() {
		// The flood's own reasons, a thousand writes, take longer on a
		// loaded machine (35 s beside two test suites).
		cl.waitPendingWithin(fmt.Sprintf("flood-%04d", flood-1), regexp.MustCompile("over quota on h100"), 3*time.Minute)
	})
	var pods corev1.PodList
	if err := cl.c.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	b := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "flood-") && p.Spec.NodeName != "" {
			b++
		}
	}
	if b != 1 {
		t.Errorf("%d of team alpha's pods bound, its quota is one", b)
	}
}

// concurrently runs f(c, i) for i in [0, flood) from ten goroutines, each
// with its own copy of the cluster (cl.in would race), and fails the test on
// an error.
func (cl *cluster) concurrently(f func(c cluster, i int) error) {
	cl.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, flood)
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < flood; i += 10 {
				if err := f(*cl, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		cl.t.Fatal(err)
	}
}

// Another scheduler's pods are untrusted too: two put on a node by hand, each
// asking int64's largest count of GPUs (their sum wraps around), hold the
// whole node until they end; allot places nothing there.
func TestForeignPodsOfAbsurdSize(t *testing.T) {
	cl, _ := alphaOnTwoNodes(t)
	for i := range 2 {
		q := resource.MustParse("9223372036854775807")
		cl.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: fmt.Sprintf("foreign-%d", i)},
			Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName, NodeName: "a-0",
				Containers: []corev1.Container{{Name: "c", Image: "other:1", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{nodestate.ResourceGPU: q}}}}},
		})
	}
	var pods []string
	for i := range 2 {
		pods = append(pods, cl.submit(fmt.Sprintf("p-%d", i), podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})...)
	}
	var nodes []string
	eventually(t, 20*time.Second, "one pod bound, one waiting for a node", func() error {
		if nodes = cl.nodesOf(pods); bound(nodes) != 1 || !slices.Contains(nodes, "a-1") {
			return fmt.Errorf("bound to %v", nodes)
		}
		return nil
	})
	cl.neverBound(pods[slices.Index(nodes, "")])
}

// An API error is no one's to bound: an admission policy that refuses a bind
// with a message of 40 KiB (as a webhook quoting a pod's annotations may)
// rolls the gang back, and what the scheduler writes of it reaches the API
// cut to its bounds, not lost: the BindFailed and Unbound events (the API
// server drops a note over 1 KiB), the DisruptionTarget condition of the pod
// taken back (cut at a condition's 32 KiB); and the RemakeFailed event of the
// pod the API then refuses to make again keeps its own words after the
// error it quotes.
func TestLongAPIErrorsAreCut(t *testing.T) {
	cl, names := gangOfThree(t)
	long := "refused: " + strings.Repeat("x", 40<<10)
	liftBinds := cl.refuseBindsSaying(names[1], true, long)
	release := cl.holdDeletion(names[0])
	cl.start(schedOptions{core: fastBackoff(time.Hour)})
	cl.waitCutEvent(names[1], "BindFailed", "gang jobs/gang/g could not be bound whole; requeued, retried in ")
	cl.waitCutEvent(names[0], "Unbound", "gang jobs/gang/g rolled back: binding pod g-1 to node ")
	cl.waitDeleting(names[0])
	p := cl.pods()[names[0]]
	i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget })
	if i < 0 {
		t.Fatalf("pod %s taken back without DisruptionTarget: %+v", names[0], p.Status.Conditions)
	}
	if msg := p.Status.Conditions[i].Message; len(msg) > apilimits.ConditionBytes || len(msg) < apilimits.ConditionBytes-4 ||
		!strings.HasPrefix(msg, "gang jobs/gang/g rolled back: binding pod g-1") || !strings.HasSuffix(msg, "(truncated)") {
		t.Errorf("DisruptionTarget of %d bytes (at most %d, cut): %.80q...%q", len(msg), apilimits.ConditionBytes, msg, msg[max(0, len(msg)-20):])
	}
	liftCreate := cl.refusePodCreationSaying(names[0], long)
	release()
	note := cl.waitCutEvent(names[0], "RemakeFailed", "the pod, taken back from its node, could not be made again unbound (")
	if !strings.HasSuffix(note, "(truncated)); retrying until it can") {
		t.Errorf("RemakeFailed lost its own words after the error: ...%q", note[max(0, len(note)-60):])
	}
	liftBinds()
	liftCreate()
	cl.waitBound(names)
}

// A pod that cannot be taken back is said to stay bound, however long the
// API error that rolled its gang back: the note quotes that error in part.
func TestLongAPIErrorKeepsUnbindFailed(t *testing.T) {
	cl, names := gangOfThree(t)
	cl.refuseBindsSaying(names[1], true, "refused: "+strings.Repeat("x", 40<<10))
	cl.refusePodCreation(names[0])
	cl.start(schedOptions{core: fastBackoff(time.Hour)})
	note := cl.waitCutEvent(names[0], "UnbindFailed", "gang jobs/gang/g rolled back: binding pod g-1 to node ")
	if !strings.Contains(note, "(truncated); the pod stays bound: the API would not make it again unbound") {
		t.Errorf("UnbindFailed does not say the pod stays bound, and why: ...%q", note[max(0, len(note)-200):])
	}
}

// waitCutEvent waits for an event of reason on pod whose note starts with
// prefix and was cut (over 1 KiB, the API server would have dropped it):
// at most apilimits.NoteBytes, saying where it was cut. It returns the note.
func (cl *cluster) waitCutEvent(pod, reason, prefix string) string {
	cl.t.Helper()
	var note string
	eventually(cl.t, 20*time.Second, "event "+reason+" on "+pod+", cut", func() error {
		var evs eventsv1.EventList
		if err := cl.c.List(context.Background(), &evs, client.InNamespace(cl.ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name != pod || e.Reason != reason {
				continue
			}
			if strings.HasPrefix(e.Note, prefix) && len(e.Note) <= apilimits.NoteBytes && strings.Contains(e.Note, "(truncated)") {
				note = e.Note
				return nil
			}
			seen = append(seen, fmt.Sprintf("%d bytes: %.100q", len(e.Note), e.Note))
		}
		return fmt.Errorf("events %s: %q", reason, seen)
	})
	return note
}

// Two teams' thousand single-pod workloads, there before the scheduler
// starts, are decided in one step: two bound, 998 pending. Every pod's
// PodScheduled says so, but the scheduler's events of their pods are bounded
// (eventsPerTeam, 32, of a team's an eventWindow of 10 s; eventBudget, 128,
// of all teams'): each team gets its share, and the rest are counted in
// allot_scheduler_events_suppressed_total and told on each Team in an
// EventsSuppressed event. It sent an event a pod before (500 a team, in one
// burst, into the event broadcaster's queue of 1,000).
func TestEventsBoundedAcrossWorkloads(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	cl.pool("a", "h100", 2, 8, 2)
	nsOf := func(i int) string { return []string{"alpha", "shared"}[i%2] }
	teamOf := map[string]string{"alpha": "alpha", "shared": "beta"}
	cl.concurrently(func(c cluster, i int) error {
		c.ns = nsOf(i)
		return c.createRaw(fmt.Sprintf("flood-%04d", i), rawPod{gpus: []string{"8"}})
	})
	start := time.Now()
	s := cl.start(schedOptions{})
	ctx := context.Background()
	// Every pod's status is written, whatever became of its event.
	eventually(t, 3*time.Minute, "every pod bound or told why it waits", func() error {
		var pods corev1.PodList
		if err := cl.c.List(ctx, &pods); err != nil {
			return err
		}
		bound, told := map[string]int{}, 0
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, "flood-") {
				continue
			}
			if p.Spec.NodeName != "" {
				bound[teamOf[p.Namespace]]++
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "over quota on h100") {
					told++
				}
			}
		}
		if bound["alpha"] != 1 || bound["beta"] != 1 || told != flood-2 {
			return fmt.Errorf("bound %v (want one a team), %d of %d told why they wait", bound, told, flood-2)
		}
		return nil
	})
	// The events sent, once the broadcaster has sent what it was given.
	sent := map[string]int{}
	var last time.Time
	eventually(t, 30*time.Second, "the events sent settle", func() error {
		n := map[string]int{}
		for _, ns := range []string{"alpha", "shared"} {
			var evs eventsv1.EventList
			if err := cl.c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range evs.Items {
				if e.ReportingController == "allot-scheduler" && strings.HasPrefix(e.Regarding.Name, "flood-") {
					n[teamOf[ns]]++
				}
			}
		}
		if !maps.Equal(n, sent) || last.IsZero() {
			sent, last = n, time.Now()
			return fmt.Errorf("events sent %v, still changing", n)
		}
		if time.Since(last) < time.Second {
			return fmt.Errorf("events sent %v", n)
		}
		return nil
	})
	elapsed := time.Since(start)
	// A team's share is 32 events and comes back at 32 a 10 s; all teams'
	// is 128, at 128 a 10 s.
	perTeam := 32 + int(32*elapsed/(10*time.Second)) + 1
	all := 128 + int(128*elapsed/(10*time.Second)) + 1
	t.Logf("events sent in %s: %v (at most %d a team, %d in all)", elapsed.Round(time.Millisecond), sent, perTeam, all)
	if sent["alpha"]+sent["beta"] > all {
		t.Errorf("%d events sent of %d pods in %s, more than %d", sent["alpha"]+sent["beta"], flood, elapsed.Round(time.Millisecond), all)
	}
	for _, team := range []string{"alpha", "beta"} {
		if n := sent[team]; n < 32 || n > perTeam {
			t.Errorf("team %s: %d events of its %d pods sent in %s, want its share, 32 to %d", team, n, flood/2, elapsed.Round(time.Millisecond), perTeam)
		}
	}
	// What was held back is counted, and told on the Team.
	got, err := s.scrape()
	if err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"alpha", "beta"} {
		var held float64
		for k, v := range got {
			if strings.HasPrefix(k, "allot_scheduler_events_suppressed_total{") && strings.Contains(k, fmt.Sprintf("team=%q", team)) {
				held += v - s.base[k]
			}
		}
		// Each pod had at least an event: Scheduled, or Unschedulable.
		if int(held)+sent[team] < flood/2 {
			t.Errorf("team %s: %v events counted as held back and %d sent, fewer than its %d pods", team, held, sent[team], flood/2)
		}
		eventually(t, 20*time.Second, "an EventsSuppressed event on Team "+team, func() error {
			var evs eventsv1.EventList
			if err := cl.c.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
				return err
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Regarding.Kind != "Team" || e.Regarding.Name != team || e.Reason != "EventsSuppressed" {
					continue
				}
				var n float64
				if _, err := fmt.Sscanf(e.Note, "%g events of the team's pods held back", &n); err == nil && n > 0 && n <= held {
					return nil
				}
				seen = append(seen, e.Note)
			}
			return fmt.Errorf("%d held back; events %q", int(held), seen)
		})
	}
}
