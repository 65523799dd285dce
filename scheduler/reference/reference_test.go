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
