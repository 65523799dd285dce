package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// synthetic is n jobs over 50 teams: Poisson arrivals sized to keep the fleet
// busy, most jobs single pods of 1-8 GPUs, a fifth gangs of 2-16 whole nodes.
func synthetic(n, nodes int) []workload.Spec {
	rng := rand.New(rand.NewPCG(3, 4))
	jobs := make([]workload.Spec, n)
	var t float64
	// Mean demand per job is about 30 GPUs x 3,000 s; arrivals keep ~90% load.
	rate := 0.9 * float64(nodes*8) / (30 * 3000)
	for i := range jobs {
		t += rng.ExpFloat64() / rate
		j := workload.Spec{ID: fmt.Sprintf("s%d", i), Submit: t, Duration: 60 + rng.ExpFloat64()*3000,
			Team: fmt.Sprintf("team-%d", rng.IntN(50)), Tier: []string{"production", "research"}[rng.IntN(2)]}
		if rng.IntN(5) == 0 {
			j.Pods, j.GPUsPerPod = int64(2+rng.IntN(15)), 8
			switch {
			case j.Pods <= 4 && rng.IntN(2) == 0:
				j.Require = "rack"
			case rng.IntN(2) == 0:
				j.Prefer = "block"
			}
		} else {
			j.Pods, j.GPUsPerPod = 1, int64(1+rng.IntN(8))
		}
		jobs[i] = j
	}
	return jobs
}

func benchSim(b *testing.B, q scheduler.Config, nodes []scheduler.Node, jobs []workload.Spec) {
	benchSimWith(b, q, nodes, jobs, scheduler.DefaultOptions())
}

func benchSimWith(b *testing.B, q scheduler.Config, nodes []scheduler.Node, jobs []workload.Spec, opts scheduler.Options) {
	var rep *Report
	var peak uint64
	for b.Loop() {
		core, err := NewCore(q, nodes, opts)
		if err != nil {
			b.Fatal(err)
		}
		if rep, err = Run(core, Input{Nodes: nodes, Jobs: jobs, Quota: q}, Options{}); err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.Sys)
	}
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 || s.Completed != len(jobs) {
		b.Fatalf("summary %+v", s)
	}
	b.ReportMetric(float64(peak)/(1<<20), "MB-sys")
	b.ReportMetric(rep.Summary.GPUUtilization, "util")
	b.ReportMetric(rep.Summary.WaitP95S, "wait-p95-s")
}

// BenchmarkSimHelios replays the full Helios trace (10,796 GPU jobs of the 15,000)
// on 128 nodes shared by 8 teams; it needs ../shared.
func BenchmarkSimHelios(b *testing.B) {
	f, full := trace("helios/helios_15k_users.csv")
	if !full {
		b.Skip("the full Helios trace is in ../shared/traces, not beside this clone")
	}
	jobs := readJobs(b, f, 0)
	q := sharedCohort(8, "h", 128)
	AssignToConfig(jobs, q)
	benchSim(b, q, pods("h", 128), jobs)
}

// BenchmarkSimSynthetic replays 100,000 synthetic jobs on 10,000 nodes.
func BenchmarkSimSynthetic(b *testing.B) {
	const nodes = 10_000
	q := sharedCohort(50, "h", nodes*8/50)
	benchSim(b, q, pods("h", nodes), synthetic(100_000, nodes))
}

// busyJobs is ten jobs per node over 50 teams offered at 1.3x the fleet: a
// third gangs of 2-16 whole nodes, three tiers (the third borrowOnly), arrivals
// skewed towards a few teams.
func busyJobs(nodes int) []workload.Spec { return offered(nodes, 5, "b", 1.3, 3000) }

// BenchmarkSimBusy replays a busy synthetic workload (busyJobs) at 625, 1,250
// and 2,500 nodes: 4x the fleet and the jobs should cost at most 8x the time.
// The depth=256 runs bound the walks after a release (Options.WalkDepth).
func BenchmarkSimBusy(b *testing.B) {
	for _, depth := range []int{0, 256} {
		for _, nodes := range []int{625, 1_250, 2_500} {
			name := fmt.Sprintf("nodes=%d", nodes)
			if depth > 0 {
				name = fmt.Sprintf("depth=%d/%s", depth, name)
			}
			b.Run(name, func(b *testing.B) {
				q := sharedCohort(50, "h", int64(nodes*8/50))
				q.Tiers = append(q.Tiers, scheduler.Tier{Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true})
				opts := scheduler.DefaultOptions()
				opts.WalkDepth = depth
				benchSimWith(b, q, pods("h", nodes), busyJobs(nodes), opts)
			})
		}
	}
}
