package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// TestEditedRoutingStaysTheHubs: whoever submitted a Job the hub routed
// edits its routing annotations (another cluster, a cluster that is not
// registered, a name of 100 KiB, a placement on another cluster's node, of
// garbage, of 90 KiB, a later attempt, here or elsewhere, none at all): the
// job keeps running where the hub put it — its copy untouched, no copy
// elsewhere — still counted on its nodes and in its team's quota (a job of
// the team that needs that quota still waits), the edit is written back and
// an event on the Job says so, and no metric is labelled with what was
// written. The same for the hub that routed it and for a hub that has just
// become the leader (it reads the routing back from the copy).
func TestEditedRoutingStaysTheHubs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}, "west": {price: "30", nodes: 2}}, 16, time.Minute)
	c := hubEnv.Client
	rec := events.NewFakeRecorder(1000)
	reg := prometheus.NewRegistry()
	routing := directRouter(t, ctx, hubEnv, c, "east", "west")
	routing.Recorder, routing.Metrics = rec, hub.NewMetrics(reg)
	get := func(name string) *batchv1.Job {
		t.Helper()
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	pass := func(r *hub.Router) {
		t.Helper()
		for range 3 {
			if err := r.Pass(ctx); err != nil {
				t.Errorf("pass: %v", err)
			}
		}
	}
	// ml's quota is 16 GPUs: run and other take it, more waits.
	for _, name := range []string{"run", "other", "more"} {
		if err := c.Create(ctx, gpuJob(name, 1, 8, nil, nil)); err != nil {
			t.Fatal(err)
		}
		pass(routing)
	}
	cp := copyIn(t, ctx, workers["east"], "run")
	if cp == nil {
		t.Fatalf("ml/run not routed to east: %v", get("run").Annotations)
	}
	hubs := get("run").Annotations
	if p := get("more").Annotations[hub.AnnotationPending]; !strings.Contains(p, "OverQuota") {
		t.Fatalf("ml/more: pending %q, want OverQuota", p)
	}

	huge := strings.Repeat("x", 100<<10)
	for _, edit := range []struct {
		name string
		set  map[string]string // "" removes
	}{
		{"another cluster", map[string]string{hub.AnnotationCluster: "west"}},
		{"a cluster not registered", map[string]string{hub.AnnotationCluster: "no-such-cluster"}},
		{"a huge name", map[string]string{hub.AnnotationCluster: huge}},
		{"a placement on another cluster", map[string]string{hub.AnnotationPlacement: "west-0=1"}},
		{"a placement of garbage", map[string]string{hub.AnnotationPlacement: "=,x=-1,east-0=zz,,="}},
		{"a huge placement", map[string]string{hub.AnnotationPlacement: strings.Repeat("east-1=1,", 10_000)}},
		{"a later attempt", map[string]string{hub.AnnotationAttempt: "7"}},
		{"a later attempt elsewhere", map[string]string{hub.AnnotationCluster: "west", hub.AnnotationAttempt: "2", hub.AnnotationPlacement: "west-1=1"}},
		{"no routing", map[string]string{hub.AnnotationCluster: "", hub.AnnotationAttempt: "", hub.AnnotationPlacement: ""}},
	} {
		for _, who := range []string{"the hub that routed it", "a hub just become the leader"} {
			t.Run(edit.name+", "+who, func(t *testing.T) {
				r, reg := routing, reg
				if who != "the hub that routed it" {
					r, reg = directRouter(t, ctx, hubEnv, c, "east", "west"), prometheus.NewRegistry()
					r.Recorder, r.Metrics = rec, hub.NewMetrics(reg)
				}
				j := get("run")
				patch := client.MergeFrom(j.DeepCopy())
				for k, v := range edit.set {
					if v == "" {
						delete(j.Annotations, k)
					} else {
						j.Annotations[k] = v
					}
				}
				if err := c.Patch(ctx, j, patch); err != nil {
					t.Fatal(err)
				}
				pass(r)

				now := copyIn(t, ctx, workers["east"], "run")
				if now == nil || now.UID != cp.UID || now.Annotations[hub.AnnotationAttempt] != "1" {
					t.Errorf("ml/run's copy in east was deleted or made again (%v): the edit restarted the job", now != nil)
				}
				for _, name := range []string{"run", "more"} {
					if copyIn(t, ctx, workers["west"], name) != nil {
						t.Errorf("a copy of ml/%s in west", name)
					}
				}
				// Counted on its nodes and in ml's quota: more still waits.
				if copyIn(t, ctx, workers["east"], "more") != nil || get("more").Annotations[hub.AnnotationCluster] != "" {
					t.Errorf("ml/more was routed (%v) beyond ml's quota: ml/run is no longer counted", get("more").Annotations)
				}
				got := get("run").Annotations
				for _, k := range []string{hub.AnnotationCluster, hub.AnnotationAttempt, hub.AnnotationPlacement} {
					if got[k] != hubs[k] {
						t.Errorf("%s: %.80q, want the hub's %q written back", k, got[k], hubs[k])
					}
				}
				said := false
				for len(rec.Events) > 0 {
					e := <-rec.Events
					said = said || strings.Contains(e, hub.ReasonRoutingEdited) && strings.Contains(e, "stays routed to east (attempt 1)")
					if len(e) > 1024 || strings.Contains(e, huge[:2048]) {
						t.Errorf("event of %d bytes: %.200q", len(e), e)
					}
				}
				// What reads as the router's own older write (no routing at
				// all) is written back without a word.
				if !said && !(edit.name == "no routing" && r == routing) {
					t.Error("no event says the edit was undone")
				}
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, mf := range mfs {
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							if l.GetName() == "cluster" && l.GetValue() != "east" && l.GetValue() != "west" {
								t.Errorf("%s labelled cluster=%.80q", mf.GetName(), l.GetValue())
							}
						}
					}
				}
			})
		}
	}
	if t.Failed() {
		return
	}
	// The edits undone, the job completes where it runs: the hub mirrors it.
	ecp := copyIn(t, ctx, workers["east"], "run")
	ecp.Status.Active = 1
	if err := workers["east"].env.Client.Status().Update(ctx, ecp); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "status mirrored", func() error {
		if err := routing.Pass(ctx); err != nil {
			return err
		}
		if a := get("run").Status.Active; a != 1 {
			return fmt.Errorf("active %d", a)
		}
		return nil
	})
}
