package scheduler

import (
	"slices"
	"testing"
)

// TestWholeDomainsStayWhole: work that names no topology level still goes to
// the fullest domain that fits, level by level, so a whole rack stays free for
// the rack-sized gang that comes next (issue 15, finding 4).
func TestWholeDomainsStayWhole(t *testing.T) {
	nodes := rack("n", "a", 12, 8, 3, 2) // blocks b0 (racks r0, r1) and b1 (r2, r3)
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, nodes, noReserve())
	// One node of rack r3 (block b1) runs; everything else is free.
	if err := f.s.Restore(wl("running", "a", "production", 1, 8, 0), []PodPlacement{{Node: "n-11", Pods: 1}}); err != nil {
		t.Fatal(err)
	}
	f.admitted["running"] = Admission{Workload: "running", Pods: []PodPlacement{{Node: "n-11", Pods: 1}}}
	f.submit(wl("small", "a", "production", 1, 8, 1), wl("half", "a", "production", 1, 4, 2))
	f.cycle(1)
	for _, id := range []WorkloadID{"small", "half"} {
		got := f.nodesOf(id)
		if len(got) != 1 || !slices.Contains([]NodeName{"n-9", "n-10"}, got[0]) {
			t.Errorf("%s on %v, want a node of the partly used rack r3 (n-9 or n-10)", id, got)
		}
	}
	// Block b0 is whole: a gang of a whole block fits, then one of a rack.
	f.submit(withRequire(wl("block", "a", "production", 6, 8, 3), "block"), withRequire(wl("rack", "a", "production", 3, 8, 4), "rack"))
	f.cycle(2)
	for _, id := range []WorkloadID{"block", "rack"} {
		if _, ok := f.admitted[id]; !ok {
			r, _ := f.s.Reason(id)
			t.Errorf("%s not placed: %s", id, r)
		}
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
