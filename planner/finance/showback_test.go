package finance

import (
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Quota against use, by hand: 2 nodes of 8 GPUs and a spare node at $10 an
// hour cost $21,900 a month, $1,368.75 per nominal GPU-month (16 GPUs of
// quota). Team a (16 GPUs) used 8 GPUs on average over 10 days: its quota
// costs $21,900 (what the plan charges it), its use $10,950, $10,950 idle.
// Team b has no quota here but borrowed 2 GPUs over 5 days: $2,737.50 used,
// -$2,737.50 idle.
func TestShowbackByHand(t *testing.T) {
	cfg := &schema.Config{
		Pools: map[schema.PoolName]*schema.Pool{"p": {Name: "p", Cluster: "c", Flavor: "h100", GPUsPerNode: 8, MinNodes: 0, MaxNodes: 4, SpareNodes: 1,
			Price: schema.Price{OnDemandPerNodeHour: quantity.MustParse("10")}}},
		Teams: map[schema.TeamName]*schema.Team{
			"a": {Name: "a", Quota: map[schema.Flavor]schema.Quota{"h100": {Nominal: 16}}},
			"b": {Name: "b", Quota: map[schema.Flavor]schema.Quota{"h100": {Nominal: 0}}},
		},
	}
	p := planner.Build(cfg)
	if got := p.TotalMonthlyUSD.String(); got != "21900" {
		t.Fatalf("plan costs %s, want 21900", got)
	}
	sb := showback(p, []Metered{
		{Team: "a", WindowSeconds: 10 * 86400, GPUSeconds: map[string]int64{"h100": 8 * 10 * 86400}},
		{Team: "b", WindowSeconds: 5 * 86400, GPUSeconds: map[string]int64{"h100": 2 * 5 * 86400}},
		{Team: "gone", WindowSeconds: 86400, GPUSeconds: map[string]int64{"h100": 1}},
	})
	if sb == nil || len(sb.Rows) != 2 {
		t.Fatalf("showback %+v, want two rows", sb)
	}
	a, b := sb.Rows[0], sb.Rows[1]
	for _, c := range []struct {
		what, got, want string
	}{
		{"a avg GPUs", a.AvgGPUs.String(), "8"},
		{"a plan cost", p.Team("a").MonthlyUSD.String(), "21900"},
		{"a use", a.Use, "50%"},
		{"a quota cost", a.QuotaCost.String(), p.Team("a").MonthlyUSD.String()},
		{"a used cost", a.UsedCost.String(), "10950"},
		{"a idle", a.Idle.String(), "10950"},
		{"a window", a.WindowDays.String(), "10"},
		{"b used cost", b.UsedCost.String(), "2737.5"},
		{"b idle", b.Idle.String(), "-2737.5"},
		{"b use", b.Use, ""},
		{"total idle", sb.Idle.String(), "8212.5"},
		{"total used", sb.Used.String(), "13687.5"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if showback(p, nil) != nil {
		t.Error("a showback without usage")
	}
}

// A team metered in two places (a Kubernetes cluster's Team status over 10
// days, a Slurm cluster's accounting over 1 day) used the sum of the two
// averages: 8 GPUs and 4 GPUs are 12 of its 16, $16,425 of use.
func TestShowbackAddsPlaces(t *testing.T) {
	cfg := &schema.Config{
		Pools: map[schema.PoolName]*schema.Pool{"p": {Name: "p", Cluster: "c", Flavor: "h100", GPUsPerNode: 8, MinNodes: 0, MaxNodes: 4, SpareNodes: 1,
			Price: schema.Price{OnDemandPerNodeHour: quantity.MustParse("10")}}},
		Teams: map[schema.TeamName]*schema.Team{"a": {Name: "a", Quota: map[schema.Flavor]schema.Quota{"h100": {Nominal: 16}}}},
	}
	sb := showback(planner.Build(cfg), []Metered{
		{Team: "a", WindowSeconds: 10 * 86400, GPUSeconds: map[string]int64{"h100": 8 * 10 * 86400}},
		{Team: "a", WindowSeconds: 86400, GPUSeconds: map[string]int64{"h100": 4 * 86400}},
	})
	if sb == nil || len(sb.Rows) != 1 {
		t.Fatalf("showback %+v, want one row", sb)
	}
	r := sb.Rows[0]
	for _, c := range []struct{ what, got, want string }{
		{"avg GPUs", r.AvgGPUs.String(), "12"},
		{"use", r.Use, "75%"},
		{"used cost", r.UsedCost.String(), "16425"},
		{"window", r.WindowDays.String(), "10"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
}
