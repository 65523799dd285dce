package finance

import (
	"cmp"
	"maps"
	"slices"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Metered is what one team's pods used, as the scheduler metered it (the
// Teams' status): GPU-seconds per flavor over a window of WindowSeconds.
type Metered struct {
	Team          string
	WindowSeconds int64
	GPUSeconds    map[string]int64
}

// Showback sets each team's cost of quota (what it reserved) beside the cost
// of what it used, per flavor, at the flavor's cost per nominal GPU-month (its
// pools' cost over the teams' nominal quota of it, as team costs are shared):
// idle quota shows in money.
type Showback struct {
	Rows []ShowbackRow
	// Quota, Used and Idle are the totals a month.
	Quota, Used, Idle quantity.Decimal
}

// ShowbackRow is one team's use of one flavor.
type ShowbackRow struct {
	Team, Flavor string
	Nominal      int64
	// AvgGPUs is the GPUs used on average over the metering window.
	AvgGPUs quantity.Decimal
	// Use is AvgGPUs over Nominal, in percent ("" without a nominal quota).
	Use string
	// WindowDays is the metering window, in days.
	WindowDays quantity.Decimal
	// QuotaCost and UsedCost are a month's cost of the nominal quota and of
	// the average use; Idle is their difference (negative: the team borrowed).
	QuotaCost, UsedCost, Idle quantity.Decimal
}

// showback computes the showback of the metered teams against plan p.
func showback(p *planner.Plan, metered []Metered) *Showback {
	// A flavor's cost per nominal GPU-month: its pools' cost over the teams'
	// nominal quota of it (over its GPUs when no team has quota of it).
	perGPU := map[schema.Flavor]quantity.Decimal{}
	gpus := map[schema.Flavor]int64{}
	for _, pp := range p.Pools {
		perGPU[pp.Flavor] = perGPU[pp.Flavor].Add(pp.MonthlyUSD)
		gpus[pp.Flavor] += pp.GPUsTarget
	}
	for _, fp := range p.Flavors {
		if fp.NominalGPUs > 0 {
			gpus[fp.Flavor] = fp.NominalGPUs
		}
	}
	for f, g := range gpus {
		if g > 0 {
			perGPU[f] = perGPU[f].Quo(quantity.Int(g))
		}
	}
	sb := &Showback{}
	for _, m := range metered {
		team := p.Team(schema.TeamName(m.Team))
		if team == nil || m.WindowSeconds <= 0 {
			continue
		}
		flavors := map[string]bool{}
		for f := range team.Quota {
			flavors[string(f)] = true
		}
		for f := range m.GPUSeconds {
			flavors[f] = true
		}
		for _, f := range slices.Sorted(maps.Keys(flavors)) {
			price, ok := perGPU[schema.Flavor(f)]
			if !ok {
				continue
			}
			row := ShowbackRow{Team: m.Team, Flavor: f, Nominal: team.Quota[schema.Flavor(f)],
				AvgGPUs:    quantity.Int(m.GPUSeconds[f]).Quo(quantity.Int(m.WindowSeconds)),
				WindowDays: quantity.Int(m.WindowSeconds).Quo(quantity.Int(86400))}
			if row.Nominal > 0 {
				row.Use = row.AvgGPUs.MulInt(100).Quo(quantity.Int(row.Nominal)).Fixed(0) + "%"
			}
			row.QuotaCost = price.MulInt(row.Nominal)
			row.UsedCost = price.Mul(row.AvgGPUs)
			row.Idle = row.QuotaCost.Sub(row.UsedCost)
			sb.Quota, sb.Used, sb.Idle = sb.Quota.Add(row.QuotaCost), sb.Used.Add(row.UsedCost), sb.Idle.Add(row.Idle)
			sb.Rows = append(sb.Rows, row)
		}
	}
	slices.SortStableFunc(sb.Rows, func(a, b ShowbackRow) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Flavor, b.Flavor))
	})
	if len(sb.Rows) == 0 {
		return nil
	}
	return sb
}
