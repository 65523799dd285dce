package scheduler

import (
	"fmt"
	"math/rand/v2"
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

// TestCandidateHomeIsItsPodsDomain: the domain a candidate carries for a
// depth of its flavor's own view (home, which domainShort reads in place of
// the workload's nodes) is the one domain every pod of the workload runs in
// at the level of that depth, and none where its pods span several.
func TestCandidateHomeIsItsPodsDomain(t *testing.T) {
	b := newBusy(t, 200)
	one, several := 0, 0
	for step := range 30 {
		b.churn(t, 10)
		b.cycle(t)
		for _, w := range b.s.workloads {
			if w.state != stateAdmitted || len(w.placements) == 0 {
				continue
			}
			f := w.flavor
			if f.view.DepthsVary {
				t.Fatalf("the busy fleet names one level per depth, but its view says two share one")
			}
			c := candidateOf(w, false)
			for _, li := range f.view.Levels {
				if li.Depth >= len(c.home) {
					continue
				}
				want := int32(-1)
				for j, p := range w.placements {
					g := domainOf(p.node, true, li)
					k := int32(-1)
					if g != nil {
						k = g.Num
					}
					if j == 0 {
						want = k
					} else if k != want {
						want = -1
					}
				}
				if got := c.home[li.Depth]; got != want {
					t.Fatalf("step %d: %s on %d nodes: home at %s is %d, want %d", step, w.spec.ID, len(w.placements), li.Name, got, want)
				}
				if want >= 0 {
					one++
				} else {
					several++
				}
			}
		}
	}
	if one < 100 || several < 10 {
		t.Fatalf("checked %d homes of one domain and %d of several: too few to tell", one, several)
	}
	t.Logf("%d homes of one domain, %d of several", one, several)
}

// TestDomainShortWhereDepthsVary: where nodes of a flavor name a level at
// different depths (racks in blocks and racks alone), the view says so
// (DepthsVary) and domainShort, which then reads the candidates' nodes and
// not their homes, finds what lacks in the best domain as a count of every
// candidate's pods in each domain finds it; and domainPodShort the whole
// pods it lacks, as a count node by node finds them (some nodes hold work
// no search takes: a domain may have the GPUs but not the pods).
func TestDomainShortWhereDepthsVary(t *testing.T) {
	var nodes []Node
	for i := range 8 {
		nodes = append(nodes, Node{Name: NodeName(fmt.Sprintf("a%d", i)), Flavor: "a", GPUs: 8,
			Domains: []Domain{{Level: "block", Name: fmt.Sprintf("b%d", i/4)}, {Level: "rack", Name: fmt.Sprintf("r%d", i/2)}}})
	}
	for i := range 4 {
		nodes = append(nodes, Node{Name: NodeName(fmt.Sprintf("c%d", i)), Flavor: "a", GPUs: 8,
			Domains: []Domain{{Level: "rack", Name: fmt.Sprintf("r%d", 10+i/2)}}})
	}
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{teamQ("lend", "org", 48, nil, nil), teamQ("want", "org", 48, nil, nil)}}
	f := newFx(t, cfg, nodes, noReserve())
	fl := f.s.flavorList[0]
	if !fl.view.DepthsVary {
		t.Fatal("racks at depth 1 and at depth 0, but the view does not say depths vary")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// Work no search may take, on nodes the candidates share: a domain
	// can have the GPUs and not the whole nodes.
	for i := range 8 {
		f.submit(wl(fmt.Sprintf("k%d", i), "lend", "production", 1, 5, 0))
	}
	f.cycle(0)
	for i := range 40 {
		f.submit(wl(fmt.Sprintf("o%d", i), "lend", "opportunist", 1, GPUs(1+rng.IntN(8)), 0))
	}
	f.cycle(1)
	checked, short, fragmented := 0, 0, 0
	for _, level := range []string{"block", "rack"} {
		li := fl.view.Levels[level]
		for pods := int64(1); pods <= 8; pods++ {
			id := fmt.Sprintf("%s%d", level, pods)
			f.submit(withRequire(wl(id, "want", "production", pods, 8, 2), level))
			w := f.s.workloads[WorkloadID(id)]
			vs, ok := f.s.candidates(w, fl, false)
			if !ok {
				continue
			}
			cands := vs.all()
			best := GPUs(0)
			for _, d := range li.Doms {
				room := d.G.Free
				for _, c := range cands {
					for _, p := range c.w.placements {
						if domainOf(p.node, true, li) == d.G {
							room += p.pods * c.w.gpp
						}
					}
				}
				best = max(best, room)
			}
			want := max(0, w.GPUs()-best)
			if got := max(0, f.s.domainShort(fl, fl.view, level, w.GPUs(), vs)); got != want {
				t.Fatalf("%s: %d GPUs in one %s lack %d with %d candidates evicted, domainShort says %d", id, w.GPUs(), level, want, len(cands), got)
			}
			// In whole pods: node by node, what is free and what its
			// candidates hold, in pods of 8.
			var most int64
			for _, d := range li.Doms {
				var n int64
				for _, nd := range f.s.nodes {
					if domainOf(nd, true, li) != d.G {
						continue
					}
					free := nd.capacity - nd.used
					for _, c := range cands {
						for _, p := range c.w.placements {
							if p.node == nd {
								free += p.pods * c.w.gpp
							}
						}
					}
					n += free / 8
				}
				most = max(most, n)
			}
			wantPods := max(0, pods-most)
			if got := max(0, f.s.domainPodShort(fl, fl.view, level, 8, pods, vs)); got != wantPods {
				t.Fatalf("%s: %d pods of 8 GPUs in one %s lack %d with %d candidates evicted, domainPodShort says %d", id, pods, level, wantPods, len(cands), got)
			}
			checked++
			if want > 0 {
				short++
			}
			if want == 0 && wantPods > 0 {
				fragmented++
			}
		}
	}
	if checked < 12 || short < 4 || fragmented < 1 {
		t.Fatalf("checked %d searches, %d short, %d short of whole pods beyond the GPUs: too few to tell", checked, short, fragmented)
	}
}
