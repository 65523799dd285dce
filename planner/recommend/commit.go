package recommend

import (
	"cmp"
	"math"
	"slices"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// usage is what a replay used of the fleet, for pricing commitments.
type usage struct {
	// horizonS is the replay's span: from the first submission to the last end.
	horizonS float64
	// levels[pool][k] is how many seconds exactly k nodes of the pool were busy
	// (running at least one job); they add up to horizonS.
	levels map[schema.PoolName][]float64
	// hourly[flavor][h] is the GPU-hours used in hour h of the horizon.
	hourly map[schema.Flavor][]float64
}

type interval struct{ from, to float64 }

// measure derives the usage of a replay. A job counts from the start to the end
// of its last placement (the simulator's report keeps only that one).
func measure(layout []fleet.Node, rep *sim.Report) *usage {
	u := &usage{levels: map[schema.PoolName][]float64{}, hourly: map[schema.Flavor][]float64{}}
	node := make(map[string]*fleet.Node, len(layout))
	for i := range layout {
		node[layout[i].Name] = &layout[i]
	}
	first, last := math.Inf(1), math.Inf(-1)
	for _, j := range rep.Jobs {
		first = math.Min(first, j.Submit)
		if j.End != nil {
			last = math.Max(last, *j.End)
		}
	}
	if !(last > first) {
		return u
	}
	u.horizonS = last - first
	hours := int(math.Ceil(u.horizonS / 3600))
	busy := map[string][]interval{}
	for _, j := range rep.Jobs {
		if j.Start == nil || j.End == nil || len(j.Nodes) == 0 || *j.End <= *j.Start {
			continue
		}
		from, to := *j.Start-first, *j.End-first
		for _, n := range j.Nodes {
			busy[n] = append(busy[n], interval{from, to})
		}
		n := node[j.Nodes[0]]
		if n == nil {
			continue
		}
		h := u.hourly[n.Flavor]
		if h == nil {
			h = make([]float64, hours)
			u.hourly[n.Flavor] = h
		}
		for b := int(from / 3600); b < hours && float64(b)*3600 < to; b++ {
			lo, hi := math.Max(from, float64(b)*3600), math.Min(to, float64(b+1)*3600)
			h[b] += float64(j.GPUs) * (hi - lo) / 3600
		}
	}
	type edge struct {
		at    float64
		delta int
	}
	edges := map[schema.PoolName][]edge{}
	for name, ivs := range busy {
		n := node[name]
		if n == nil {
			continue
		}
		for _, iv := range union(ivs) {
			edges[n.Pool] = append(edges[n.Pool], edge{iv.from, 1}, edge{iv.to, -1})
		}
	}
	for _, n := range layout {
		if _, ok := u.levels[n.Pool]; !ok {
			u.levels[n.Pool] = []float64{u.horizonS}
		}
	}
	for pool, es := range edges {
		slices.SortFunc(es, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
		var lv []float64
		at, k := 0.0, 0
		for _, e := range es {
			for len(lv) <= k {
				lv = append(lv, 0)
			}
			lv[k] += e.at - at
			at, k = e.at, k+e.delta
		}
		for len(lv) <= k {
			lv = append(lv, 0)
		}
		lv[k] += u.horizonS - at
		u.levels[pool] = lv
	}
	return u
}

// union merges overlapping intervals.
func union(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.from, b.from) })
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.from <= out[n-1].to {
			out[n-1].to = math.Max(out[n-1].to, iv.to)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// Commitment is the committed (reserved) node count of a pool that minimises
// its monthly cost for the replayed use: committed nodes are paid every hour,
// on-demand nodes only while they run work (or nodes.min holds them). A
// committed node pays off when it would be busy more than BreakEvenUtilization
// of the time (the committed over the on-demand price).
type Commitment struct {
	Pool                 schema.PoolName  `json:"pool"`
	CommittedNodesBefore int64            `json:"committed_nodes_before"`
	CommittedNodesAfter  int64            `json:"committed_nodes_after"`
	MonthlyUSDSaved      quantity.Decimal `json:"monthly_usd_saved"`
	// MonthlyUSDBefore and MonthlyUSDAfter price the replayed use with the
	// declared and the recommended committed count.
	MonthlyUSDBefore     quantity.Decimal `json:"monthly_usd_before"`
	MonthlyUSDAfter      quantity.Decimal `json:"monthly_usd_after"`
	BreakEvenUtilization float64          `json:"break_even_utilization"`
	// Utilization[k] is the share of the time at least k+1 of the pool's nodes
	// were busy: the use node k+1 would have had as a committed node.
	Utilization []float64 `json:"utilization"`
}

// profile is one pool's busy time per level in exact seconds (to the
// microsecond), levels below nodes.min raised to it: those nodes run anyway.
type profile struct {
	seconds []quantity.Decimal // seconds[k]: time with k nodes billed
	tail    []quantity.Decimal // tail[c]: time with more than c nodes billed
	total   quantity.Decimal
}

func newProfile(levels []float64, minNodes int64) profile {
	var p profile
	for k, s := range levels {
		lvl := max(int64(k), minNodes)
		for int64(len(p.seconds)) <= lvl {
			p.seconds = append(p.seconds, quantity.Decimal{})
		}
		d := quantity.Frac(int64(math.Round(s*1e6)), 1e6)
		p.seconds[lvl] = p.seconds[lvl].Add(d)
		p.total = p.total.Add(d)
	}
	p.tail = make([]quantity.Decimal, len(p.seconds))
	for k := len(p.seconds) - 2; k >= 0; k-- {
		p.tail[k] = p.tail[k+1].Add(p.seconds[k+1])
	}
	return p
}

// above is the time more than c nodes were billed.
func (p profile) above(c int64) quantity.Decimal {
	if c < 0 || c >= int64(len(p.tail)) {
		return quantity.Decimal{}
	}
	return p.tail[c]
}

// monthly is the cost of the profile with c committed nodes, scaled to a month:
// 730 h / horizon * (c * committed * horizon + onDemand * sum over time of
// max(0, billed nodes - c)).
func (p profile) monthly(price schema.Price, c int64) quantity.Decimal {
	if p.total.IsZero() {
		return price.CommittedPerNodeHour.MulInt(c * planner.HoursPerMonth)
	}
	var onDemand quantity.Decimal // node-seconds
	for k := c + 1; k < int64(len(p.seconds)); k++ {
		onDemand = onDemand.Add(p.seconds[k].MulInt(k - c))
	}
	perHour := price.CommittedPerNodeHour.MulInt(c).Add(price.OnDemandPerNodeHour.Mul(onDemand).Quo(p.total))
	return perHour.MulInt(planner.HoursPerMonth)
}

// best is the committed count in [0, limit] of least monthly cost. Adding node
// c+1 costs committed*horizon and saves onDemand*above(c): the cost is convex
// in c, so the least cost is where that stops paying. Among equal costs the
// declared count wins, else the smallest.
func (p profile) best(price schema.Price, limit int64) int64 {
	commit := price.CommittedPerNodeHour.Mul(p.total)
	lo := int64(-1) // first c where one more node no longer saves
	hi := limit     // first c where one more node costs more
	for c := int64(0); c < limit; c++ {
		d := commit.Cmp(price.OnDemandPerNodeHour.Mul(p.above(c)))
		if d >= 0 && lo < 0 {
			lo = c
		}
		if d > 0 {
			hi = c
			break
		}
	}
	if lo < 0 {
		lo = limit
	}
	if declared := price.CommittedNodes; declared >= lo && declared <= hi {
		return declared
	}
	return lo
}

// commitments recommends the committed nodes of each pool with a committed
// price, from the use of the recommended fleet.
func commitments(cfg *schema.Config, plan *planner.Plan, u *usage) []Commitment {
	var out []Commitment
	for _, pp := range plan.Pools {
		pool := cfg.Pools[pp.Pool]
		price := pool.Price
		if !price.HasCommittedPrice || price.OnDemandPerNodeHour.IsZero() {
			continue
		}
		prof := newProfile(u.levels[pp.Pool], min(pool.MinNodes, pp.NodesTarget))
		after := prof.best(price, pp.NodesTarget)
		c := Commitment{Pool: pp.Pool, CommittedNodesBefore: price.CommittedNodes, CommittedNodesAfter: after,
			MonthlyUSDBefore: prof.monthly(price, price.CommittedNodes), MonthlyUSDAfter: prof.monthly(price, after),
			BreakEvenUtilization: round(price.CommittedPerNodeHour.Quo(price.OnDemandPerNodeHour).Float64(), 4)}
		c.MonthlyUSDSaved = c.MonthlyUSDBefore.Sub(c.MonthlyUSDAfter)
		if !prof.total.IsZero() {
			for k := int64(0); k < pp.NodesTarget && prof.above(k).Sign() > 0; k++ {
				c.Utilization = append(c.Utilization, round(prof.above(k).Quo(prof.total).Float64(), 4))
			}
		}
		out = append(out, c)
	}
	return out
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
