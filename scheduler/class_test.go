package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// classRules admit the classes listed in their key ("c0,c3"); "*" admits all.
type classRules string

func (r classRules) Key() string { return string(r) }
func (r classRules) Admits(class string) bool {
	return r == "*" || slices.Contains(strings.Split(string(r), ","), class)
}

func withRules(w Workload, r string) Workload { w.Rules = classRules(r); return w }

func classed(nodes []Node, class func(i int) string) []Node {
	for i := range nodes {
		nodes[i].Class = class(i)
	}
	return nodes
}

// TestRulesKeepPodsToAdmittedClasses: a workload runs only on nodes of a class
// its rules admit; with none of the flavor, it waits NoMatchingNodes and is not
// considered for preemption; a node of a new class admitted later takes it.
func TestRulesKeepPodsToAdmittedClasses(t *testing.T) {
	nodes := classed(rack("n", "a", 4, 8, 0, 0), func(i int) string { return []string{"gpu", "gpu", "tainted", "spot"}[i] })
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, nodes, noReserve())
	f.submit(
		withRules(wl("plain", "a", "production", 2, 8, 0), "gpu"),
		withRules(wl("spot", "a", "production", 1, 4, 1), "spot"),
		withRules(wl("nowhere", "a", "production", 1, 1, 2), "gpu-big"),
		withRules(wl("toomany", "a", "production", 1, 8, 3), "gpu"),
	)
	f.cycle(0)
	if got, want := f.nodesOf("plain"), []NodeName{"n-0", "n-1"}; !slices.Equal(got, want) {
		t.Errorf("plain on %v, want %v", got, want)
	}
	if got, want := f.nodesOf("spot"), []NodeName{"n-3"}; !slices.Equal(got, want) {
		t.Errorf("spot on %v, want %v", got, want)
	}
	if got := f.reasonCode("nowhere"); got != ReasonNoMatchingNodes {
		t.Errorf("nowhere waits %q, want %q", got, ReasonNoMatchingNodes)
	}
	// Its nodes were free when the cycle began and went to plain, before it
	// in order (its view of rules is built at submission, so the cycle
	// knows what it had at the start, as for work without rules); the
	// tainted node is free but not its.
	if got := f.reasonCode("toomany"); got != ReasonBehindHigherTier {
		t.Errorf("toomany waits %q, want %q (the tainted node is free but not its)", got, ReasonBehindHigherTier)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := f.s.AddNode(Node{Name: "big", Flavor: "a", GPUs: 8, Class: "gpu-big"}); err != nil {
		t.Fatal(err)
	}
	f.cycle(1)
	if got := f.nodesOf("nowhere"); !slices.Equal(got, []NodeName{"big"}) {
		t.Errorf("after a node of its class came, nowhere on %v, want [big]", got)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// The views of rules follow the nodes: a node of a known class joins them.
	if err := f.s.AddNode(Node{Name: "n-4", Flavor: "a", GPUs: 8, Class: "gpu"}); err != nil {
		t.Fatal(err)
	}
	f.cycle(2)
	if got := f.nodesOf("toomany"); !slices.Equal(got, []NodeName{"n-4"}) {
		t.Errorf("toomany on %v, want [n-4]", got)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestRulesAgainstBruteForce: on small random fleets of random classes with
// random load, a gang with random rules is placed exactly when a brute-force
// search over the nodes of the classes its rules admit finds room, only on such
// nodes, and in the fitting rack that leaves the least free when it requires one.
func TestRulesAgainstBruteForce(t *testing.T) {
	classes := []string{"x", "y", "z"}
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 17))
		nodes := classed(rack("n", "a", 2+rng.IntN(6), GPUs(2+rng.IntN(7)), 1+rng.IntN(3), 0), func(int) string { return classes[rng.IntN(3)] })
		f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, nodes, noReserve())
		for i := range rng.IntN(8) {
			w := wl(fmt.Sprintf("fill%d", i), "a", "production", 1, GPUs(1+rng.IntN(4)), 0)
			if rng.IntN(2) == 0 {
				w = withRules(w, classes[rng.IntN(3)])
			}
			f.submit(w)
		}
		f.cycle(0)
		var admit []string
		for _, c := range classes {
			if rng.IntN(2) == 0 {
				admit = append(admit, c)
			}
		}
		rules := strings.Join(admit, ",")
		free := map[string][]GPUs{}
		var all []GPUs
		for _, n := range f.s.nodes {
			if !slices.Contains(admit, n.spec.Class) {
				continue
			}
			free[n.spec.Domains[0].Name] = append(free[n.spec.Domains[0].Name], n.free())
			all = append(all, n.free())
		}
		w := withRules(wl("g", "a", "production", int64(1+rng.IntN(4)), GPUs(1+rng.IntN(4)), 1), rules)
		if rng.IntN(2) == 0 {
			w.Require = "rack"
		}
		f.submit(w)
		res := f.cycle(1)
		var placed *Admission
		for i := range res.Admitted {
			if res.Admitted[i].Workload == "g" {
				placed = &res.Admitted[i]
			}
		}
		want, bestFree := bruteWant(w, all, free)
		if (placed != nil) != want {
			t.Fatalf("seed %d: placed = %v, brute force says %v (gang %dx%d, rules %q, require %q, free %v)", seed, placed != nil, want, w.Pods, w.GPUsPerPod, rules, w.Require, free)
		}
		if placed == nil {
			continue
		}
		for _, p := range placed.Pods {
			if c := f.s.nodeByName[p.Node].spec.Class; !slices.Contains(admit, c) {
				t.Fatalf("seed %d: placed on %s of class %s, rules admit %q", seed, p.Node, c, rules)
			}
		}
		if w.Require != "" {
			var sum GPUs
			for _, x := range free[placed.Domain.Name] {
				sum += x
			}
			if sum != bestFree {
				t.Errorf("seed %d: chose rack %s with %d free of admitted nodes, best fit has %d", seed, placed.Domain.Name, sum, bestFree)
			}
		}
		if err := f.s.checkInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestPropertiesWithRules is TestProperties with nodes in three classes and
// most workloads with rules admitting some of them.
func TestPropertiesWithRules(t *testing.T) {
	classes := []string{"x", "y", "z"}
	for seed := range 40 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 29))
			cfg, nodes := randomWorld(rng)
			nodes = classed(nodes, func(int) string { return classes[rng.IntN(3)] })
			runProperties(t, rng, cfg, nodes, func(w *Workload) {
				if rng.IntN(4) > 0 {
					w.Rules = randomRules(rng, classes)
				}
			})
		})
	}
}

// randomRules admits each of classes or not, at random.
func randomRules(rng *rand.Rand, classes []string) classRules {
	var admit []string
	for _, c := range classes {
		if rng.IntN(2) == 0 {
			admit = append(admit, c)
		}
	}
	return classRules(strings.Join(admit, ","))
}

// BenchmarkCycleClasses is BenchmarkCycle at 10,000 nodes in 20 classes (one
// per 500 nodes, so a class spans a few blocks): a quarter of the workloads
// have no rules, the others one of five rules that admit 1, 5, 10, 19 or 20
// classes. "first" is a cycle that builds the views of the rules; "warm" one
// whose views exist, as in every cycle after the first.
func BenchmarkCycleClasses(b *testing.B) {
	for _, warm := range []bool{false, true} {
		name := "first"
		if warm {
			name = "warm"
		}
		b.Run("nodes=10000/"+name, func(b *testing.B) { benchClasses(b, warm) })
	}
}

func benchClasses(b *testing.B, warm bool) {
	const nodes = 10_000
	rules := []string{"c3", "c0,c1,c2,c3,c4", "c0,c1,c2,c3,c4,c5,c6,c7,c8,c9", "", "*"}
	var all []string
	for i := range 20 {
		all = append(all, fmt.Sprintf("c%d", i))
	}
	rules[3] = strings.Join(all[:19], ",")
	benchCycles(b, func() *Scheduler {
		s := benchWorldWith(b, nodes, func(n *Node, i int) { n.Class = fmt.Sprintf("c%d", i/500) })
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range len(s.workloads) {
			if w := s.workloads[WorkloadID(fmt.Sprintf("w%d", i))]; rng.IntN(4) > 0 {
				w.spec.Rules = classRules(rules[rng.IntN(len(rules))])
				s.setShape(w)
				if warm {
					s.viewOf(w, w.cands[0])
				}
			}
		}
		return s
	})
}
