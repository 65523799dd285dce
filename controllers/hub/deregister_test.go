package hub_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
)

// TestDeregisteredWorkerKeepsItsJobsUntilTheFence: a worker whose Cluster is
// deleted gives its jobs up only once the fence of the copies the hub made
// there has passed. The hub can no longer reach it to delete a copy, and the
// worker's manager starts a copy until its fence: a job routed again sooner
// could run in two clusters.
func TestDeregisteredWorkerKeepsItsJobsUntilTheFence(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const failoverAfter = 4 * time.Second
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}, "west": {price: "30", nodes: 2}}, 16, failoverAfter)
	c := hubEnv.Client
	r, probe := probedRouter(t, ctx, hubEnv, c)
	probe("east", "west")
	pass := func() {
		t.Helper()
		if err := r.Pass(ctx); err != nil {
			t.Logf("pass: %v", err)
		}
	}
	routing := func() (string, string) {
		t.Helper()
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "j"}, &j); err != nil {
			t.Fatal(err)
		}
		return j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt]
	}
	if err := c.Create(ctx, gpuJob("j", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	pass()
	if cl, at := routing(); cl != "east" || at != "1" {
		t.Fatalf("ml/j routed to %q attempt %q, want east 1 (the cheaper)", cl, at)
	}
	cp := copyIn(t, ctx, workers["east"], "j")
	if cp == nil {
		t.Fatal("no copy of ml/j in east")
	}
	fence, err := time.Parse(time.RFC3339, cp.Annotations[contract.AnnotationHubFence])
	if err != nil {
		t.Fatal(err)
	}

	// east is deregistered: its copy runs on until its fence.
	if err := c.Delete(ctx, &allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}); err != nil {
		t.Fatal(err)
	}
	probe("east")
	for time.Until(fence) > 500*time.Millisecond {
		pass()
		if cl, at := routing(); cl != "east" || at != "1" {
			t.Fatalf("%s before the fence of its copy in east, ml/j was routed to %q attempt %q: it can run in two clusters", time.Until(fence).Round(time.Millisecond), cl, at)
		}
		if copyIn(t, ctx, workers["west"], "j") != nil {
			t.Fatal("a copy of ml/j in west while east's may still start")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Then it goes elsewhere, as from a lost worker.
	time.Sleep(time.Until(fence) + 100*time.Millisecond)
	pass()
	if cl, at := routing(); cl != "west" || at != "2" {
		t.Fatalf("after the fence, ml/j is routed to %q attempt %q: want west 2", cl, at)
	}
	if copyIn(t, ctx, workers["west"], "j") == nil {
		t.Error("ml/j routed to west has no copy there")
	}
}
