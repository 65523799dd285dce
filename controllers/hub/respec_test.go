package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/hub"
)

// TestEditedJobCountsAsItRuns: whoever submitted a Job the hub routed edits
// it afterwards, where the API server lets them: its template's team label
// (a suspended Job that has not started may change it) to another team's,
// then its parallelism (always mutable) from 2 to 1. Its copy in the worker
// runs as routed, 2 pods of 8 GPUs: the hub keeps counting it so, in its
// namespace's team, ml, whose 16 GPUs it takes — ml's next job waits
// (OverQuota) and has no copy.
func TestEditedJobCountsAsItRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}}, 16, time.Minute)
	c := hubEnv.Client
	routing := directRouter(t, ctx, hubEnv, c, "east")
	pass := func() {
		t.Helper()
		for range 2 {
			if err := routing.Pass(ctx); err != nil {
				t.Errorf("pass: %v", err)
			}
		}
	}
	wide := gpuJob("wide", 2, 8, nil, nil)
	wide.Spec.Suspend = ptr.To(true)
	if err := c.Create(ctx, wide); err != nil {
		t.Fatal(err)
	}
	pass()
	if cp := copyIn(t, ctx, workers["east"], "wide"); cp == nil || *cp.Spec.Parallelism != 2 {
		t.Fatalf("ml/wide not routed to east as 2 pods: %+v", cp)
	}
	if err := c.Create(ctx, gpuJob("more", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []struct {
		name string
		f    func(*batchv1.Job)
	}{
		{"team label", func(j *batchv1.Job) { j.Spec.Template.Labels[contract.LabelTeam] = "other" }},
		{"parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](1) }},
	} {
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "wide"}, &j); err != nil {
			t.Fatal(err)
		}
		edit.f(&j)
		if err := c.Update(ctx, &j); err != nil {
			t.Fatalf("%s: the API server refused the edit: %v", edit.name, err)
		}
		pass()
		if cp := copyIn(t, ctx, workers["east"], "more"); cp != nil {
			t.Errorf("after the %s edit: ml/more routed to east past ml's 16 GPUs", edit.name)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "more"}, &j); err != nil {
			t.Fatal(err)
		}
		if p := j.Annotations[hub.AnnotationPending]; !strings.Contains(p, "OverQuota") {
			t.Errorf("after the %s edit: ml/more pending %q, want OverQuota", edit.name, p)
		}
	}
}
