package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchFleet is n nodes of 8 GPUs, racks of 16 nodes, blocks of 8 racks.
func benchFleet(n int) []Node {
	out := make([]Node, n)
	for i := range n {
		out[i] = benchNode(i)
	}
	return out
}

// benchNode is the i-th node of benchFleet.
func benchNode(i int) Node {
	name := fmt.Sprintf("n%d", i)
	return Node{Name: NodeName(name), Flavor: "h100", GPUs: 8, Domains: []Domain{
		{Level: "block", Name: fmt.Sprintf("b%d", i/128)}, {Level: "rack", Name: fmt.Sprintf("r%d", i/16)}, {Level: "host", Name: name}}}
}

// benchWorld is 50 teams in one cohort sharing the fleet's GPUs, and 10,000
// pending gangs: most single pods of 1-8 GPUs, a third gangs of 2-16 whole nodes,
// some requiring a rack or a block.
func benchWorld(b *testing.B, nodes int) *Scheduler {
	b.Helper()
	return benchWorldWith(b, nodes, func(*Node, int) {})
}

// benchWorldWith is benchWorld with each node changed by node.
func benchWorldWith(b *testing.B, nodes int, node func(n *Node, i int)) *Scheduler {
	b.Helper()
	cfg := Config{Tiers: tiers, Cohorts: []Cohort{{Name: "org"}}}
	const teams = 50
	for i := range teams {
		cfg.Teams = append(cfg.Teams, Team{Name: TeamName(fmt.Sprintf("t%d", i)), Cohort: "org",
			Quota: map[Flavor]Quota{"h100": {Nominal: GPUs(nodes * 8 / teams)}}})
	}
	s, err := New(cfg, Options{ReserveAfter: -1})
	if err != nil {
		b.Fatal(err)
	}
	for i, n := range benchFleet(nodes) {
		node(&n, i)
		if err := s.AddNode(n); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10_000 {
		w := Workload{ID: WorkloadID(fmt.Sprintf("w%d", i)), Team: TeamName(fmt.Sprintf("t%d", rng.IntN(teams))),
			Tier: tiers[rng.IntN(3)].Name, Submitted: t0.Add(time.Duration(i) * time.Second)}
		if rng.IntN(3) == 0 {
			w.Pods, w.GPUsPerPod = int64(2+rng.IntN(15)), 8
			switch rng.IntN(3) {
			case 0:
				w.Require = "rack"
			case 1:
				w.Require = "block"
			}
		} else {
			w.Pods, w.GPUsPerPod = 1, GPUs(1+rng.IntN(8))
		}
		if err := s.Submit(w); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkCycle times one scheduling cycle over 10,000 pending gangs; ns/pod is
// the cost per pod placed.
func BenchmarkCycle(b *testing.B) {
	for _, nodes := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			benchCycles(b, func() *Scheduler { return benchWorld(b, nodes) })
		})
	}
}

// benchCycles times one cycle of each world made by world (not timed); ns/pod
// is the cost per pod placed.
func benchCycles(b *testing.B, world func() *Scheduler) {
	var pods int64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		s := world()
		b.StartTimer()
		start := time.Now()
		res := s.Cycle(at(20_000))
		elapsed += time.Since(start)
		for _, a := range res.Admitted {
			for _, p := range a.Pods {
				pods += p.Pods
			}
		}
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(pods), "ns/pod")
	b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(pods)/float64(b.N), "pods/cycle")
}
