package scheduler

import (
	"fmt"
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

// TestDomainNumberIsTheNodesDomain: the number a search reads off a node for
// its domain at a level (the node's own copy, checked against the level) is
// that of the domain domainOf finds, on every view and level, where nodes of
// one flavor name different levels at the same depth or skip one.
func TestDomainNumberIsTheNodesDomain(t *testing.T) {
	var nodes []Node
	add := func(name string, class string, doms ...Domain) {
		nodes = append(nodes, Node{Name: NodeName(name), Flavor: "a", GPUs: 8, Class: class, Domains: doms})
	}
	for i := range 4 {
		add(fmt.Sprintf("a%d", i), "x", Domain{Level: "block", Name: "b0"}, Domain{Level: "rack", Name: fmt.Sprintf("r%d", i/2)},
			Domain{Level: "host", Name: fmt.Sprintf("a%d", i)})
	}
	add("b0", "y", Domain{Level: "rack", Name: "r9"})
	add("b1", "y", Domain{Level: "rack", Name: "r9"})
	add("c0", "x", Domain{Level: "block", Name: "b1"}, Domain{Level: "pod", Name: "p0"})
	add("c1", "y", Domain{Level: "block", Name: "b1"}, Domain{Level: "pod", Name: "p1"}, Domain{Level: "rack", Name: "r5"})
	add("d0", "y")
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, nodes, noReserve())
	// A workload whose placement rules admit one class makes a view of it.
	f.submit(withRules(wl("rules", "a", "production", 1, 8, 0), "y"))
	f.cycle(1)
	if _, ok := f.admitted["rules"]; !ok {
		t.Fatal("the workload with placement rules was not admitted")
	}
	checked := 0
	for _, fs := range f.s.flavorList {
		fs.eachView(func(v *view) {
			own := v == fs.view
			for _, li := range v.Levels {
				for _, n := range fs.nodes {
					want := int32(-1)
					if g := domainOf(n, own, li); g != nil {
						want = g.Num
					}
					if got := domainNum(li, n, own); got != want {
						t.Errorf("node %s, level %s (own view %v): domain number %d, want %d", n.spec.Name, li.Name, own, got, want)
					}
					checked++
				}
			}
		})
	}
	// Four levels on the flavor's view, three (rack, block, pod) on the view
	// of class y.
	if checked != 7*len(nodes) {
		t.Fatalf("checked %d node levels, want %d (two views)", checked, 7*len(nodes))
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
