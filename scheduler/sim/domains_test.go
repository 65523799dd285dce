package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// placer is a policy that admits each workload, once submitted, on the
// placements it is given.
type placer struct {
	inert
	at        map[scheduler.WorkloadID][]scheduler.PodPlacement
	submitted []scheduler.WorkloadID
}

func (p *placer) Submit(w scheduler.Workload) error {
	p.submitted = append(p.submitted, w.ID)
	return nil
}
func (p *placer) Cycle(time.Time) scheduler.Results {
	var res scheduler.Results
	for _, id := range p.submitted {
		res.Admitted = append(res.Admitted, scheduler.Admission{Workload: id, Pods: p.at[id]})
	}
	p.submitted = nil
	return res
}

// TestJobReportNamesTheDomainsItsNodesShare: a job's report names its nodes
// once each, sorted, and the domains, level by level, that all of them
// share; a required level they do not share is a topology violation. Pods
// of 4 GPUs, on nodes of 8.
func TestJobReportNamesTheDomainsItsNodesShare(t *testing.T) {
	dom := func(zone, rack string) []scheduler.Domain {
		return []scheduler.Domain{{Level: "zone", Name: zone}, {Level: "rack", Name: rack}}
	}
	nodes := []scheduler.Node{
		{Name: "n-0", Flavor: "a", GPUs: 8, Domains: dom("z0", "r0")},
		{Name: "n-1", Flavor: "a", GPUs: 8, Domains: dom("z0", "r0")},
		{Name: "n-2", Flavor: "a", GPUs: 8, Domains: dom("z0", "r1")},
		{Name: "n-3", Flavor: "a", GPUs: 8, Domains: []scheduler.Domain{{Level: "rack", Name: "r1"}}},
	}
	pl := func(names ...scheduler.NodeName) []scheduler.PodPlacement {
		var out []scheduler.PodPlacement
		for _, n := range names {
			out = append(out, scheduler.PodPlacement{Node: n, Pods: 1})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		on        []scheduler.NodeName
		require   string
		nodes     []string
		domain    map[string]string
		violation bool
	}{
		{name: "one rack", on: []scheduler.NodeName{"n-1", "n-0"}, require: "rack", nodes: []string{"n-0", "n-1"}, domain: map[string]string{"zone": "z0", "rack": "r0"}},
		{name: "two racks of a zone", on: []scheduler.NodeName{"n-1", "n-2"}, require: "zone", nodes: []string{"n-1", "n-2"}, domain: map[string]string{"zone": "z0"}},
		{name: "two racks, rack required", on: []scheduler.NodeName{"n-0", "n-2"}, require: "rack", nodes: []string{"n-0", "n-2"}, domain: map[string]string{"zone": "z0"}, violation: true},
		{name: "a level one node lacks", on: []scheduler.NodeName{"n-2", "n-3"}, require: "zone", nodes: []string{"n-2", "n-3"}, domain: map[string]string{"rack": "r1"}, violation: true},
		{name: "one node alone", on: []scheduler.NodeName{"n-3"}, nodes: []string{"n-3"}, domain: map[string]string{"rack": "r1"}},
		{name: "one node, placed twice", on: []scheduler.NodeName{"n-3", "n-3"}, nodes: []string{"n-3"}, domain: map[string]string{"rack": "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &placer{at: map[scheduler.WorkloadID][]scheduler.PodPlacement{"g": pl(tc.on...)}}
			in := Input{Nodes: nodes, Jobs: []workload.Spec{{ID: "g", Duration: 10, Team: "t", Tier: "p", Pods: int64(len(tc.on)), GPUsPerPod: 4, Require: tc.require}}}
			rep, err := Run(p, in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			j := rep.Jobs[0]
			if diff := cmp.Diff(tc.nodes, j.Nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.domain, j.Domain); diff != "" {
				t.Errorf("domain (-want +got):\n%s", diff)
			}
			if got := rep.Summary.TopologyViolations > 0; got != tc.violation {
				t.Errorf("topology violations %d, want some: %v", rep.Summary.TopologyViolations, tc.violation)
			}
			if rep.Summary.GangViolations != 0 {
				t.Errorf("%d gang violations", rep.Summary.GangViolations)
			}
		})
	}
}
