package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/internal/testfiles"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/schema/quantity"
)

// burstInput is the replay of the repository dir with the jobs of file.
func burstInput(t *testing.T, dir, file string) Input {
	t.Helper()
	cfg := loadRepo(t, dir)
	in := FromRepository(cfg, fleet.Layout(cfg, planner.Build(cfg).NodesTargets()))
	in.Jobs = readJobs(t, file, 0)
	AssignToConfig(in.Jobs, in.Quota)
	return in
}

// resizes records the nodes a replay adds and removes, and what a removal
// evicted.
type resizes struct {
	*Core
	added, removed []scheduler.NodeName
	evicted        int
}

func (r *resizes) AddNode(n scheduler.Node) error {
	r.added = append(r.added, n.Name)
	return r.Core.AddNode(n)
}

func (r *resizes) RemoveNode(name scheduler.NodeName) ([]scheduler.WorkloadID, error) {
	r.removed = append(r.removed, name)
	ev, err := r.Core.RemoveNode(name)
	r.evicted += len(ev)
	return ev, err
}

func runResizes(t *testing.T, in Input) (*Report, *resizes) {
	t.Helper()
	core, err := NewCore(in.Quota, in.Nodes, scheduler.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	rz := &resizes{Core: core}
	rep, err := Run(rz, in, Options{FullChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	noViolations(t, rep)
	return rep, rz
}

// TestBurstReplay: on testdata/burst (2 planned nodes of 8 GPUs, nodes.max 4,
// burst 2, idle 10 minutes), speech's 4-GPU gang waits behind nlp's two
// 6-GPU gangs, one per node: the pool asks for one burst node at the next
// decision (60 s), it joins after ProvisionDelay and runs the gang; once no
// gang has run on it for 10 minutes it is removed, idle. It is billed from
// the decision to its removal at the pool's on-demand price, exactly, and
// to speech; without burst the gang waits for nlp's to end.
func TestBurstReplay(t *testing.T) {
	in := burstInput(t, "testdata/burst", "testdata/burst/workload.csv")
	rep, rz := runResizes(t, in)
	wo := runCore(t, WithoutBurst(in), scheduler.DefaultOptions())
	if wo.Burst != nil {
		t.Errorf("without burst: %+v, want no burst section", wo.Burst)
	}
	job := func(rep *Report, id string) JobReport {
		for _, j := range rep.Jobs {
			if j.ID == id {
				return j
			}
		}
		t.Fatalf("no job %s", id)
		return JobReport{}
	}
	want := 60 + ProvisionDelay.Seconds()
	if s1 := job(rep, "s1"); s1.Start == nil || *s1.Start != want || len(s1.Nodes) != 1 || s1.Nodes[0] != "h100-2" {
		t.Errorf("s1 with burst: %+v, want it to start at %gs on h100-2", s1, want)
	}
	if s1 := job(wo, "s1"); s1.Start == nil || *s1.Start != 3600 {
		t.Errorf("s1 without burst: %+v, want it to wait for nlp's gangs to end at 3600s", s1)
	}
	if len(rz.added) != 1 || len(rz.removed) != 1 || rz.added[0] != "h100-2" || rz.removed[0] != "h100-2" || rz.evicted != 0 {
		t.Errorf("added %v, removed %v (evicting %d), want h100-2 added and removed idle", rz.added, rz.removed, rz.evicted)
	}
	b := rep.Burst
	if b == nil || len(b.Pools) != 1 {
		t.Fatalf("burst = %+v, want the pool h100", b)
	}
	// Asked for at 60 s; s2 ends at 3000 s, the next decision (3060 s)
	// sees it idle, and 10 minutes later it is given back: 3660 s.
	hours := quantity.Frac(3660-60, 3600)
	cost := hours.Mul(quantity.MustParse("10.35"))
	if p := b.Pools[0]; p.PeakNodes != 1 || p.CostUSD.Cmp(cost) != 0 || p.NodeHours != hours.Float64() || p.GPUHours != 8*hours.Float64() {
		t.Errorf("pool %+v, want peak 1, %s node-hours at $10.35: %s", p, hours, cost)
	}
	if len(b.Teams) != 1 || b.Teams[0].Team != "speech" || b.Teams[0].CostUSD.Cmp(cost) != 0 || b.CostUSD.Cmp(cost) != 0 {
		t.Errorf("teams %+v, total %s, want speech's %s", b.Teams, b.CostUSD, cost)
	}
	CompareBurst(rep, wo)
	if c := b.Without; c == nil || c.WaitP95SavedS <= 0 || c.WaitMeanSavedS <= 0 || c.CostAddedUSD.Cmp(cost) != 0 {
		t.Errorf("comparison %+v, want waits saved for %s", c, cost)
	}
}

// TestBurstReplayOfHelios replays the Helios trace's first 1,000 jobs
// (the slice in testdata, whatever is beside the clone) on
// testdata/burst-helios with every invariant checked after every step:
// the pool never holds more than its burst or nodes.max allow, no node is
// removed with work on it, the cost is the node-hours at the on-demand
// price, the teams' shares add up to it, and burst saves wait. The figures
// are docs/elastic.md's.
func TestBurstReplayOfHelios(t *testing.T) {
	in := burstInput(t, "testdata/burst-helios", testfiles.Local("traces/helios/helios_15k_users.csv"))
	rep, rz := runResizes(t, in)
	wo := runCore(t, WithoutBurst(in), scheduler.DefaultOptions())
	CompareBurst(rep, wo)
	if rz.evicted != 0 || len(rz.added) == 0 || len(rz.removed) == 0 {
		t.Errorf("added %d, removed %d nodes evicting %d workloads: want some of each, none evicted", len(rz.added), len(rz.removed), rz.evicted)
	}
	for _, j := range rep.Jobs {
		for _, n := range j.Nodes {
			if i, ok := fleet.NodeIndex("h100", n); !ok || i >= 12 {
				t.Fatalf("job %s ran on %s, beyond nodes.max 12", j.ID, n)
			}
		}
	}
	b := rep.Burst
	p := b.Pools[0]
	sum := quantity.Int(0)
	for _, tm := range b.Teams {
		sum = sum.Add(tm.CostUSD)
	}
	price := quantity.MustParse("55.04")
	if p.PeakNodes < 1 || p.PeakNodes > 4 || sum.Cmp(p.CostUSD) != 0 || math.Abs(p.CostUSD.Quo(price).Float64()-p.NodeHours) > 0.0005 {
		t.Errorf("pool %+v, teams %+v: want a peak of 1 to 4 nodes, billed at $55.04 an hour, the teams' costs adding up", p, b.Teams)
	}
	c := b.Without
	if c.WaitMeanSavedS <= 0 || c.WaitP95SavedS <= 0 {
		t.Errorf("burst saves %gs of mean wait and %gs of p95: want both saved", c.WaitMeanSavedS, c.WaitP95SavedS)
	}
	got := fmt.Sprintf("burst: peak %d nodes, %.1f node-hours, %s; wait mean saved %.0fs (of %.0fs), p95 saved %.0fs (of %.0fs)",
		p.PeakNodes, p.NodeHours, quantity.USD(p.CostUSD), c.WaitMeanSavedS, c.WaitMeanS, c.WaitP95SavedS, c.WaitP95S)
	for _, tm := range b.Teams {
		got += fmt.Sprintf("; %s %s", tm.Team, quantity.USD(tm.CostUSD))
	}
	// The replay is deterministic: a change to these is a change to the
	// figures docs/elastic.md states, to be made there too.
	if want := "burst: peak 4 nodes, 111.3 node-hours, $6,125.03; wait mean saved 23751s (of 141182s), p95 saved 214713s (of 929133s)"; !strings.HasPrefix(got, want) {
		t.Errorf("%s\nwant (docs/elastic.md) %s", got, want)
	}
	t.Log(got)
}

// TestBurstReplayStaysCheap: with no pool that bursts, the replay takes
// no burst decision and adds no wake (the replay of a repository without
// burst is what it was).
func TestBurstReplayStaysCheap(t *testing.T) {
	in := WithoutBurst(burstInput(t, "testdata/burst", "testdata/burst/workload.csv"))
	r := &replay{}
	if r.burst = newBurstReplay(in); r.burst != nil {
		t.Fatal("a burst replay without burst pools")
	}
	if changed, err := r.burstStep(Epoch.Add(time.Minute), true); changed || err != nil || len(r.events) != 0 {
		t.Errorf("burstStep: %v, %v, %d events", changed, err, len(r.events))
	}
}
