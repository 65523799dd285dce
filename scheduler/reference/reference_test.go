package reference

import (
	"testing"
	"time"

	"github.com/allot-dev/allot/scheduler"
)

type onlyClass string

func (o onlyClass) Key() string              { return string(o) }
func (o onlyClass) Admits(class string) bool { return class == string(o) }

// TestRulesHonoured: the reference places a job only on nodes of a class its
// rules admit, as the core does.
func TestRulesHonoured(t *testing.T) {
	p := New([]scheduler.Node{{Name: "x", Flavor: "a", GPUs: 8, Class: "plain"}, {Name: "y", Flavor: "a", GPUs: 8, Class: "ib"}})
	for _, w := range []scheduler.Workload{
		{ID: "ib", Pods: 1, GPUsPerPod: 8, Rules: onlyClass("ib")},
		{ID: "ib2", Pods: 1, GPUsPerPod: 8, Rules: onlyClass("ib"), Submitted: time.Unix(1, 0)},
	} {
		if err := p.Submit(w); err != nil {
			t.Fatal(err)
		}
	}
	res := p.Cycle(time.Unix(2, 0))
	if len(res.Admitted) != 1 || res.Admitted[0].Workload != "ib" || res.Admitted[0].Pods[0].Node != "y" {
		t.Fatalf("admitted %+v, want only ib, on y (x is of another class)", res.Admitted)
	}
}

// TestOneClusterPerGang: the reference never spans clusters and honours a
// pinned cluster.
func TestOneClusterPerGang(t *testing.T) {
	p := New([]scheduler.Node{
		{Name: "e0", Flavor: "a", GPUs: 8, Cluster: "east"}, {Name: "w0", Flavor: "a", GPUs: 8, Cluster: "west"},
		{Name: "w1", Flavor: "a", GPUs: 8, Cluster: "west"}, {Name: "e1", Flavor: "a", GPUs: 8, Cluster: "east"},
	})
	for _, w := range []scheduler.Workload{
		{ID: "wide", Pods: 3, GPUsPerPod: 8},
		{ID: "pair", Pods: 2, GPUsPerPod: 8, Submitted: time.Unix(1, 0)},
		{ID: "pinned", Pods: 1, GPUsPerPod: 8, Cluster: "west", Submitted: time.Unix(2, 0)},
	} {
		if err := p.Submit(w); err != nil {
			t.Fatal(err)
		}
	}
	res := p.Cycle(time.Unix(3, 0))
	got := map[scheduler.WorkloadID][]scheduler.NodeName{}
	for _, a := range res.Admitted {
		for _, pl := range a.Pods {
			got[a.Workload] = append(got[a.Workload], pl.Node)
		}
	}
	if len(got["wide"]) != 0 || len(got["pair"]) != 2 || got["pair"][0] != "e0" || got["pair"][1] != "e1" || len(got["pinned"]) != 1 || got["pinned"][0][0] != 'w' {
		t.Fatalf("placed %v: want wide nowhere (3 nodes span clusters), pair on e0,e1, pinned in west", got)
	}
}
