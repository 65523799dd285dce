package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// The benchmarks of this file replay work that starves: its queue waits far
// past Options.StarvationAfter, so most of what waits is a starving
// workload that may take back what the cohort's other teams borrow. They
// use only what the simulator and the core offered at 02ee642, so that
// scheduler/bench/sidebyside.sh runs the same file against that commit.

// starvingJobs is ten jobs per node over 50 teams (arrivals skewed to a few,
// which borrow), offered at 1.5x the fleet with jobs of four hours on
// average: the queue grows for days, and the p95 wait is many times the
// six hours after which a workload starves.
func starvingJobs(nodes int) []workload.Spec { return offered(nodes, 7, "v", 1.5, 4*3600) }

// offered is ten jobs per node over 50 teams, arrivals skewed towards a few
// teams, offered at load times the fleet, each running mean seconds on
// average (plus a minute): a third gangs of 2-16 whole nodes (half of them
// in one block), three tiers (the third borrowOnly).
func offered(nodes int, seed uint64, prefix string, load, mean float64) []workload.Spec {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	jobs := make([]workload.Spec, 10*nodes)
	var t float64
	// Mean demand per job: (2/3 x 4.5 + 1/3 x 72) GPUs x mean.
	rate := load * float64(nodes*8) / (27 * mean)
	tiers := []string{"production", "research", "opportunist"}
	for i := range jobs {
		t += rng.ExpFloat64() / rate
		team := min(int(rng.ExpFloat64()*50/4), 49)
		j := workload.Spec{ID: fmt.Sprintf("%s%d", prefix, i), Submit: t, Duration: 60 + rng.ExpFloat64()*mean,
			Team: fmt.Sprintf("team-%d", team), Tier: tiers[rng.IntN(3)]}
		if rng.IntN(3) == 0 {
			j.Pods, j.GPUsPerPod = int64(2+rng.IntN(15)), 8
			if rng.IntN(2) == 0 {
				j.Require = "block"
			}
		} else {
			j.Pods, j.GPUsPerPod = 1, int64(1+rng.IntN(8))
		}
		jobs[i] = j
	}
	return jobs
}

// BenchmarkSimStarving replays starvingJobs at 156, 625 and 2,500 nodes, and
// the Helios trace (the slice in testdata without ../shared) on a fleet a
// third of what it asks, with the default options (starving after 6 h).
// Each run reports utilization, the p95 wait of all jobs and of gangs of 16
// GPUs or more, and the p95 wait in units of StarvationAfter (starved).
func BenchmarkSimStarving(b *testing.B) {
	for _, nodes := range []int{156, 625, 2_500} {
		b.Run(fmt.Sprintf("busy/nodes=%d", nodes), func(b *testing.B) {
			q := sharedCohort(50, "h", int64(nodes*8/50))
			q.Tiers = append(q.Tiers, scheduler.Tier{Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true})
			benchStarving(b, q, pods("h", nodes), starvingJobs(nodes))
		})
	}
	b.Run("helios/nodes=40", func(b *testing.B) {
		f, full := trace("helios/helios_15k_users.csv")
		limit := 0
		if !full {
			limit = 1_000
		}
		jobs := readJobs(b, f, limit)
		q := sharedCohort(8, "h", 40)
		AssignToConfig(jobs, q)
		benchStarving(b, q, pods("h", 40), jobs)
	})
}

func benchStarving(b *testing.B, q scheduler.Config, nodes []scheduler.Node, jobs []workload.Spec) {
	opts := scheduler.DefaultOptions()
	var rep *Report
	for b.Loop() {
		core, err := NewCore(q, nodes, opts)
		if err != nil {
			b.Fatal(err)
		}
		if rep, err = Run(core, Input{Nodes: nodes, Jobs: jobs, Quota: q}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 {
		b.Fatalf("summary %+v", s)
	}
	var big []float64
	for _, j := range rep.Jobs {
		if j.WaitS != nil && j.GPUs >= 16 {
			big = append(big, *j.WaitS)
		}
	}
	slices.Sort(big)
	b.ReportMetric(rep.Summary.GPUUtilization, "util")
	b.ReportMetric(rep.Summary.WaitP95S, "wait-p95-s")
	if len(big) > 0 {
		b.ReportMetric(big[(len(big)*95)/100], "big-p95-s")
	}
	b.ReportMetric(rep.Summary.WaitP95S/opts.StarvationAfter.Seconds(), "starved")
	b.ReportMetric(float64(rep.Summary.Preemptions), "preemptions")
	b.ReportMetric(float64(rep.Summary.Completed), "completed")
}
