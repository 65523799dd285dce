package planner

import (
	"math/rand/v2"
	"testing"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/schematest"
)

// checkPlan fails t when p has a negative or out-of-bound count or a negative
// cost.
func checkPlan(t *testing.T, cfg *schema.Config, p *Plan) {
	t.Helper()
	for _, pp := range p.Pools {
		pool := cfg.Pools[pp.Pool]
		if pp.NodesTarget < 0 || pp.NodesTarget > max(pool.MaxNodes, 0) || pp.GPUsTarget != pp.NodesTarget*pp.GPUsPerNode ||
			pp.CommittedNodes < 0 || pp.OnDemandNodes < 0 || pp.AssignedGPUs < 0 {
			t.Errorf("pool %s: %+v (nodes.max %d)", pp.Pool, pp, pool.MaxNodes)
		}
		if pp.MonthlyUSD.Sign() < 0 {
			t.Errorf("pool %s: monthly cost %s", pp.Pool, pp.MonthlyUSD)
		}
		checkEnvelope(t, pool, pp)
	}
	for _, tp := range p.Teams {
		if tp.MonthlyUSD.Sign() < 0 {
			t.Errorf("team %s: monthly cost %s", tp.Team, tp.MonthlyUSD)
		}
	}
	for _, fp := range p.Flavors {
		if fp.NominalGPUs < 0 || fp.TargetGPUs < 0 || fp.MaxGPUs < 0 || fp.UnplacedGPUs < 0 {
			t.Errorf("flavor %s: %+v", fp.Flavor, fp)
		}
	}
	if p.TotalMonthlyUSD.Sign() < 0 || p.UnallocatedMonthlyUSD.Sign() < 0 || p.CeilingMonthlyUSD.Cmp(p.TotalMonthlyUSD) < 0 {
		t.Errorf("total %s, unallocated %s, ceiling %s", p.TotalMonthlyUSD, p.UnallocatedMonthlyUSD, p.CeilingMonthlyUSD)
	}
}

// checkEnvelope fails t when pp's envelope breaks its definition: fixed at
// the target, replacement and burst within what the pool declares and
// nodes.max, and a ceiling no lower than the cost.
func checkEnvelope(t *testing.T, pool *schema.Pool, pp PoolPlan) {
	t.Helper()
	e := pp.Envelope
	var repairMax, burstMax int64
	if pool.Repair != nil {
		repairMax = pool.Repair.MaxNodes
	}
	if pool.Burst != nil {
		burstMax = pool.Burst.MaxNodes
	}
	if e.FixedNodes != pp.NodesTarget || e.ReplacementNodes < 0 || e.ReplacementNodes > repairMax || e.BurstNodes < 0 || e.BurstNodes > burstMax ||
		e.MostNodes != e.FixedNodes+e.ReplacementNodes+e.BurstNodes || e.MostNodes > max(pool.MaxNodes, pp.NodesTarget) ||
		e.Elastic != (pool.Repair != nil || pool.Burst != nil) {
		t.Errorf("pool %s: envelope %+v of target %d, nodes.max %d, repair %d, burst %d", pp.Pool, e, pp.NodesTarget, pool.MaxNodes, repairMax, burstMax)
	}
	if e.CeilingMonthlyUSD.Cmp(pp.MonthlyUSD) < 0 || !e.Elastic && e.CeilingMonthlyUSD.Cmp(pp.MonthlyUSD) != 0 {
		t.Errorf("pool %s: ceiling %s, monthly %s", pp.Pool, e.CeilingMonthlyUSD, pp.MonthlyUSD)
	}
}

// FuzzPlan plans random valid configurations up to every bound of the schema,
// some pools with repair or burst: no panic, no negative node or GPU count, no
// negative cost, envelopes as defined, and the same plan twice.
func FuzzPlan(f *testing.F) {
	for seed := range uint64(32) {
		f.Add(seed, seed*7919)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		cfg := schematest.RandomConfig(rand.New(rand.NewPCG(a, b)), schematest.MaxNodes)
		r := rand.New(rand.NewPCG(a+1, b))
		for _, n := range cfg.PoolNames() {
			if r.IntN(2) == 0 {
				cfg.Pools[n].Repair = &schema.Repair{MaxNodes: schematest.Pick(r, 0, schematest.MaxNodes)}
			}
			if r.IntN(2) == 0 {
				cfg.Pools[n].Burst = &schema.Burst{MaxNodes: schematest.Pick(r, 1, schematest.MaxNodes)}
			}
		}
		p := Build(cfg)
		checkPlan(t, cfg, p)
		if again := Build(cfg); again.TotalMonthlyUSD.Cmp(p.TotalMonthlyUSD) != 0 {
			t.Errorf("planned twice: %s, then %s", p.TotalMonthlyUSD, again.TotalMonthlyUSD)
		}
		obs := map[schema.PoolName]Observed{}
		r = rand.New(rand.NewPCG(b, a))
		for n := range cfg.Pools {
			obs[n] = Observed{Nodes: schematest.Pick(r, -1, schematest.MaxNodes), UsableNodes: schematest.Pick(r, -1, schematest.MaxNodes), HealthyGPUs: schematest.Pick(r, -1, schematest.MaxNodes*schematest.MaxGPUsPerNode)}
		}
		withObs, _ := WithObserved(cfg, p, obs)
		checkPlan(t, cfg, withObs)
	})
}
