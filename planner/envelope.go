package planner

import (
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Envelope is how far a pool may grow past its planned size without another
// review, and what that costs at most: the nodes its repair may add for broken
// ones and its burst for pending gangs (docs/elastic.md), within nodes.max. The
// manager never holds more than MostNodes nodes of the pool, so the pool never
// costs more than CeilingMonthlyUSD a month.
type Envelope struct {
	// FixedNodes is the pool's planned size, its NodesTarget.
	FixedNodes int64
	// ReplacementNodes is the most nodes the pool's repair may add on top:
	// min(repair.maxNodes, nodes.max − FixedNodes); 0 without repair.
	ReplacementNodes int64
	// BurstNodes is the most nodes the pool's burst may add on top of those:
	// min(burst.maxNodes, nodes.max − FixedNodes − ReplacementNodes); 0
	// without burst.
	BurstNodes int64
	// MostNodes = FixedNodes + ReplacementNodes + BurstNodes.
	MostNodes int64
	// CeilingMonthlyUSD is the pool's monthly cost at MostNodes, priced as
	// every pool is (committed nodes at the committed price, the rest on
	// demand).
	CeilingMonthlyUSD quantity.Decimal
	// Elastic reports that the pool declares repair or burst.
	Elastic bool
}

// EnvelopeOf returns the envelope of pool p planned at nodesTarget nodes
// (schema.ElasticRoom: replacement first, burst what it leaves). A pool that declares neither has MostNodes ==
// FixedNodes and a ceiling equal to its monthly cost.
func EnvelopeOf(p *schema.Pool, nodesTarget int64) Envelope {
	e := Envelope{FixedNodes: nodesTarget, Elastic: p.Repair != nil || p.Burst != nil}
	e.ReplacementNodes, e.BurstNodes = schema.ElasticRoom(p.MaxNodes, nodesTarget, p.Repair, p.Burst)
	e.MostNodes = e.FixedNodes + e.ReplacementNodes + e.BurstNodes
	e.CeilingMonthlyUSD = PoolCost(p, e.MostNodes)
	return e
}
