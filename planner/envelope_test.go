package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// decimals compares decimals by value.
var decimals = cmp.Comparer(func(a, b quantity.Decimal) bool { return a.Cmp(b) == 0 })

// TestEnvelopeByHand: a pool of 8-GPU nodes at $10 a node-hour on demand, 4
// of them committed at $6, nodes.max 12 unless said, and 48 GPUs of quota: 6
// nodes, 730 × (4×6 + 2×10) = $32,120 a month.
func TestEnvelopeByHand(t *testing.T) {
	repair := func(n int64) *schema.Repair { return &schema.Repair{MaxNodes: n} }
	burst := func(n int64) *schema.Burst { return &schema.Burst{MaxNodes: n} }
	for name, tc := range map[string]struct {
		repair      *schema.Repair
		burst       *schema.Burst
		minN, maxN  int64
		nominal     int64
		wantMonthly string
		want        Envelope // but its ceiling: wantCeiling
		wantCeiling string
	}{
		"neither: the planned size and cost": {maxN: 12, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, MostNodes: 6}, wantCeiling: "32120"},
		// 6 + 2 + 3 = 11 nodes: 730 × (4×6 + 7×10) = 730 × 94.
		"both fit": {repair: repair(2), burst: burst(3), maxN: 12, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, ReplacementNodes: 2, BurstNodes: 3, MostNodes: 11, Elastic: true}, wantCeiling: "68620"},
		// Room 6: replacement takes 2, burst the 4 left of its 8: 12 nodes, 730 × (24 + 80).
		"burst clamped by nodes.max after replacement": {repair: repair(2), burst: burst(8), maxN: 12, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, ReplacementNodes: 2, BurstNodes: 4, MostNodes: 12, Elastic: true}, wantCeiling: "75920"},
		// Room 3: replacement first takes all of it, burst gets none: 9 nodes, 730 × (24 + 50).
		"replacement takes the room first": {repair: repair(5), burst: burst(5), maxN: 9, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, ReplacementNodes: 3, MostNodes: 9, Elastic: true}, wantCeiling: "54020"},
		"burst alone": {burst: burst(8), maxN: 12, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, BurstNodes: 6, MostNodes: 12, Elastic: true}, wantCeiling: "75920"},
		"repair alone": {repair: repair(1), maxN: 12, nominal: 48, wantMonthly: "32120",
			want: Envelope{FixedNodes: 6, ReplacementNodes: 1, MostNodes: 7, Elastic: true}, wantCeiling: "39420"},
		// 8 GPUs: 1 node, but the 4 committed are paid anyway (730 × 24): a burst
		// of 2 stays within them and costs nothing more.
		"burst within the committed nodes": {burst: burst(2), maxN: 12, nominal: 8, wantMonthly: "17520",
			want: Envelope{FixedNodes: 1, BurstNodes: 2, MostNodes: 3, Elastic: true}, wantCeiling: "17520"},
		// A burst of 5 goes 2 nodes past them: 730 × (24 + 2×10).
		"burst past the committed nodes": {burst: burst(5), maxN: 12, nominal: 8, wantMonthly: "17520",
			want: Envelope{FixedNodes: 1, BurstNodes: 5, MostNodes: 6, Elastic: true}, wantCeiling: "32120"},
		// nodes.min 5 above nodes.max 3 (an error of its own) holds 5 nodes: no
		// room, and no negative room either.
		"held above nodes.max": {repair: repair(2), burst: burst(2), minN: 5, maxN: 3, nominal: 8, wantMonthly: "24820",
			want: Envelope{FixedNodes: 5, MostNodes: 5, Elastic: true}, wantCeiling: "24820"},
	} {
		t.Run(name, func(t *testing.T) {
			p := pool("p", 8, tc.minN, tc.maxN, "10")
			p.Price.CommittedPerNodeHour, p.Price.HasCommittedPrice, p.Price.CommittedNodes = d("6"), true, 4
			p.Repair, p.Burst = tc.repair, tc.burst
			plan := Build(config([]*schema.Pool{p}, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": tc.nominal}}))
			pp := plan.Pool("p")
			if pp.MonthlyUSD.Cmp(d(tc.wantMonthly)) != 0 {
				t.Errorf("monthly %s, want %s", pp.MonthlyUSD, tc.wantMonthly)
			}
			got := pp.Envelope
			if got.CeilingMonthlyUSD.Cmp(d(tc.wantCeiling)) != 0 {
				t.Errorf("ceiling %s, want %s", got.CeilingMonthlyUSD, tc.wantCeiling)
			}
			got.CeilingMonthlyUSD = tc.want.CeilingMonthlyUSD
			if diff := cmp.Diff(tc.want, got, decimals); diff != "" {
				t.Errorf("envelope (-want +got):\n%s", diff)
			}
			if plan.CeilingMonthlyUSD.Cmp(d(tc.wantCeiling)) != 0 {
				t.Errorf("plan's ceiling %s, want %s", plan.CeilingMonthlyUSD, tc.wantCeiling)
			}
		})
	}
}

// TestEnvelopeAfterObservation: replacement nodes the cluster's health adds
// to the target (WithObserved) are fixed nodes; the envelope's room is what
// nodes.max leaves above them.
func TestEnvelopeAfterObservation(t *testing.T) {
	p := pool("p", 8, 0, 12, "10")
	p.Repair, p.Burst = &schema.Repair{MaxNodes: 1}, &schema.Burst{MaxNodes: 2}
	other := pool("q", 8, 0, 4, "1")
	other.Flavor = "l4"
	cfg := config([]*schema.Pool{p, other}, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 64, "l4": 16}})
	base := Build(cfg)
	// 8 nodes + 1 + 2 = 11 at $10: 730 × 110 = 80,300; q: 2 nodes at $1, 1,460.
	if e := base.Pool("p").Envelope; e.FixedNodes != 8 || e.ReplacementNodes != 1 || e.BurstNodes != 2 || e.CeilingMonthlyUSD.Cmp(d("80300")) != 0 {
		t.Errorf("before the observation: %+v", e)
	}
	if base.CeilingMonthlyUSD.Cmp(d("81760")) != 0 {
		t.Errorf("plan's ceiling before: %s, want 81760", base.CeilingMonthlyUSD)
	}
	// 2 nodes down: 10 nodes planned; room 2: 1 replacement, 1 burst, 12 nodes, 730 × 120.
	got, _ := WithObserved(cfg, base, map[schema.PoolName]Observed{"p": {Nodes: 8, UsableNodes: 6, HealthyGPUs: 48}})
	if e := got.Pool("p").Envelope; e.FixedNodes != 10 || e.ReplacementNodes != 1 || e.BurstNodes != 1 || e.MostNodes != 12 || e.CeilingMonthlyUSD.Cmp(d("87600")) != 0 {
		t.Errorf("after the observation: %+v", e)
	}
	if got.CeilingMonthlyUSD.Cmp(d("89060")) != 0 {
		t.Errorf("plan's ceiling after: %s, want 89060", got.CeilingMonthlyUSD)
	}
}

// TestCompareCeiling: a pool whose only change is a new burst is listed,
// with its ceiling before and after, and the diff carries the plans'.
func TestCompareCeiling(t *testing.T) {
	p := pool("p", 8, 0, 20, "100")
	teams := map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 16}}
	base := Build(config([]*schema.Pool{p}, teams))
	wide := *p
	wide.Burst = &schema.Burst{MaxNodes: 8}
	head := Build(config([]*schema.Pool{&wide}, teams))
	diff := Compare(base, head)
	// 2 nodes at $100: 146,000; with 8 more at most: 730 × 1,000 = 730,000.
	want := []PoolChange{{Pool: "p", Flavor: "h100", NodesBefore: 2, NodesAfter: 2, MonthlyUSDBefore: d("146000"), MonthlyUSDAfter: d("146000"),
		CeilingMonthlyUSDBefore: d("146000"), CeilingMonthlyUSDAfter: d("730000")}}
	if d := cmp.Diff(want, diff.Pools, decimals); d != "" {
		t.Errorf("pools (-want +got):\n%s", d)
	}
	if !diff.Delta.IsZero() || diff.CeilingDelta.Cmp(d("584000")) != 0 || diff.Empty() {
		t.Errorf("delta %s, ceiling delta %s, empty %v", diff.Delta, diff.CeilingDelta, diff.Empty())
	}
}
