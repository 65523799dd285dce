package schematest

import (
	"fmt"
	"math/rand/v2"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Upper bounds of the schema (pool.cue, team.cue): the generator reaches them.
const (
	MaxGPUsPerNode = 128
	MaxNodes       = 100000
	MaxGPUs        = 10000000
	MaxPrice       = 1000000
	MaxHeadroom    = 10
)

// Pick returns a value in [lo, hi], often one of the ends: bounds are where
// arithmetic breaks.
func Pick(r *rand.Rand, lo, hi int64) int64 {
	switch r.IntN(4) {
	case 0:
		return lo
	case 1:
		return hi
	}
	return lo + r.Int64N(hi-lo+1)
}

// Tiers and Levels are those of every RandomConfig: tiers highest first, and
// the topology levels of its pools that have one.
var (
	Tiers  = []schema.TierName{"critical", "production", "research"}
	Levels = []string{"block", "rack", "host"}
)

// RandomConfig returns a configuration that the schema accepts (every number
// within its bound, the fleet within schema.MaxFleetNodes), drawn from r; a
// pool's nodes.max is at most maxPoolNodes. References may dangle, as they may
// in a repository the policies reject: the planner must still not fail.
func RandomConfig(r *rand.Rand, maxPoolNodes int64) *schema.Config {
	cfg := &schema.Config{
		Clusters: map[schema.ClusterName]*schema.Cluster{"c": {Name: "c", Provider: schema.ProviderKwok}},
		Pools:    map[schema.PoolName]*schema.Pool{}, Tiers: map[schema.TierName]*schema.Tier{},
		Cohorts: map[schema.CohortName]*schema.Cohort{"co": {Name: "co"}}, Teams: map[schema.TeamName]*schema.Team{},
	}
	for i, n := range Tiers {
		cfg.Tiers[n] = &schema.Tier{Name: n, Priority: int64(1000 - 100*i), Preemptible: i > 0 && r.IntN(2) == 0, BorrowOnly: i == len(Tiers)-1 && r.IntN(2) == 0}
	}
	flavors := []schema.Flavor{"f0", "f1", "f2"}
	price := func() quantity.Decimal { return quantity.Frac(Pick(r, 0, MaxPrice*100), 100) }
	for i := range 1 + r.IntN(5) {
		minN, maxN := Pick(r, 0, maxPoolNodes), Pick(r, 0, maxPoolNodes)
		if minN > maxN {
			minN, maxN = maxN, minN
		}
		p := &schema.Pool{
			Name: schema.PoolName(fmt.Sprintf("p%d", i)), Cluster: "c", Flavor: flavors[r.IntN(len(flavors))],
			GPUsPerNode: Pick(r, 1, MaxGPUsPerNode), MinNodes: minN, MaxNodes: maxN, SpareNodes: Pick(r, 0, maxPoolNodes),
			Headroom: quantity.Frac(Pick(r, 0, MaxHeadroom*100), 100),
			Price:    schema.Price{OnDemandPerNodeHour: price(), CommittedNodes: Pick(r, 0, maxPoolNodes)},
		}
		if r.IntN(2) == 0 {
			p.Price.CommittedPerNodeHour, p.Price.HasCommittedPrice = price(), true
		}
		if r.IntN(2) == 0 {
			p.Topology = &schema.Topology{Levels: Levels, Sizes: map[string]int64{"rack": Pick(r, 1, 8), "block": Pick(r, 1, 4)}}
		}
		cfg.Pools[p.Name] = p
	}
	for i := range 1 + r.IntN(5) {
		t := &schema.Team{Name: schema.TeamName(fmt.Sprintf("t%d", i)), CostCenter: fmt.Sprintf("cc%d", r.IntN(3)),
			Quota: map[schema.Flavor]schema.Quota{}, Weight: quantity.Int(Pick(r, 1, 1000000))}
		if r.IntN(2) == 0 {
			t.Cohort = "co"
		}
		for _, f := range flavors[:1+r.IntN(len(flavors))] {
			q := schema.Quota{Nominal: Pick(r, 0, MaxGPUs)}
			if r.IntN(2) == 0 {
				b := Pick(r, 0, MaxGPUs)
				q.BorrowingLimit = &b
			}
			t.Quota[f] = q
		}
		cfg.Teams[t.Name] = t
	}
	return cfg
}
