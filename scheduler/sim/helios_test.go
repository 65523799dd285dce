package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// heliosReplicas replays issue 15's Helios setup k times (the whole Helios
// trace with its users dealt onto 8 teams of one cohort on n nodes of 8 GPUs,
// racks of 4, blocks of 8 racks, the teams' quotas 95% of the fleet): the
// trace as it is, then with every submission moved later by less than a
// second (seeded by the replica's number), two at a time. Which of two
// equally good nodes or domains a placement takes depends on the order the
// index holds them in, and the figures of a replay follow such ties a long
// way (scheduler/BENCHMARKS.md, "The noise of ties"): a figure is the median
// of replicas.
func heliosReplicas(t *testing.T, n int, opts scheduler.Options, k int) []*Report {
	t.Helper()
	f, full := trace("helios/helios_15k_users.csv")
	if !full {
		t.Skip("issue 15's Helios figures need the full trace in ../shared/traces, not beside this clone")
	}
	base := readJobs(t, f, 0)
	reps := make([]*Report, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for r := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			jobs := slices.Clone(base)
			if r > 0 {
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				for i := range jobs {
					jobs[i].Submit += rng.Float64()
				}
			}
			q := sharedCohort(8, "h", int64(n*8*95/100/8))
			AssignToConfig(jobs, q)
			core, err := NewCore(q, pods("h", n), opts)
			if err == nil {
				reps[r], err = Run(core, Input{Nodes: pods("h", n), Jobs: jobs, Quota: q}, Options{})
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", r, err)
		}
	}
	return reps
}

// replicas is how many replays a Helios figure is the median of.
const replicas = 16

// wholeReplicas is how many replays the whole-domain share is the median
// of: one replica's share ranges from 0.03 to 0.67, so a median of 16 moves
// by more than the difference the test holds.
const wholeReplicas = 48

// spread is a figure over replicas: its median and range.
type spread struct{ median, low, high float64 }

func spreadOf(reps []*Report, figure func(*Report) float64) spread {
	var xs []float64
	for _, r := range reps {
		xs = append(xs, figure(r))
	}
	slices.Sort(xs)
	m := len(xs) / 2
	med := xs[m]
	if len(xs)%2 == 0 {
		med = (xs[m-1] + xs[m]) / 2
	}
	return spread{med, xs[0], xs[len(xs)-1]}
}

func (s spread) String() string {
	if s.high < 10 {
		return fmt.Sprintf("%.3f (%.3f-%.3f)", s.median, s.low, s.high)
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", s.median, s.low, s.high)
}

// waitP95Of is the p95 wait of the jobs of at least gpus GPUs that started.
func waitP95Of(rep *Report, gpus int64) float64 {
	var w []float64
	for _, j := range rep.Jobs {
		if j.GPUs >= gpus && j.WaitS != nil {
			w = append(w, *j.WaitS)
		}
	}
	return Percentile(w, 0.95)
}

func util(r *Report) float64       { return r.Summary.GPUUtilization }
func waitP95(r *Report) float64    { return r.Summary.WaitP95S }
func bigWaitP95(r *Report) float64 { return waitP95Of(r, 16) }
func wholeShare(r *Report) float64 { return *r.Summary.WholeDomainShare }

// TestHeliosFigures replays issue 15's Helios setup at 80 and 56 nodes
// (replicas times each) and logs its figures as medians and ranges
// (scheduler/BENCHMARKS.md). In every replica it holds no violation and
// every job done. At 80 nodes, with the default options, it holds on the
// medians: utilization at least 0.63, the p95 wait of gangs of 16+ GPUs at
// most half of the old 443,442 s (issue 15's target), and the p95 wait of all
// jobs no longer than without the starvation rule (Options.StarvationAfter),
// replayed at the same cadence: the rule buys the gangs' wait without making
// other work wait longer. Without the rule it holds that the gangs' p95 is
// more than half of 443,442 s (the rule is what meets it), and it logs
// borrow-first (opt-in) there. Issue 15's other target, all jobs' p95 at
// most 20% above 86,410 s, was measured by a simulator that cycled only at
// events; at the runner's cadence it is not met (scheduler/BENCHMARKS.md).
func TestHeliosFigures(t *testing.T) {
	first := scheduler.DefaultOptions()
	first.BorrowFirstAfter = 24 * time.Hour
	without := scheduler.DefaultOptions()
	without.StarvationAfter = 0
	for _, n := range []int{80, 56} {
		k := replicas
		var big, all [3]spread
		configs := []scheduler.Options{scheduler.DefaultOptions(), without, first}
		if n != 80 {
			configs = configs[:1] // logged only
		}
		for i, opts := range configs {
			reps := heliosReplicas(t, n, opts, k)
			for r, rep := range reps {
				if s := rep.Summary; s.Completed != s.Jobs {
					t.Errorf("%d nodes, replica %d: %d of %d jobs completed", n, r, s.Completed, s.Jobs)
				}
				noViolations(t, rep)
			}
			u := spreadOf(reps, util)
			all[i], big[i] = spreadOf(reps, waitP95), spreadOf(reps, bigWaitP95)
			t.Logf("%d nodes, starving after %v, borrow first after %v, %d replicas: util %v  wait p95 all %v s, 16+ GPUs %v s  preemptions %v",
				n, opts.StarvationAfter, opts.BorrowFirstAfter, k, u, all[i], big[i], spreadOf(reps, func(r *Report) float64 { return float64(r.Summary.Preemptions) }))
			if n == 80 && i == 0 && (u.median < 0.63 || big[i].median > 443442/2) {
				t.Errorf("80 nodes: median utilization %.3f (want >= 0.63), 16+ p95 %.0f s (want <= %.0f)",
					u.median, big[i].median, 443442/2.0)
			}
		}
		if n == 80 && big[1].median <= 443442/2 {
			t.Errorf("80 nodes: without the starvation rule the median 16+ p95 is %.0f s: the test no longer shows the rule meets the target", big[1].median)
		}
		if n == 80 && all[0].median > all[1].median {
			t.Errorf("80 nodes: the median all-jobs p95 is %.0f s with the starvation rule, %.0f s without: the rule makes other work wait longer", all[0].median, all[1].median)
		}
	}
}

// openbFleet is every 100th node of openb's list (every model kept, so that
// pods queue; without ../shared, the sample in testdata/) and one team with all their GPUs, QoS classes as tiers.
func openbFleet(t *testing.T) ([]scheduler.Node, scheduler.Config) {
	t.Helper()
	f, full := trace("openb/openb_node_list_gpu_node.csv")
	every := 1 // the slice is the sample
	if full {
		every = 100
	}
	var nodeList []workload.Node
	for i, n := range readNodes(t, f) {
		if i%every == 0 {
			nodeList = append(nodeList, n)
		}
	}
	nodes := FromNodeList(nodeList)
	q := scheduler.Config{
		Tiers: []scheduler.Tier{{Name: "production", Priority: 500}, {Name: "research", Priority: 100, Preemptible: true}, {Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true}},
		Teams: []scheduler.Team{{Name: "openb", Quota: map[scheduler.Flavor]scheduler.Quota{}}},
	}
	for _, n := range nodes {
		qq := q.Teams[0].Quota[n.Flavor]
		qq.Nominal += n.GPUs
		q.Teams[0].Quota[n.Flavor] = qq
	}
	return nodes, q
}

// openb replays the GPU pods of openb on openbFleet, as TestReplayOpenB does.
func openb(t *testing.T) *Report {
	t.Helper()
	f, full := trace("openb/openb_pod_list_default.csv")
	if !full {
		t.Skip("the whole-domain figures need the full openb trace in ../shared/traces")
	}
	nodes, q := openbFleet(t)
	jobs := readJobs(t, f, 0)
	AssignToConfig(jobs, q)
	return runCore(t, Input{Nodes: nodes, Jobs: jobs, Quota: q}, scheduler.DefaultOptions())
}

// TestWholeDomainShare logs the fragmentation figure on Helios (the median
// of replicas) and openb, and shows what keeping whole domains whole does:
// on Helios, with every other rule as it is, the median share is at least a
// quarter above that of placement by node-level fit alone
// (Options.NodeLevelFit: 0.292 against 0.174 over 48 replicas, 0.279
// against 0.167 over 128; BENCHMARKS.md). It also holds the median
// above 0.25, a guard against a change for the worse. (openb's nodes have no
// topology: each is its own top-level domain, and node-level best fit is the
// rule either way.)
func TestWholeDomainShare(t *testing.T) {
	reps := heliosReplicas(t, 80, scheduler.DefaultOptions(), wholeReplicas)
	flatOpts := scheduler.DefaultOptions()
	flatOpts.NodeLevelFit = true
	flat := spreadOf(heliosReplicas(t, 80, flatOpts, wholeReplicas), wholeShare)
	ob := openb(t)
	for _, rep := range append(slices.Clone(reps), ob) {
		if s := rep.Summary.WholeDomainShare; s == nil || *s < 0 || *s > 1 {
			t.Fatalf("whole domain share %v, want a share in [0, 1]", s)
		}
	}
	w := spreadOf(reps, wholeShare)
	t.Logf("helios 80 nodes, %d replicas: whole domain share %v", len(reps), w)
	o := ob.Summary
	t.Logf("openb: whole domain share %.4f  util %.3f  wait p95 %.0f s", *o.WholeDomainShare, o.GPUUtilization, o.WaitP95S)
	t.Logf("helios 80 nodes, node-level fit, %d replicas: whole domain share %v", len(reps), flat)
	if w.median < 0.25 {
		t.Errorf("helios 80 nodes: median whole domain share %.4f, want at least 0.25", w.median)
	}
	if w.median < 1.25*flat.median {
		t.Errorf("helios 80 nodes: median whole domain share %.4f, node-level fit %.4f: want whole domains kept whole to leave at least a quarter more", w.median, flat.median)
	}
}
