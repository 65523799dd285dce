package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkClassHits makes every workload a class's failure decides (it did not
// fit because one of its class with fewer pods did not) be tried for real
// as well: it must not fit, and its reason must be the one it was given.
func checkClassHits(t *testing.T, s *Scheduler, hits *int) {
	s.hooks().classHit = func(w *workload, r PendingReason) {
		*hits++
		var res Results
		if s.tryAdmit(w, &res) {
			t.Fatalf("%s (%d x %d GPUs, %s) fits, but one it can do no better than did not, so it was not tried", w.spec.ID, w.spec.Pods, w.spec.GPUsPerPod, w.tier.spec.Name)
		}
		if w.reason != r {
			t.Fatalf("%s: given reason %+v, tried %+v", w.spec.ID, r, w.reason)
		}
	}
}

// TestClassFailureIsABound: a workload is not tried in a cycle after one it
// can do no better than failed in it: of its class (team, flavors, pod size,
// topology, rules) with fewer pods, or of its team with no placement
// constraint and no more pods of no more GPUs; of a tier no lower,
// borrowOnly only if it is too. That must never keep it from a place it
// would have got. Random
// fleets and quota trees (with tiers of equal priority, one borrowOnly and
// one not), and a busy fleet of 300 nodes.
func TestClassFailureIsABound(t *testing.T) {
	hits := 0
	even := []Tier{{Name: "scavenger", Priority: 0, Preemptible: true}, {Name: "batch", Priority: 100}}
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 29))
		cfg, nodes := randomWorld(rng)
		cfg.Tiers = append(slices.Clone(cfg.Tiers), even...)
		f := newFx(t, cfg, nodes, Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute})
		checkClassHits(t, f.s, &hits)
		next := 0
		for step := range 120 {
			sec := step * 30
			for range rng.IntN(6) {
				w := randomWorkloadOf(rng, cfg, next, sec, even)
				f.submit(w)
				next++
			}
			if ids := f.running(); len(ids) > 0 && rng.IntN(2) == 0 {
				f.finish(ids[rng.IntN(len(ids))])
			}
			f.cycle(sec)
		}
	}
	random := hits
	b := newBusy(t, 300)
	// Every workload considered: most a class's failure decides are in runs
	// a walk would pass over (skip.go).
	b.s.hooks().noSkip = true
	checkClassHits(t, b.s, &hits)
	for range 60 {
		b.churn(t, 10)
		b.cycle(t)
	}
	if random < 50 || hits-random < 200 {
		t.Fatalf("%d class failures used on random fleets, %d on the busy one: too few to tell", random, hits-random)
	}
	t.Logf("%d class failures used on random fleets, %d on the busy one; each tried for real did not fit", random, hits-random)
}

// TestShapesAreForgotten: the shapes of workloads that finished are dropped.
func TestShapesAreForgotten(t *testing.T) {
	f := newFx(t, Config{Tiers: tiers, Teams: []Team{teamQ("a", "", 8, nil, nil)}}, rack("n", "h", 1, 8, 1, 0), Options{})
	for i := range 50 {
		f.submit(wl(fmt.Sprintf("w%d", i), "a", "research", int64(1+i%5), 8, 0))
	}
	f.cycle(1)
	if n := len(f.s.shapes); n != 6 {
		t.Fatalf("%d shapes and classes known for 5 shapes of one class (want 6)", n)
	}
	for i := range 50 {
		f.finish(WorkloadID(fmt.Sprintf("w%d", i)))
	}
	if n := len(f.s.shapes); n != 0 {
		t.Fatalf("%d shapes known after every workload finished", n)
	}
}

// TestReservedNodesBackMidCycle: a gang holding a reservation that is
// admitted in the middle of a cycle gives back what it does not use of its
// nodes; a workload of a shape that failed before that in the cycle is tried
// again, and fits there.
func TestReservedNodesBackMidCycle(t *testing.T) {
	nodes := []Node{{Name: "n0", Flavor: "a", GPUs: 16}, {Name: "n1", Flavor: "a", GPUs: 16}}
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, nodes, Options{ReserveAfter: 0})
	f.submit(wl("full", "a", "production", 1, 16, 0), wl("most", "a", "production", 1, 12, 0))
	f.cycle(0)
	// The gang fits on no node (4 GPUs free): it holds n1, the one with the most free.
	f.submit(wl("gang", "a", "production", 2, 4, 2))
	f.cycle(2)
	if r, _ := f.s.Reason("gang"); r.Code != ReasonWaitingForReservation {
		t.Fatalf("gang waits with %+v, want a reservation", r)
	}
	// n1 drains. In one cycle: "first" (ordered before the gang) finds n0
	// full and n1 held; the gang takes 8 of n1's 16 GPUs; "second", of the
	// same shape as "first", fits in the 8 left.
	f.finish("most")
	f.submit(wl("first", "a", "production", 1, 4, 1), wl("second", "a", "production", 1, 4, 3))
	res := f.cycle(4)
	var admitted []WorkloadID
	for _, a := range res.Admitted {
		admitted = append(admitted, a.Workload)
	}
	if want := []WorkloadID{"gang", "second"}; !slices.Equal(admitted, want) {
		t.Fatalf("admitted %v, want %v", admitted, want)
	}
}
