package finance

import (
	"cmp"
	"maps"
	"slices"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Metered is what one team's jobs used in one place, as it was metered
// there (a Kubernetes cluster's Team status, a Slurm cluster's accounting):
// GPU-seconds per flavor over a window of WindowSeconds. Several of one team
// add up: its average GPUs of a flavor is the sum of each one's average over
// its own window.
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
	// WindowDays is the metering window, in days: the longest of the
	// team's Metered.
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
	// Each team's average GPUs per flavor, summed over its Metered, and the
	// longest of their windows.
	type use struct {
		avg    map[string]quantity.Decimal
		window int64
	}
	uses := map[string]*use{}
	for _, m := range metered {
		if p.Team(schema.TeamName(m.Team)) == nil || m.WindowSeconds <= 0 {
			continue
		}
		u := uses[m.Team]
		if u == nil {
			u = &use{avg: map[string]quantity.Decimal{}}
			uses[m.Team] = u
		}
		u.window = max(u.window, m.WindowSeconds)
		for f, s := range m.GPUSeconds {
			u.avg[f] = u.avg[f].Add(quantity.Int(s).Quo(quantity.Int(m.WindowSeconds)))
		}
	}
	sb := &Showback{}
	for name, u := range uses {
		team := p.Team(schema.TeamName(name))
		flavors := map[string]bool{}
		for f := range team.Quota {
			flavors[string(f)] = true
		}
		for f := range u.avg {
			flavors[f] = true
		}
		for _, f := range slices.Sorted(maps.Keys(flavors)) {
			price, ok := perGPU[schema.Flavor(f)]
			if !ok {
				continue
			}
			row := ShowbackRow{Team: name, Flavor: f, Nominal: team.Quota[schema.Flavor(f)],
				AvgGPUs:    u.avg[f],
				WindowDays: quantity.Int(u.window).Quo(quantity.Int(86400))}
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
