package recommend

import (
	"fmt"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// BurstOption weighs a burst pool's envelope against its fixed nodes: the
// pool planned FewerNodes fewer nodes than the recommended quotas give it,
// taken from what its headroom and spare nodes add above them (at most
// burst.maxNodes), its burst covering the peaks instead. Every nominal GPU
// stays on a fixed node: burst serves only gangs within quota, so fewer
// nodes below the quotas would break their promise rather than move it to
// burst. Expected monthly costs are the fleet's: its fixed monthly cost plus
// the replay's burst cost spread over a month (planner.HoursPerMonth over
// the replay's makespan); Planned with the recommended fleet, Option with
// the pool's fewer nodes (the other pools as planned).
type BurstOption struct {
	FewerNodes int64 `json:"fewer_nodes"`
	// Nodes is the pool's fixed size in the option.
	Nodes int64 `json:"nodes"`
	// BurstNodeHours and BurstUSD are the pool's burst in the option's
	// replay (over the workload's span).
	BurstNodeHours float64          `json:"burst_node_hours"`
	BurstUSD       quantity.Decimal `json:"burst_usd"`
	// ExpectedMonthlyUSDPlanned and ExpectedMonthlyUSD are the fleet's fixed
	// plus burst cost a month, planned and with the option.
	ExpectedMonthlyUSDPlanned quantity.Decimal `json:"expected_monthly_usd_planned"`
	ExpectedMonthlyUSD        quantity.Decimal `json:"expected_monthly_usd"`
	// MeetsTargets: every team and flavor that meets its target with the
	// recommended fleet meets it in the option's replay too; Missed names
	// those that do not (team/flavor).
	MeetsTargets bool     `json:"meets_targets"`
	Missed       []string `json:"missed,omitempty"`
	// Chosen: the option meets the targets and costs less than planned.
	Chosen bool `json:"chosen"`
}

// burstBuffer is how many of pool's planned nodes its headroom and spare
// nodes add above the quotas it carries, at most its burst's maxNodes: the
// nodes burst may stand in for.
func burstBuffer(p *schema.Pool, pp *planner.PoolPlan) int64 {
	if p.Burst == nil || p.GPUsPerNode <= 0 {
		return 0
	}
	need := max(p.MinNodes, min((pp.AssignedGPUs+p.GPUsPerNode-1)/p.GPUsPerNode, p.MaxNodes))
	return min(p.Burst.MaxNodes, max(0, pp.NodesTarget-need))
}

// monthly spreads a replay's burst cost over a month.
func monthly(b *sim.BurstReport, spanS float64) quantity.Decimal {
	ms := int64(spanS * 1000)
	if b == nil || ms <= 0 {
		return quantity.Decimal{}
	}
	return b.CostUSD.Mul(quantity.Frac(planner.HoursPerMonth*3600*1000, ms))
}

// burstOptions weighs, for every burst pool with a buffer, its buffer's
// nodes against burst (one replay per pool, all at once; a second at half
// the nodes for the pools whose first misses a target), and writes the
// options onto res.Pools.
func (s *searcher) burstOptions(res *Result, q vector, after *outcome) error {
	w := s.w
	type trial struct {
		pool  schema.PoolName
		fewer int64
		out   *outcome
		err   error
	}
	var round []*trial
	for _, pp := range after.plan.Pools {
		if k := burstBuffer(w.cfg.Pools[pp.Pool], &pp); k > 0 {
			round = append(round, &trial{pool: pp.Pool, fewer: k})
		}
	}
	planned := after.plan.TotalMonthlyUSD.Add(monthly(after.burst, after.spanS)).Round(2)
	for len(round) > 0 {
		s.b.expect(len(round))
		s.run(len(round), func(i int) {
			t := round[i]
			t.out, t.err = w.replayFewer(q, t.pool, t.fewer)
		})
		var next []*trial
		for _, t := range round {
			if t.err != nil {
				return fmt.Errorf("replaying pool %s at %d nodes fewer: %w", t.pool, t.fewer, t.err)
			}
			o := s.option(t.pool, t.fewer, after, t.out, planned)
			if !o.MeetsTargets && t.fewer > 1 {
				next = append(next, &trial{pool: t.pool, fewer: t.fewer / 2})
			}
			for i := range res.Pools {
				if p := &res.Pools[i]; p.Pool == t.pool && (p.BurstOption == nil || o.MeetsTargets) {
					p.BurstOption = o
				}
			}
		}
		round = next
	}
	return nil
}

// option judges the replay alt of pool planned fewer nodes fewer against
// the recommended fleet's (after, costing planned a month).
func (s *searcher) option(pool schema.PoolName, fewer int64, after, alt *outcome, planned quantity.Decimal) *BurstOption {
	pp := after.plan.Pool(pool)
	p := s.w.cfg.Pools[pool]
	o := &BurstOption{FewerNodes: fewer, Nodes: pp.NodesTarget - fewer, ExpectedMonthlyUSDPlanned: planned, MeetsTargets: true}
	if alt.burst != nil {
		for _, bp := range alt.burst.Pools {
			if bp.Pool == string(pool) {
				o.BurstNodeHours, o.BurstUSD = bp.NodeHours, bp.CostUSD
			}
		}
	}
	o.ExpectedMonthlyUSD = after.plan.TotalMonthlyUSD.Sub(pp.MonthlyUSD).Add(planner.PoolCost(p, o.Nodes)).Add(monthly(alt.burst, alt.spanS)).Round(2)
	for _, pr := range s.w.pairs {
		if after.pass[pr] && !alt.pass[pr] {
			o.MeetsTargets = false
			o.Missed = append(o.Missed, fmt.Sprintf("%s/%s", pr.team, pr.flavor))
		}
	}
	o.Chosen = o.MeetsTargets && o.ExpectedMonthlyUSD.Cmp(planned) < 0
	return o
}
