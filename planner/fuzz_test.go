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
	if p.TotalMonthlyUSD.Sign() < 0 || p.UnallocatedMonthlyUSD.Sign() < 0 {
		t.Errorf("total %s, unallocated %s", p.TotalMonthlyUSD, p.UnallocatedMonthlyUSD)
	}
}

// FuzzPlan plans random valid configurations up to every bound of the schema:
// no panic, no negative node or GPU count, no negative cost, and the same plan
// twice.
func FuzzPlan(f *testing.F) {
	for seed := range uint64(32) {
		f.Add(seed, seed*7919)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		cfg := schematest.RandomConfig(rand.New(rand.NewPCG(a, b)), schematest.MaxNodes)
		p := Build(cfg)
		checkPlan(t, cfg, p)
		if again := Build(cfg); again.TotalMonthlyUSD.Cmp(p.TotalMonthlyUSD) != 0 {
			t.Errorf("planned twice: %s, then %s", p.TotalMonthlyUSD, again.TotalMonthlyUSD)
		}
		obs := map[schema.PoolName]Observed{}
		r := rand.New(rand.NewPCG(b, a))
		for n := range cfg.Pools {
			obs[n] = Observed{Nodes: schematest.Pick(r, -1, schematest.MaxNodes), UsableNodes: schematest.Pick(r, -1, schematest.MaxNodes), HealthyGPUs: schematest.Pick(r, -1, schematest.MaxNodes*schematest.MaxGPUsPerNode)}
		}
		withObs, _ := WithObserved(cfg, p, obs)
		checkPlan(t, cfg, withObs)
	})
}
