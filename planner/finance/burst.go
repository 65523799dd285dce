package finance

import (
	"cmp"
	"slices"
	"time"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// BurstMetered is what a pool's burst nodes were held for, for one team, as
// the manager metered it (the Pool's status.burst.metered): node-seconds
// from Since to At.
type BurstMetered struct {
	Pool        schema.PoolName
	Team        string
	NodeSeconds int64
	Since, At   time.Time
}

// Burst is the burst the pools' managers held, billed: each team's burst
// GPU-hours per pool and their cost at the pool's on-demand price.
type Burst struct {
	Rows []BurstRow
	// CostUSD is the rows' total.
	CostUSD quantity.Decimal
}

// BurstRow is one team's burst of one pool.
type BurstRow struct {
	Pool, Team string // team "": held for nobody's gang
	// NodeHours and GPUHours are the burst nodes held, times the hours.
	NodeHours, GPUHours quantity.Decimal
	CostUSD             quantity.Decimal
	// Since and Until bound the metering window (RFC 3339, UTC).
	Since, Until string
}

// burst bills what the managers metered; pools cfg does not declare are
// left out (their price is unknown). Nil when nothing was metered.
func burst(cfg *schema.Config, metered []BurstMetered) *Burst {
	if cfg == nil || len(metered) == 0 {
		return nil
	}
	b := &Burst{CostUSD: quantity.Int(0)}
	for _, m := range metered {
		p := cfg.Pools[m.Pool]
		if p == nil || m.NodeSeconds <= 0 {
			continue
		}
		hours := quantity.Int(m.NodeSeconds).Quo(quantity.Int(3600))
		cost := hours.Mul(p.Price.OnDemandPerNodeHour)
		b.Rows = append(b.Rows, BurstRow{Pool: string(m.Pool), Team: m.Team, NodeHours: hours, GPUHours: hours.MulInt(p.GPUsPerNode),
			CostUSD: cost, Since: m.Since.UTC().Format(time.RFC3339), Until: m.At.UTC().Format(time.RFC3339)})
		b.CostUSD = b.CostUSD.Add(cost)
	}
	if len(b.Rows) == 0 {
		return nil
	}
	slices.SortFunc(b.Rows, func(x, y BurstRow) int { return cmp.Or(cmp.Compare(x.Pool, y.Pool), cmp.Compare(x.Team, y.Team)) })
	return b
}
