package sim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

var tickCases = flag.Int("tick-cases", 150, "random histories TestReplayDecidesAsTheRunnerEverySecond replays")

// tickTiers are the tiers of the tick tests: two that preempt, one
// preemptible, one preemptible and borrowOnly.
var tickTiers = []scheduler.Tier{
	{Name: "critical", Priority: 1000},
	{Name: "production", Priority: 500},
	{Name: "research", Priority: 100, Preemptible: true},
	{Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true},
}

// decisionLog is a core that writes down every decision of its cycles, with
// the time.
type decisionLog struct {
	*Core
	log []string
}

func (d *decisionLog) Cycle(now time.Time) scheduler.Results {
	res := d.Core.Cycle(now)
	at := secs(now)

	for _, e := range res.Evicted {
		d.log = append(d.log, fmt.Sprintf("%.6f evict %s", at, e.Workload))
	}
	for _, p := range res.Preempted {
		d.log = append(d.log, fmt.Sprintf("%.6f preempt %s by %s (%s)", at, p.Victim, p.By, p.Reason))
	}
	for _, a := range res.Admitted {
		d.log = append(d.log, fmt.Sprintf("%.6f admit %s on %v", at, a.Workload, a.Pods))
	}
	return res
}

// replayLog replays in on a core with opts and returns its decisions.
func replayLog(t *testing.T, in Input, opts scheduler.Options, ro Options) ([]string, *Report) {
	t.Helper()
	core, err := NewCore(in.Quota, in.Nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	d := &decisionLog{Core: core}
	rep, err := Run(d, in, ro)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 {
		t.Fatalf("violations: %+v", s)
	}
	return d.log, rep
}

// TestReplayCyclesAtTheNextTickAfterAPreemption: a workload that waits
// behind a preemption's leftover runs at the runner's next resync (the next
// whole second), not at the next event 10,000 s later. At 5 s, w preempts r
// (2 GPUs) and uses one; y, waiting since 1 s and not walked by a cycle of
// arrivals, fits the other.
func TestReplayCyclesAtTheNextTickAfterAPreemption(t *testing.T) {
	in := Input{
		Nodes: []scheduler.Node{{Name: "n0", Flavor: "h", GPUs: 2}},
		Quota: scheduler.Config{Tiers: tickTiers, Teams: []scheduler.Team{{Name: "a", Quota: map[scheduler.Flavor]scheduler.Quota{"h": {Nominal: 2}}}}},
		Jobs: []workload.Spec{
			{ID: "r", Team: "a", Tier: "research", Pods: 1, GPUsPerPod: 2, Submit: 0, Duration: 1000},
			{ID: "y", Team: "a", Tier: "research", Pods: 1, GPUsPerPod: 1, Submit: 1, Duration: 10},
			{ID: "w", Team: "a", Tier: "critical", Pods: 1, GPUsPerPod: 1, Submit: 5.5, Duration: 10_000},
		},
	}
	opts := scheduler.DefaultOptions()
	opts.GangTimeout = 0
	log, rep := replayLog(t, in, opts, Options{})
	var start *float64
	for _, j := range rep.Jobs {
		if j.ID == "y" {
			start = j.Start
		}
	}
	if start == nil || *start != 6 {
		t.Errorf("y started at %v, want 6 (the tick after the preemption at 5.5)\n%v", start, log)
	}
}

// randomHistory is a small random history: a cohort of 2-3 teams, 2-4 nodes
// of 2 or 4 GPUs, up to 24 jobs of the four tiers arriving in the first
// minute, and a few node faults.
func randomHistory(rng *rand.Rand) Input {
	var in Input
	for i := range 2 + rng.IntN(3) {
		in.Nodes = append(in.Nodes, scheduler.Node{Name: scheduler.NodeName(fmt.Sprintf("n%d", i)), Flavor: "h", GPUs: int64(2 + 2*rng.IntN(2)),
			Domains: []scheduler.Domain{{Level: "rack", Name: fmt.Sprintf("r%d", i/2)}}})
	}
	in.Quota = scheduler.Config{Tiers: tickTiers, Cohorts: []scheduler.Cohort{{Name: "c"}}}
	teams := 2 + rng.IntN(2)
	for i := range teams {
		q := scheduler.Quota{Nominal: int64(rng.IntN(5))}
		if rng.IntN(3) == 0 {
			l := int64(rng.IntN(3))
			q.LendingLimit = &l
		}
		in.Quota.Teams = append(in.Quota.Teams, scheduler.Team{Name: scheduler.TeamName(fmt.Sprintf("t%d", i)), Cohort: "c", Quota: map[scheduler.Flavor]scheduler.Quota{"h": q}})
	}
	for i := range 4 + rng.IntN(21) {
		j := workload.Spec{ID: fmt.Sprintf("j%d", i), Team: fmt.Sprintf("t%d", rng.IntN(teams)), Tier: string(tickTiers[rng.IntN(len(tickTiers))].Name),
			Pods: int64(1 + rng.IntN(2)), GPUsPerPod: int64(1 + rng.IntN(2)), Submit: float64(rng.IntN(600)) / 10, Duration: 0.5 + float64(rng.IntN(400))/10}
		if rng.IntN(4) == 0 {
			j.Require = "rack"
		}
		in.Jobs = append(in.Jobs, j)
	}
	for range rng.IntN(3) {
		n := in.Nodes[rng.IntN(len(in.Nodes))].Name
		at := float64(rng.IntN(600)) / 10
		in.Events = append(in.Events, Event{Time: at, Node: n, Kind: Fail}, Event{Time: at + float64(rng.IntN(200))/10, Node: n, Kind: Recover})
	}
	return in
}

// TestReplayDecidesAsTheRunnerEverySecond: over random histories, the
// replay (a cycle at each event, each wake, and the next whole second after
// a cycle that leaves the core Due) decides exactly what a loop that also
// cycles at every whole second decides (the runner's resync): the same
// admissions, preemptions and evictions at the same times. More histories:
// -tick-cases.
func TestReplayDecidesAsTheRunnerEverySecond(t *testing.T) {
	for seed := range *tickCases {
		rng := rand.New(rand.NewPCG(uint64(seed), 47))
		in := randomHistory(rng)
		opts := scheduler.DefaultOptions()
		opts.GangTimeout = 0
		opts.ReserveAfter = time.Duration(rng.IntN(20)) * time.Second
		// Starving work that takes back what reclaims it again can go back
		// and forth for hours of replay (a history of seed 139 with
		// StarvationAfter 15 s): left out here.
		opts.StarvationAfter = 0
		opts.BorrowFirstAfter = time.Duration(rng.IntN(2)*10) * time.Second
		opts.Backoff = time.Duration(rng.IntN(3)) * time.Second
		if rng.IntN(2) == 0 {
			opts.WalkDepth, opts.FullWalkEvery = 1+rng.IntN(3), time.Duration(rng.IntN(4))*time.Second
		}
		got, gotRep := replayLog(t, in, opts, Options{})
		want, wantRep := replayLog(t, in, opts, Options{EverySecond: true})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: decisions (-every second +replay):\n%s", seed, diff)
		}
		if !slices.EqualFunc(wantRep.Jobs, gotRep.Jobs, func(a, b JobReport) bool { return cmp.Equal(a, b) }) {
			t.Fatalf("seed %d: job reports differ:\n%s", seed, cmp.Diff(wantRep.Jobs, gotRep.Jobs))
		}
	}
}
