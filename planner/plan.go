package planner

import (
	"cmp"
	"maps"
	"slices"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// HoursPerMonth is the number of hours a monthly cost is made of.
const HoursPerMonth = 730

// Plan is the capacity and cost plan of one configuration.
type Plan struct {
	Pools       []PoolPlan
	Teams       []TeamPlan
	CostCenters []CostCenterPlan
	Flavors     []FlavorPlan
	// TotalMonthlyUSD is the cost of every pool; it equals the sum of the teams'
	// costs plus UnallocatedMonthlyUSD, to the cent.
	TotalMonthlyUSD quantity.Decimal
	// UnallocatedMonthlyUSD is what pools cost that no team's quota asks for.
	UnallocatedMonthlyUSD quantity.Decimal
	// CeilingMonthlyUSD is the sum of the pools' envelope ceilings: the most
	// the pools may cost a month with every repair and burst at its most. It
	// equals TotalMonthlyUSD when no pool declares repair or burst.
	CeilingMonthlyUSD quantity.Decimal
}

// PoolPlan is one pool's target size and cost.
type PoolPlan struct {
	Pool           schema.PoolName
	Cluster        schema.ClusterName
	Flavor         schema.Flavor
	GPUsPerNode    int64
	AssignedGPUs   int64 // the part of the flavor's nominal quota this pool carries
	NodesTarget    int64
	GPUsTarget     int64
	CommittedNodes int64
	OnDemandNodes  int64
	MonthlyUSD     quantity.Decimal
	// AtMax reports that the pool is held at nodes.max although its flavor asks for more.
	AtMax bool
	// ReplacementNodes are added (within nodes.max) for nodes the cluster shows
	// unusable, so that the healthy capacity covers what the quotas assign the
	// pool (see WithObserved); they are part of NodesTarget.
	ReplacementNodes int64
	// Envelope is how far the pool's repair and burst may take it past
	// NodesTarget, and its monthly cost ceiling.
	Envelope Envelope
}

// TeamPlan is one team's quota and monthly cost.
type TeamPlan struct {
	Team       schema.TeamName
	CostCenter string
	Quota      map[schema.Flavor]int64
	MonthlyUSD quantity.Decimal
	// ByPool is the team's cost in each pool that carries its flavors.
	ByPool map[schema.PoolName]quantity.Decimal
}

// CostCenterPlan sums the cost of the teams charged to one cost centre.
type CostCenterPlan struct {
	CostCenter string
	Teams      []schema.TeamName
	MonthlyUSD quantity.Decimal
}

// FlavorPlan compares a flavor's demand with what its pools can carry.
type FlavorPlan struct {
	Flavor schema.Flavor
	// NominalGPUs is the sum of the teams' nominal quotas.
	NominalGPUs int64
	// TargetGPUs are the GPUs of the pools at their target size.
	TargetGPUs int64
	// MaxGPUs are the GPUs of the pools at nodes.max.
	MaxGPUs int64
	// UnplacedGPUs is nominal quota no pool can carry with its headroom and spare
	// nodes even at nodes.max.
	UnplacedGPUs int64
	Pools        []schema.PoolName
}

// NoCostCenter is how a team without a cost centre is grouped.
const NoCostCenter = "(none)"

// Build computes the plan of cfg. See docs/contracts.md, "Sizing and cost": for a pool
// that alone carries a flavor, nodes = clamp(ceil(nominal*(1+headroom)/gpusPerNode)
// + spareNodes, min, max). Where several pools carry one flavor, the demand fills
// first the nodes that are paid for anyway (committed, or held by nodes.min), then
// the cheapest on-demand capacity per GPU.
func Build(cfg *schema.Config) *Plan {
	p := &Plan{}
	pools := map[schema.PoolName]*PoolPlan{}
	for _, f := range cfg.Flavors() {
		fp, pps := sizeFlavor(cfg, f)
		p.Flavors = append(p.Flavors, fp)
		for i := range pps {
			pools[pps[i].Pool] = &pps[i]
		}
	}
	for _, name := range cfg.PoolNames() {
		p.Pools = append(p.Pools, *pools[name])
	}
	p.cost(cfg)
	return p
}

// cost prices the pools at their targets and their envelopes' ceilings, and
// shares the cost among teams and cost centres.
func (p *Plan) cost(cfg *schema.Config) {
	p.TotalMonthlyUSD, p.CeilingMonthlyUSD = quantity.Decimal{}, quantity.Decimal{}
	for i := range p.Pools {
		pp := &p.Pools[i]
		pool := cfg.Pools[pp.Pool]
		pp.GPUsTarget = pp.NodesTarget * pp.GPUsPerNode
		pp.CommittedNodes = min(pool.Price.CommittedNodes, pp.NodesTarget)
		pp.OnDemandNodes = pp.NodesTarget - pp.CommittedNodes
		pp.MonthlyUSD = PoolCost(pool, pp.NodesTarget)
		p.TotalMonthlyUSD = p.TotalMonthlyUSD.Add(pp.MonthlyUSD)
		pp.Envelope = EnvelopeOf(pool, pp.NodesTarget)
		p.CeilingMonthlyUSD = p.CeilingMonthlyUSD.Add(pp.Envelope.CeilingMonthlyUSD)
	}
	p.Teams, p.UnallocatedMonthlyUSD = teamCosts(cfg, p)
	p.CostCenters = costCenters(p.Teams)
}

// Pool returns the plan of pool name, or nil.
func (p *Plan) Pool(name schema.PoolName) *PoolPlan {
	for i := range p.Pools {
		if p.Pools[i].Pool == name {
			return &p.Pools[i]
		}
	}
	return nil
}

// Team returns the plan of team name, or nil.
func (p *Plan) Team(name schema.TeamName) *TeamPlan {
	for i := range p.Teams {
		if p.Teams[i].Team == name {
			return &p.Teams[i]
		}
	}
	return nil
}

// Flavor returns the plan of flavor f, or nil.
func (p *Plan) Flavor(f schema.Flavor) *FlavorPlan {
	for i := range p.Flavors {
		if p.Flavors[i].Flavor == f {
			return &p.Flavors[i]
		}
	}
	return nil
}

// NodesTargets returns every pool's target node count.
func (p *Plan) NodesTargets() map[schema.PoolName]int64 {
	out := make(map[schema.PoolName]int64, len(p.Pools))
	for _, pp := range p.Pools {
		out[pp.Pool] = pp.NodesTarget
	}
	return out
}

// Carry returns the most GPUs of demand pool p can carry within nodes nodes: the
// largest d with ceil(d*(1+headroom)/gpusPerNode) + spareNodes <= nodes.
func Carry(p *schema.Pool, nodes int64) int64 {
	free := nodes - p.SpareNodes
	if free <= 0 || p.GPUsPerNode <= 0 {
		return 0
	}
	return quantity.Int(free * p.GPUsPerNode).Quo(quantity.Int(1).Add(p.Headroom)).Floor()
}

// NodesFor returns the nodes pool p needs to carry demand GPUs, before clamping:
// ceil(demand*(1+headroom)/gpusPerNode) + spareNodes.
func NodesFor(p *schema.Pool, demand int64) int64 {
	if p.GPUsPerNode <= 0 {
		return p.SpareNodes
	}
	return quantity.Int(demand).Mul(quantity.Int(1).Add(p.Headroom)).Quo(quantity.Int(p.GPUsPerNode)).Ceil() + p.SpareNodes
}

func clamp(n, lo, hi int64) int64 { return max(lo, min(n, hi)) }

func sizeFlavor(cfg *schema.Config, f schema.Flavor) (FlavorPlan, []PoolPlan) {
	fp := FlavorPlan{Flavor: f}
	for _, name := range cfg.TeamNames() {
		fp.NominalGPUs += cfg.Teams[name].Quota[f].Nominal
	}
	pools := cfg.PoolsOf(f)
	assigned := make([]int64, len(pools))
	remaining := fp.NominalGPUs
	fill := func(order []int, nodes func(*schema.Pool) int64) {
		for _, i := range order {
			if remaining == 0 {
				return
			}
			room := Carry(pools[i], nodes(pools[i])) - assigned[i]
			if take := min(remaining, room); take > 0 {
				assigned[i] += take
				remaining -= take
			}
		}
	}
	byName := make([]int, len(pools))
	for i := range byName {
		byName[i] = i
	}
	// Nodes paid for anyway: committed ones and those nodes.min holds.
	fill(byName, func(p *schema.Pool) int64 { return min(max(p.Price.CommittedNodes, p.MinNodes), p.MaxNodes) })
	// Then the cheapest on-demand GPUs.
	byPrice := slices.Clone(byName)
	slices.SortStableFunc(byPrice, func(a, b int) int {
		pa := pools[a].Price.OnDemandPerNodeHour.Quo(quantity.Int(pools[a].GPUsPerNode))
		pb := pools[b].Price.OnDemandPerNodeHour.Quo(quantity.Int(pools[b].GPUsPerNode))
		return pa.Cmp(pb)
	})
	fill(byPrice, func(p *schema.Pool) int64 { return p.MaxNodes })
	fp.UnplacedGPUs = remaining

	out := make([]PoolPlan, len(pools))
	for i, pool := range pools {
		n := clamp(NodesFor(pool, assigned[i]), pool.MinNodes, pool.MaxNodes)
		if remaining > 0 {
			// The flavor asks for more than its pools can carry: every pool is at its max,
			// as the single-pool formula's clamp says.
			n = pool.MaxNodes
		}
		committed := min(pool.Price.CommittedNodes, n)
		out[i] = PoolPlan{
			Pool: pool.Name, Cluster: pool.Cluster, Flavor: f, GPUsPerNode: pool.GPUsPerNode,
			AssignedGPUs: assigned[i], NodesTarget: n, GPUsTarget: n * pool.GPUsPerNode,
			CommittedNodes: committed, OnDemandNodes: n - committed,
			AtMax: remaining > 0 || (n == pool.MaxNodes && NodesFor(pool, assigned[i]) > pool.MaxNodes),
		}
		fp.TargetGPUs += out[i].GPUsTarget
		fp.MaxGPUs += pool.MaxNodes * pool.GPUsPerNode
		fp.Pools = append(fp.Pools, pool.Name)
	}
	return fp, out
}

// PoolCost is pool p's monthly cost at nodes nodes: 730 * (committedNodes *
// committedPerNodeHour + max(0, nodes - committedNodes) * onDemandPerNodeHour):
// committed nodes are paid whether used or not.
func PoolCost(p *schema.Pool, nodes int64) quantity.Decimal {
	committed := p.Price.CommittedPerNodeHour.MulInt(p.Price.CommittedNodes)
	onDemand := p.Price.OnDemandPerNodeHour.MulInt(max(0, nodes-p.Price.CommittedNodes))
	return committed.Add(onDemand).MulInt(HoursPerMonth)
}

// teamCosts shares each pool's cost among the teams by their nominal share of the
// pool's flavor. Shares are rounded to the cent by the largest-remainder method, so
// that the teams' costs of a pool add up to the pool's cost exactly.
func teamCosts(cfg *schema.Config, p *Plan) ([]TeamPlan, quantity.Decimal) {
	teams := map[schema.TeamName]*TeamPlan{}
	names := cfg.TeamNames()
	for _, n := range names {
		t := cfg.Teams[n]
		tp := &TeamPlan{Team: n, CostCenter: t.CostCenter, Quota: map[schema.Flavor]int64{}, ByPool: map[schema.PoolName]quantity.Decimal{}}
		for f, q := range t.Quota {
			tp.Quota[f] = q.Nominal
		}
		teams[n] = tp
	}
	var unallocated quantity.Decimal
	for _, pp := range p.Pools {
		fp := p.Flavor(pp.Flavor)
		if fp == nil || fp.NominalGPUs == 0 {
			unallocated = unallocated.Add(pp.MonthlyUSD)
			continue
		}
		weights := make([]int64, len(names))
		for i, n := range names {
			weights[i] = cfg.Teams[n].Quota[pp.Flavor].Nominal
		}
		for i, cents := range apportion(pp.MonthlyUSD.Cents(), weights, fp.NominalGPUs) {
			if weights[i] == 0 {
				continue
			}
			tp := teams[names[i]]
			c := quantity.FromCents(cents)
			tp.ByPool[pp.Pool] = c
			tp.MonthlyUSD = tp.MonthlyUSD.Add(c)
		}
		// Rounding the pool to cents can differ from its exact cost by under a cent.
		unallocated = unallocated.Add(pp.MonthlyUSD.Sub(quantity.FromCents(pp.MonthlyUSD.Cents())))
	}
	out := make([]TeamPlan, 0, len(names))
	for _, n := range names {
		out = append(out, *teams[n])
	}
	return out, unallocated
}

// apportion splits total cents by weights (summing to sum) with the largest-remainder
// method: every share is floor(total*w/sum) and the leftover cents go to the largest
// remainders, ties to the earlier index.
func apportion(total int64, weights []int64, sum int64) []int64 {
	out := make([]int64, len(weights))
	type rem struct {
		i int
		r quantity.Decimal
	}
	var rems []rem
	left := total
	for i, w := range weights {
		exact := quantity.Int(total).Mul(quantity.Frac(w, sum))
		out[i] = exact.Floor()
		left -= out[i]
		rems = append(rems, rem{i, exact.Sub(quantity.Int(out[i]))})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Or(b.r.Cmp(a.r), cmp.Compare(a.i, b.i)) })
	for k := 0; left > 0 && k < len(rems); k++ {
		if weights[rems[k].i] > 0 {
			out[rems[k].i]++
			left--
		}
	}
	return out
}

func costCenters(teams []TeamPlan) []CostCenterPlan {
	by := map[string]*CostCenterPlan{}
	for _, t := range teams {
		cc := cmp.Or(t.CostCenter, NoCostCenter)
		if by[cc] == nil {
			by[cc] = &CostCenterPlan{CostCenter: cc}
		}
		by[cc].Teams = append(by[cc].Teams, t.Team)
		by[cc].MonthlyUSD = by[cc].MonthlyUSD.Add(t.MonthlyUSD)
	}
	out := make([]CostCenterPlan, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[k])
	}
	return out
}
