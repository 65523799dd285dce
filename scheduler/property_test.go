package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomWorld builds a random fleet (two flavors, racks of 2-4 hosts, nodes of 4
// or 8 GPUs) and a random quota tree (nested cohorts, limits set or not).
func randomWorld(rng *rand.Rand) (Config, []Node) {
	var nodes []Node
	for _, f := range []Flavor{"a", "b"} {
		per := 2 + rng.IntN(3)
		n := 2 + rng.IntN(10)
		gpus := GPUs(4 + 4*rng.IntN(2))
		for i := range n {
			name := NodeName(fmt.Sprintf("%s-%d", f, i))
			nodes = append(nodes, Node{Name: name, Flavor: f, GPUs: gpus, Domains: []Domain{
				{Level: "rack", Name: fmt.Sprintf("%s-r%d", f, i/per)}, {Level: "host", Name: string(name)}}})
		}
	}
	cfg := Config{Tiers: tiers, Cohorts: []Cohort{{Name: "root"}, {Name: "sub", Parent: "root"}}}
	for i := range 2 + rng.IntN(4) {
		t := Team{Name: TeamName(fmt.Sprintf("t%d", i)), Weight: float64(1 + rng.IntN(3)), Quota: map[Flavor]Quota{}}
		switch rng.IntN(3) {
		case 0:
			t.Cohort = "root"
		case 1:
			t.Cohort = "sub"
		}
		for _, f := range []Flavor{"a", "b"} {
			if rng.IntN(4) == 0 {
				continue
			}
			q := Quota{Nominal: GPUs(rng.IntN(5) * 8)}
			if rng.IntN(2) == 0 {
				q.BorrowingLimit = lim(GPUs(rng.IntN(3) * 8))
			}
			if rng.IntN(2) == 0 {
				q.LendingLimit = lim(GPUs(rng.IntN(3) * 4))
			}
			t.Quota[f] = q
		}
		cfg.Teams = append(cfg.Teams, t)
	}
	return cfg, nodes
}

func randomWorkload(rng *rand.Rand, cfg Config, id int, sec int) Workload {
	t := cfg.Teams[rng.IntN(len(cfg.Teams))]
	w := wl(fmt.Sprintf("w%d", id), string(t.Name), string(tiers[rng.IntN(len(tiers))].Name), int64(1+rng.IntN(4)), GPUs([]int{1, 2, 4, 8}[rng.IntN(4)]), sec)
	switch rng.IntN(6) {
	case 0:
		w.Require = "rack"
	case 1:
		w.Require = "host"
	case 2:
		w.Prefer = "rack"
	}
	if rng.IntN(4) == 0 {
		w.Flavors = []Flavor{[]Flavor{"a", "b"}[rng.IntN(2)]}
	}
	return w
}

// randomWorkloadOf is randomWorkload, of one of the tiers extra a third of
// the time.
func randomWorkloadOf(rng *rand.Rand, cfg Config, id int, sec int, extra []Tier) Workload {
	w := randomWorkload(rng, cfg, id, sec)
	if rng.IntN(3) == 0 {
		w.Tier = extra[rng.IntN(len(extra))].Name
	}
	return w
}

// TestProperties drives random fleets and workloads through submissions,
// completions and node faults, checking after every cycle that no node is over
// committed, no gang is partial, no team exceeds nominal + borrowing limit, no
// lender is pushed below what its lending limit guarantees, and required
// topology holds.
func TestProperties(t *testing.T) {
	for seed := range 60 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			cfg, nodes := randomWorld(rng)
			runProperties(t, rng, cfg, nodes, func(*Workload) {})
		})
	}
}

// runProperties drives cfg and nodes through 150 random steps, each workload
// changed by tweak, checking the invariants after every cycle.
func runProperties(t *testing.T, rng *rand.Rand, cfg Config, nodes []Node, tweak func(*Workload)) {
	opts := Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute}
	if rng.IntN(2) == 0 {
		opts.WalkDepth, opts.FullWalkEvery = 1+rng.IntN(4), time.Duration(rng.IntN(5))*time.Minute
	}
	f := newFx(t, cfg, nodes, opts)
	next := 0
	for step := range 150 {
		sec := step * 30
		for range rng.IntN(4) {
			w := randomWorkload(rng, cfg, next, sec)
			tweak(&w)
			f.submit(w)
			next++
		}
		if ids := f.running(); len(ids) > 0 && rng.IntN(2) == 0 {
			f.finish(ids[rng.IntN(len(ids))])
		}
		if rng.IntN(10) == 0 {
			n := nodes[rng.IntN(len(nodes))]
			evicted, err := f.s.SetNodeHealth(n.Name, rng.IntN(2) == 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range evicted {
				delete(f.admitted, id)
			}
		}
		res := f.cycle(sec)
		for _, p := range res.Preempted {
			if _, ok := f.s.workloads[p.Victim]; !ok {
				t.Fatalf("step %d: preempted unknown %s", step, p.Victim)
			}
		}
		if err := f.s.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
