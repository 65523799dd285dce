package planner

import (
	"maps"
	"slices"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Diff is what changes from a base plan (the target branch) to a head plan (the
// pull request).
type Diff struct {
	// Quotas lists every team and flavor whose nominal quota changes.
	Quotas []QuotaChange
	// Pools lists every pool whose node count, cost or cost ceiling changes,
	// added or removed.
	Pools []PoolChange
	// Teams and CostCenters list every monthly cost that changes.
	Teams       []CostChange
	CostCenters []CostChange
	Before      quantity.Decimal
	After       quantity.Decimal
	Delta       quantity.Decimal
	// CeilingBefore and CeilingAfter are the plans' CeilingMonthlyUSD: what
	// the pools may cost a month at most, their repair and burst envelopes
	// full; CeilingDelta = CeilingAfter − CeilingBefore.
	CeilingBefore quantity.Decimal
	CeilingAfter  quantity.Decimal
	CeilingDelta  quantity.Decimal
	// Approvals are filled in by the policies: who must approve the change, and why.
	Approvals []Approval
}

// QuotaChange is a team's nominal quota of one flavor, before and after.
type QuotaChange struct {
	Team          schema.TeamName
	Flavor        schema.Flavor
	NominalBefore int64
	NominalAfter  int64
}

// PoolChange is a pool's size, cost and envelope's ceiling, before and after. A
// pool that is added has zero before, one that is removed zero after.
type PoolChange struct {
	Pool             schema.PoolName
	Flavor           schema.Flavor
	NodesBefore      int64
	NodesAfter       int64
	MonthlyUSDBefore quantity.Decimal
	MonthlyUSDAfter  quantity.Decimal
	// CeilingMonthlyUSDBefore and CeilingMonthlyUSDAfter are the pool's
	// Envelope.CeilingMonthlyUSD.
	CeilingMonthlyUSDBefore quantity.Decimal
	CeilingMonthlyUSDAfter  quantity.Decimal
}

// CostChange is a monthly cost before and after.
type CostChange struct {
	Name   string
	Before quantity.Decimal
	After  quantity.Decimal
	Delta  quantity.Decimal
}

// Approval names who must approve a change and why; Role says in which capacity,
// so that CI can label the change (e.g. when finance must approve).
type Approval struct {
	Who  string
	Why  string
	Role ApprovalRole
}

// ApprovalRole is the capacity in which someone approves.
type ApprovalRole string

// The approval roles.
const (
	RoleFinance  ApprovalRole = "finance"
	RoleTeam     ApprovalRole = "team"
	RolePlatform ApprovalRole = "platform"
)

// Empty reports whether nothing changes.
func (d *Diff) Empty() bool {
	return len(d.Quotas) == 0 && len(d.Pools) == 0 && len(d.Teams) == 0 && d.Delta.IsZero() && d.CeilingDelta.IsZero()
}

// Compare returns the diff from base to head.
func Compare(base, head *Plan) *Diff {
	d := &Diff{Before: base.TotalMonthlyUSD, After: head.TotalMonthlyUSD, CeilingBefore: base.CeilingMonthlyUSD, CeilingAfter: head.CeilingMonthlyUSD}
	d.Delta, d.CeilingDelta = d.After.Sub(d.Before), d.CeilingAfter.Sub(d.CeilingBefore)

	bt, ht := teamIndex(base), teamIndex(head)
	for _, name := range unionKeys(bt, ht) {
		b, h := bt[name], ht[name]
		var bq, hq map[schema.Flavor]int64
		var bc, hc quantity.Decimal
		if b != nil {
			bq, bc = b.Quota, b.MonthlyUSD
		}
		if h != nil {
			hq, hc = h.Quota, h.MonthlyUSD
		}
		for _, f := range unionKeys(bq, hq) {
			if bq[f] != hq[f] || (b == nil) != (h == nil) {
				d.Quotas = append(d.Quotas, QuotaChange{Team: name, Flavor: f, NominalBefore: bq[f], NominalAfter: hq[f]})
			}
		}
		if bc.Cmp(hc) != 0 {
			d.Teams = append(d.Teams, CostChange{Name: string(name), Before: bc, After: hc, Delta: hc.Sub(bc)})
		}
	}

	bcc, hcc := map[string]quantity.Decimal{}, map[string]quantity.Decimal{}
	for _, c := range base.CostCenters {
		bcc[c.CostCenter] = c.MonthlyUSD
	}
	for _, c := range head.CostCenters {
		hcc[c.CostCenter] = c.MonthlyUSD
	}
	for _, name := range unionKeys(bcc, hcc) {
		if bcc[name].Cmp(hcc[name]) != 0 {
			d.CostCenters = append(d.CostCenters, CostChange{Name: name, Before: bcc[name], After: hcc[name], Delta: hcc[name].Sub(bcc[name])})
		}
	}

	bp, hp := poolIndex(base), poolIndex(head)
	for _, name := range unionKeys(bp, hp) {
		c := PoolChange{Pool: name}
		if b := bp[name]; b != nil {
			c.Flavor, c.NodesBefore, c.MonthlyUSDBefore, c.CeilingMonthlyUSDBefore = b.Flavor, b.NodesTarget, b.MonthlyUSD, b.Envelope.CeilingMonthlyUSD
		}
		if h := hp[name]; h != nil {
			c.Flavor, c.NodesAfter, c.MonthlyUSDAfter, c.CeilingMonthlyUSDAfter = h.Flavor, h.NodesTarget, h.MonthlyUSD, h.Envelope.CeilingMonthlyUSD
		}
		if c.NodesBefore != c.NodesAfter || c.MonthlyUSDBefore.Cmp(c.MonthlyUSDAfter) != 0 || c.CeilingMonthlyUSDBefore.Cmp(c.CeilingMonthlyUSDAfter) != 0 ||
			bp[name] == nil || hp[name] == nil {
			d.Pools = append(d.Pools, c)
		}
	}
	return d
}

func teamIndex(p *Plan) map[schema.TeamName]*TeamPlan {
	out := map[schema.TeamName]*TeamPlan{}
	for i := range p.Teams {
		out[p.Teams[i].Team] = &p.Teams[i]
	}
	return out
}

func poolIndex(p *Plan) map[schema.PoolName]*PoolPlan {
	out := map[schema.PoolName]*PoolPlan{}
	for i := range p.Pools {
		out[p.Pools[i].Pool] = &p.Pools[i]
	}
	return out
}

func unionKeys[K ~string, V any](a, b map[K]V) []K {
	set := map[K]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	return slices.Sorted(maps.Keys(set))
}
