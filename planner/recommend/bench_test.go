package recommend

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

// benchFleet is teams teams in 5 cohorts sharing one flavor of 8-GPU nodes in
// racks of 16 and blocks of 8 racks, up to maxNodes; every team starts with an
// equal share of nodes nodes.
func benchFleet(b testing.TB, teams, nodes, maxNodes int) *schema.Config {
	b.Helper()
	var src strings.Builder
	fmt.Fprintf(&src, `package capacity
clusters: c: {provider: "kwok"}
pools: p: {cluster: "c", flavor: "h100", gpusPerNode: 8, nodes: {min: 0, max: %d}, topology: {levels: ["block", "rack", "host"], hostsPerRack: 16, racksPerBlock: 8}, price: {onDemandPerNodeHour: 88, committedPerNodeHour: 55, committedNodes: 100}}
tiers: production: {priority: 500}
tiers: research: {priority: 100, preemptible: true}
`, maxNodes)
	for c := range 5 {
		fmt.Fprintf(&src, "cohorts: \"c%d\": {}\n", c)
	}
	for t := range teams {
		fmt.Fprintf(&src, "teams: \"team-%d\": {cohort: \"c%d\", quota: h100: {nominal: %d}}\n", t, t%5, nodes*8/teams)
	}
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src.String())}})
	if cfg == nil {
		b.Fatalf("fixture does not load: %v", findings)
	}
	return cfg
}

// benchJobs is n jobs over teams teams arriving to keep about nodes nodes 90%
// busy: most single pods of 1-8 GPUs, a fifth gangs of 2-16 whole nodes (some
// requiring a rack), team sizes skewed.
func benchJobs(n, teams, nodes int) []workload.Spec {
	rng := rand.New(rand.NewPCG(3, 4))
	jobs := make([]workload.Spec, n)
	var t float64
	rate := 0.9 * float64(nodes*8) / (30 * 3000)
	for i := range jobs {
		t += rng.ExpFloat64() / rate
		team := min(int(rng.ExpFloat64()*float64(teams)/3), teams-1)
		j := workload.Spec{ID: fmt.Sprintf("s%d", i), Submit: t, Duration: 60 + rng.ExpFloat64()*3000,
			Team: fmt.Sprintf("team-%d", team), Tier: []string{"production", "research"}[rng.IntN(2)]}
		if rng.IntN(5) == 0 {
			j.Pods, j.GPUsPerPod = int64(2+rng.IntN(15)), 8
			if j.Pods <= 4 && rng.IntN(2) == 0 {
				j.Require = "rack"
			}
		} else {
			j.Pods, j.GPUsPerPod = 1, int64(1+rng.IntN(8))
		}
		jobs[i] = j
	}
	return jobs
}

// BenchmarkRecommend is issue 18's goal: a recommendation for 50 teams over
// 100,000 jobs (about 10,000 nodes at 90% load) under 60 s on 2 cores.
func BenchmarkRecommend(b *testing.B) {
	for _, size := range []struct{ teams, jobs, nodes int }{{50, 10_000, 1_000}, {50, 100_000, 10_000}} {
		b.Run(fmt.Sprintf("teams=%d/jobs=%d/nodes=%d", size.teams, size.jobs, size.nodes), func(b *testing.B) {
			cfg := benchFleet(b, size.teams, size.nodes, 2*size.nodes)
			jobs := benchJobs(size.jobs, size.teams, size.nodes)
			var res *Result
			for b.Loop() {
				var err error
				res, err = Run(Input{Config: cfg, Jobs: jobs, Targets: []Target{{WaitP95S: 1800}}, Parallel: 2, CurveSteps: 3})
				if err != nil {
					b.Fatal(err)
				}
			}
			var bounded int
			for _, t := range res.Teams {
				if t.Bound == BoundTarget {
					bounded++
				}
			}
			b.ReportMetric(float64(res.Replays), "replays")
			b.ReportMetric(float64(res.CoarseReplays), "grid-replays")
			b.ReportMetric(float64(bounded), "bounded")
			if !res.Converged {
				b.Errorf("did not converge in %d replays", res.Replays)
			}
			nodes := make([]int64, len(res.Teams))
			for i, t := range res.Teams {
				nodes[i] = t.NominalAfter / 8
			}
			b.Logf("the answer in nodes, by team: %v", nodes)
			b.Logf("%d replays (%d on a %gs grid), %d of %d teams bounded by the target, %s → %s a month",
				res.Replays, res.CoarseReplays, res.GridS, bounded, len(res.Teams), res.MonthlyUSDBefore, res.MonthlyUSDAfter)
		})
	}
}

// BenchmarkRecommendBurst is BenchmarkRecommend's 10,000 jobs with the pool
// planned 8 spare nodes above the quotas and declaring a burst of 8: the
// search plus the one replay that weighs those nodes against burst
// (BurstOption). option-s is that replay alone, timed after the search.
func BenchmarkRecommendBurst(b *testing.B) {
	cfg := benchFleet(b, 50, 1_000, 2_000)
	p := *cfg.Pools["p"]
	p.SpareNodes, p.Burst = 8, &schema.Burst{MaxNodes: 8, IdleAfter: 30 * time.Minute}
	cfg.Pools["p"] = &p
	jobs := benchJobs(10_000, 50, 1_000)
	in := Input{Config: cfg, Jobs: jobs, Targets: []Target{{WaitP95S: 1800}}, Parallel: 2, CurveSteps: 3}
	var res *Result
	for b.Loop() {
		var err error
		if res, err = Run(in); err != nil {
			b.Fatal(err)
		}
	}
	o := res.Pools[0].BurstOption
	if o == nil {
		b.Fatalf("pool %+v: no burst option", res.Pools[0])
	}
	w, err := newWorld(in, 0)
	if err != nil {
		b.Fatal(err)
	}
	q := make(vector, len(w.pairs))
	for i, t := range res.Teams {
		q[i] = t.NominalAfter
	}
	start := time.Now()
	if _, err := w.replayFewer(q, "p", o.FewerNodes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "option-s")
	b.ReportMetric(float64(res.Replays), "replays")
	b.Logf("%d replays, option %+v", res.Replays, *o)
}

// BenchmarkReplay is one replay of BenchmarkRecommend's 100,000 jobs at
// quotas of the size its answer has (each team's mean demand and a quarter,
// about 5,800 nodes in all): on the search's grid (most of a
// recommendation's replays) and exactly.
func BenchmarkReplay(b *testing.B) {
	cfg := benchFleet(b, 50, 10_000, 20_000)
	jobs := benchJobs(100_000, 50, 10_000)
	in := Input{Config: cfg, Jobs: jobs, Targets: []Target{{WaitP95S: 1800}}}
	for _, grid := range []float64{120, 0} {
		b.Run(fmt.Sprintf("grid=%gs", grid), func(b *testing.B) {
			w, err := newWorld(in, grid)
			if err != nil {
				b.Fatal(err)
			}
			sp := w.space()
			mean, _ := w.demandUnits()
			for i := range mean {
				mean[i] = min(sp.capU[i], mean[i]*5/4)
			}
			q := sp.gpus(mean)
			var out *outcome
			for b.Loop() {
				if out, err = w.replay(q); err != nil {
					b.Fatal(err)
				}
			}
			var pass int
			for _, ok := range out.pass {
				if ok {
					pass++
				}
			}
			b.ReportMetric(float64(pass), "teams-meeting-target")
		})
	}
}
