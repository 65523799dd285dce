package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// TestRoutedJobCountsWhateverItsNodes: a job routed to east keeps running
// there when the node the hub counted it on is deleted, and then when the
// node it was counted on next is relabelled out of its flavor: it counts in
// its team's quota all along (ml's quota is 16 GPUs: with ml/run's 8 and
// ml/more's 8, ml/over waits OverQuota and has no copy anywhere), and in
// east's GPUs while east has some free (ml/more goes to the dearer west,
// east's last node being ml/run's); its copy is untouched; the Job says how
// it is counted (hub.allot.dev/accounted), an event says so, and
// allot_hub_jobs_placement_gone counts it by how.
func TestRoutedJobCountsWhateverItsNodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}, "west": {price: "30", nodes: 2}}, 16, time.Minute)
	c, east := hubEnv.Client, workers["east"].env.Client
	rec := events.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	r, probe := probedRouter(t, ctx, hubEnv, c)
	r.Recorder, r.Metrics = rec, hub.NewMetrics(reg)
	pass := func() {
		t.Helper()
		probe("east", "west")
		for range 2 {
			if err := r.Pass(ctx); err != nil {
				t.Errorf("pass: %v", err)
			}
		}
	}
	get := func(name string) *batchv1.Job {
		t.Helper()
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	gauge := func(counted string) float64 {
		t.Helper()
		return max(testenv.Metric(t, reg, "allot_hub_jobs_placement_gone", map[string]string{"cluster": "east", "counted": counted}), 0)
	}
	said := func(want string) {
		t.Helper()
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, hub.ReasonPlacementGone) && strings.Contains(e, want) {
				return
			}
		}
		t.Errorf("no %s event says %q", hub.ReasonPlacementGone, want)
	}

	if err := c.Create(ctx, gpuJob("run", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	pass()
	cp := copyIn(t, ctx, workers["east"], "run")
	if cp == nil {
		t.Fatalf("ml/run not routed to east: %v", get("run").Annotations)
	}
	counted, _, _ := strings.Cut(get("run").Annotations[hub.AnnotationPlacement], "=")
	other := map[string]string{"east-0": "east-1", "east-1": "east-0"}[counted]
	if other == "" {
		t.Fatalf("ml/run counted on %q", counted)
	}

	// The node it was counted on is deleted (its pods with it: the worker
	// binds them again on its other node).
	if err := east.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: counted}}); err != nil {
		t.Fatal(err)
	}
	pass()
	if a := get("run").Annotations[hub.AnnotationAccounted]; !strings.Contains(a, other+"=1") || !strings.Contains(a, counted) {
		t.Errorf("%s on ml/run: %q, want it counted on %s instead of %s", hub.AnnotationAccounted, a, other, counted)
	}
	said("counts in team ml's quota and east's GPUs on " + other + "=1")
	if g := gauge("nodes"); g != 1 {
		t.Errorf("allot_hub_jobs_placement_gone{cluster=east,counted=nodes} = %v, want 1", g)
	}
	if err := c.Create(ctx, gpuJob("more", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	pass()
	if got := get("more").Annotations[hub.AnnotationCluster]; got != "west" {
		t.Errorf("ml/more routed to %q, want west: east's last node is ml/run's", got)
	}
	if err := c.Create(ctx, gpuJob("over", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	pass()
	overQuota := func(when string) {
		t.Helper()
		j := get("over")
		if p := j.Annotations[hub.AnnotationPending]; j.Annotations[hub.AnnotationCluster] != "" || !strings.Contains(p, "OverQuota") {
			t.Errorf("%s: ml/over routed to %q (pending %q), beyond ml's 16 GPUs with ml/run and ml/more running", when, j.Annotations[hub.AnnotationCluster], p)
		}
		for name, w := range workers {
			if copyIn(t, ctx, w, "over") != nil {
				t.Errorf("%s: a copy of ml/over in %s", when, name)
			}
		}
		if now := copyIn(t, ctx, workers["east"], "run"); now == nil || now.UID != cp.UID {
			t.Errorf("%s: ml/run's copy in east was deleted or made again", when)
		}
	}
	overQuota("its node deleted")

	// Its other node is relabelled out of h100: east has no node of its
	// flavor left, and it still runs there.
	var n corev1.Node
	if err := east.Get(ctx, client.ObjectKey{Name: other}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels[contract.LabelFlavor] = "a100"
	if err := east.Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
	pass()
	if a := get("run").Annotations[hub.AnnotationAccounted]; !strings.Contains(a, "count in team ml's quota on no node of east") {
		t.Errorf("%s on ml/run: %q, want it counted in ml's quota alone", hub.AnnotationAccounted, a)
	}
	said("count in team ml's quota on no node of east")
	if g, n := gauge("quota"), gauge("nodes"); g != 1 || n != 0 {
		t.Errorf("allot_hub_jobs_placement_gone{cluster=east}: counted=quota %v, nodes %v; want 1 and 0", g, n)
	}
	overQuota("no node of its flavor left")

	// ml/run ends: ml/over takes its place in the quota, and the Job says
	// nothing more of nodes.
	if err := c.Delete(ctx, get("run")); err != nil {
		t.Fatal(err)
	}
	pass()
	if got := get("over").Annotations[hub.AnnotationCluster]; got != "west" {
		t.Errorf("ml/over routed to %q once ml/run is gone, want west", got)
	}
	if g := gauge("quota"); g != 0 {
		t.Errorf("allot_hub_jobs_placement_gone{cluster=east,counted=quota} = %v after ml/run is gone", g)
	}
}
