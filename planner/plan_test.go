package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

func d(s string) quantity.Decimal { return quantity.MustParse(s) }

func lim(n int64) *int64 { return &n }

// config builds a configuration from pools and team quotas (team -> flavor -> nominal).
func config(pools []*schema.Pool, teams map[schema.TeamName]map[schema.Flavor]int64) *schema.Config {
	cfg := &schema.Config{Pools: map[schema.PoolName]*schema.Pool{}, Teams: map[schema.TeamName]*schema.Team{}}
	for _, p := range pools {
		cfg.Pools[p.Name] = p
	}
	for name, q := range teams {
		t := &schema.Team{Name: name, CostCenter: "CC-" + string(name), Quota: map[schema.Flavor]schema.Quota{}}
		for f, n := range q {
			t.Quota[f] = schema.Quota{Nominal: n}
		}
		cfg.Teams[name] = t
	}
	return cfg
}

func pool(name string, gpus, minN, maxN int64, onDemand string) *schema.Pool {
	return &schema.Pool{Name: schema.PoolName(name), Cluster: "c", Flavor: "h100", GPUsPerNode: gpus,
		MinNodes: minN, MaxNodes: maxN, Price: schema.Price{OnDemandPerNodeHour: d(onDemand)}}
}

func TestPoolSizingByHand(t *testing.T) {
	for name, tc := range map[string]struct {
		pool      *schema.Pool
		nominal   int64
		wantNodes int64
		wantCost  string
	}{
		// 192 * 1.1 / 8 = 26.4 -> 27, + 1 spare = 28 nodes; 16 committed at $55, 12 on demand at $88:
		// 730 * (16*55 + 12*88) = 730 * 1936 = 1,413,280.
		"design example": {
			pool: func() *schema.Pool {
				p := pool("h100-a", 8, 0, 64, "88.0")
				p.Headroom, p.SpareNodes = d("0.10"), 1
				p.Price.CommittedPerNodeHour, p.Price.HasCommittedPrice, p.Price.CommittedNodes = d("55.0"), true, 16
				return p
			}(),
			nominal: 192, wantNodes: 28, wantCost: "1413280",
		},
		// In float64, 100 * 1.1 = 110.00000000000001 and its ceiling is 111 nodes.
		"headroom float artefact, 1 gpu per node": {
			pool:    func() *schema.Pool { p := pool("p", 1, 0, 1000, "1"); p.Headroom = d("0.1"); return p }(),
			nominal: 100, wantNodes: 110, wantCost: "80300",
		},
		// 70 * 1.1 / 7 = 11 exactly; float64 says 11.000000000000002 -> 12.
		"headroom float artefact, 7 gpus per node": {
			pool:    func() *schema.Pool { p := pool("p", 7, 0, 1000, "2.5"); p.Headroom = d("0.1"); return p }(),
			nominal: 70, wantNodes: 11, wantCost: "20075",
		},
		// 0.29 * 100 = 28.999999999999996 in float64: ceil((100*(1+0.29))/1) must be 129.
		"headroom 0.29": {
			pool:    func() *schema.Pool { p := pool("p", 1, 0, 1000, "1"); p.Headroom = d("0.29"); return p }(),
			nominal: 100, wantNodes: 129, wantCost: "94170",
		},
		"clamped to max": {pool: pool("p", 8, 0, 4, "10"), nominal: 1000, wantNodes: 4, wantCost: "29200"},
		"held at min":    {pool: pool("p", 8, 3, 10, "10"), nominal: 8, wantNodes: 3, wantCost: "21900"},
		"no demand, spare only": {
			pool:    func() *schema.Pool { p := pool("p", 8, 0, 10, "10"); p.SpareNodes = 2; return p }(),
			nominal: 0, wantNodes: 2, wantCost: "14600",
		},
		// Committed nodes are paid for even when the pool is smaller: 730*(10*5) = 36,500.
		"committed above target": {
			pool: func() *schema.Pool {
				p := pool("p", 8, 0, 20, "9")
				p.Price.CommittedPerNodeHour, p.Price.HasCommittedPrice, p.Price.CommittedNodes = d("5"), true, 10
				return p
			}(),
			nominal: 8, wantNodes: 1, wantCost: "36500",
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config([]*schema.Pool{tc.pool}, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": tc.nominal}})
			p := Build(cfg)
			pp := p.Pools[0]
			if pp.NodesTarget != tc.wantNodes {
				t.Errorf("nodes = %d, want %d", pp.NodesTarget, tc.wantNodes)
			}
			if pp.GPUsTarget != tc.wantNodes*tc.pool.GPUsPerNode {
				t.Errorf("gpus = %d", pp.GPUsTarget)
			}
			if pp.MonthlyUSD.Cmp(d(tc.wantCost)) != 0 {
				t.Errorf("cost = %s, want %s", pp.MonthlyUSD, tc.wantCost)
			}
			if p.TotalMonthlyUSD.Cmp(d(tc.wantCost)) != 0 {
				t.Errorf("total = %s, want %s", p.TotalMonthlyUSD, tc.wantCost)
			}
		})
	}
}

func TestSeveralPoolsFillPaidNodesThenCheapest(t *testing.T) {
	committed := pool("a-committed", 8, 0, 10, "90")
	committed.Price.CommittedPerNodeHour, committed.Price.HasCommittedPrice, committed.Price.CommittedNodes = d("50"), true, 4
	cheap := pool("b-cheap", 8, 0, 5, "80")
	dear := pool("c-dear", 8, 0, 100, "95")
	// 4 committed nodes carry 32 GPUs; the next 40 go to the cheapest on-demand
	// pool (5 nodes of b-cheap at $80 beat a-committed at $90); the last 24 to
	// a-committed's on-demand nodes ($90 < $95).
	cfg := config([]*schema.Pool{committed, cheap, dear}, map[schema.TeamName]map[schema.Flavor]int64{"x": {"h100": 96}})
	p := Build(cfg)
	got := map[schema.PoolName]int64{}
	for _, pp := range p.Pools {
		got[pp.Pool] = pp.NodesTarget
	}
	want := map[schema.PoolName]int64{"a-committed": 7, "b-cheap": 5, "c-dear": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("nodes (-want +got)\n%s", diff)
	}
	if f := p.Flavor("h100"); f.UnplacedGPUs != 0 || f.NominalGPUs != 96 || f.TargetGPUs != 96 {
		t.Fatalf("flavor plan = %+v", f)
	}
	// 730*(4*50 + 3*90) + 730*5*80 = 343,100 + 292,000.
	if p.TotalMonthlyUSD.Cmp(d("635100")) != 0 {
		t.Fatalf("total = %s", p.TotalMonthlyUSD)
	}
}

func TestFlavorBeyondReachHoldsEveryPoolAtMax(t *testing.T) {
	a, b := pool("a", 8, 0, 2, "1"), pool("b", 8, 0, 3, "2")
	p := Build(config([]*schema.Pool{a, b}, map[schema.TeamName]map[schema.Flavor]int64{"x": {"h100": 50}}))
	if f := p.Flavor("h100"); f.UnplacedGPUs != 10 || f.MaxGPUs != 40 {
		t.Fatalf("flavor = %+v, want 10 unplaced of 50 over 40 max", f)
	}
	for _, pp := range p.Pools {
		if !pp.AtMax || pp.NodesTarget != map[schema.PoolName]int64{"a": 2, "b": 3}[pp.Pool] {
			t.Errorf("pool %s = %d nodes, atMax %v", pp.Pool, pp.NodesTarget, pp.AtMax)
		}
	}
}

func TestTeamCostsAddUpToTheCent(t *testing.T) {
	// 730 * 1 node * $10.01 = $7,307.30 split three ways: 2435.77 + 2435.77 + 2435.76.
	p := Build(config([]*schema.Pool{pool("p", 3, 0, 1, "10.01")},
		map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 1}, "b": {"h100": 1}, "c": {"h100": 1}}))
	var sum quantity.Decimal
	got := map[schema.TeamName]string{}
	for _, tp := range p.Teams {
		sum = sum.Add(tp.MonthlyUSD)
		got[tp.Team] = tp.MonthlyUSD.Fixed(2)
	}
	if diff := cmp.Diff(map[schema.TeamName]string{"a": "2435.77", "b": "2435.77", "c": "2435.76"}, got); diff != "" {
		t.Fatalf("team costs (-want +got)\n%s", diff)
	}
	if sum.Add(p.UnallocatedMonthlyUSD).Cmp(p.TotalMonthlyUSD) != 0 {
		t.Fatalf("teams %s + unallocated %s != total %s", sum, p.UnallocatedMonthlyUSD, p.TotalMonthlyUSD)
	}
	if len(p.CostCenters) != 3 || p.CostCenters[0].CostCenter != "CC-a" {
		t.Fatalf("cost centres = %+v", p.CostCenters)
	}
}

func TestTeamCostFollowsNominalShare(t *testing.T) {
	// Two teams, 24 and 8 GPUs of one 8-GPU-node pool at $10: 4 nodes, 730*40 = 29,200;
	// shares 3/4 and 1/4.
	p := Build(config([]*schema.Pool{pool("p", 8, 0, 10, "10")},
		map[schema.TeamName]map[schema.Flavor]int64{"big": {"h100": 24}, "small": {"h100": 8}}))
	if p.Team("big").MonthlyUSD.Cmp(d("21900")) != 0 || p.Team("small").MonthlyUSD.Cmp(d("7300")) != 0 {
		t.Fatalf("big %s small %s", p.Team("big").MonthlyUSD, p.Team("small").MonthlyUSD)
	}
	if !p.UnallocatedMonthlyUSD.IsZero() {
		t.Fatalf("unallocated = %s", p.UnallocatedMonthlyUSD)
	}
}

func TestCompare(t *testing.T) {
	pools := []*schema.Pool{pool("p", 8, 0, 100, "10"), pool("gone", 8, 1, 1, "1")}
	base := Build(config(pools, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 16}, "b": {"h100": 16}}))
	head := Build(config(pools[:1], map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 32}, "b": {"h100": 16}}))
	diff := Compare(base, head)
	if want := []QuotaChange{{Team: "a", Flavor: "h100", NominalBefore: 16, NominalAfter: 32}}; !cmp.Equal(diff.Quotas, want) {
		t.Fatalf("quotas = %+v", diff.Quotas)
	}
	// Base: "gone" holds 1 node at nodes.min, paid anyway, which carries 8 GPUs first, so p
	// has 3 nodes; head: p carries all 48 GPUs on 6 nodes (+3*730*10 = 21,900), "gone" is removed (-730).
	if len(diff.Pools) != 2 || diff.Pools[0].Pool != "gone" || diff.Pools[0].NodesAfter != 0 || diff.Pools[1].NodesBefore != 3 || diff.Pools[1].NodesAfter != 6 {
		t.Fatalf("pools = %+v", diff.Pools)
	}
	if diff.Delta.Cmp(d("21170")) != 0 || diff.After.Sub(diff.Before).Cmp(diff.Delta) != 0 {
		t.Fatalf("delta = %s", diff.Delta)
	}
	if got := Compare(head, head); !got.Empty() {
		t.Fatalf("a plan against itself: %+v", got)
	}
}

func TestCarryInvertsNodesFor(t *testing.T) {
	for _, h := range []string{"0", "0.1", "0.25", "0.333", "1.5"} {
		for g := int64(1); g <= 8; g++ {
			p := &schema.Pool{GPUsPerNode: g, Headroom: d(h), SpareNodes: 1}
			for n := int64(0); n < 40; n++ {
				c := Carry(p, n)
				if c > 0 && NodesFor(p, c) > n {
					t.Fatalf("h=%s g=%d: carry(%d)=%d needs %d nodes", h, g, n, c, NodesFor(p, c))
				}
				if NodesFor(p, c+1) <= n && n > p.SpareNodes {
					t.Fatalf("h=%s g=%d: carry(%d)=%d is not the largest", h, g, n, c)
				}
			}
		}
	}
	_ = lim
}
