package capacity

import (
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// Revision is what a step's capacity change is made from: the revision's
// configuration and plan, and the node targets in force before it.
type Revision struct {
	// ID names the revision, e.g. main@sha1:0123abc.
	ID     string
	Config *schema.Config
	Plan   *planner.Plan
	// Current are the node targets of the Pools in the cluster before this
	// revision, by pool name.
	Current map[string]int64
	// Gone are the Pools in the cluster the revision no longer declares, and
	// Prune whether the source removes what it no longer declares.
	Gone  []*allotv1.Pool
	Prune bool
	// Repair is what the pools' repair holds (their Pool status, written
	// by the Pool reconciler from fleet/elastic), by pool name: only pools
	// the revision declares with repair.
	Repair map[schema.PoolName]*allotv1.PoolRepairStatus
	// Burst is what the pools' burst holds (their Pool status), by pool
	// name: only pools the revision declares with burst.
	Burst map[schema.PoolName]*allotv1.PoolBurstStatus
}

// held returns the replacement and burst nodes pool holds beyond its
// target, within what the revision's envelope (planner.EnvelopeOf) allows:
// the status is the manager's, but anyone who may write it may have.
func (r Revision) held(pool schema.PoolName, target int64) int64 {
	p := r.Config.Pools[pool]
	if p == nil {
		return 0
	}
	env := planner.EnvelopeOf(p, target)
	var held int64
	if s := r.Repair[pool]; s != nil && p.Repair != nil {
		held = max(0, min(s.ReplacementNodes, env.ReplacementNodes))
	}
	if b := r.Burst[pool]; b != nil && p.Burst != nil {
		held += max(0, min(b.BurstNodes, env.BurstNodes, p.MaxNodes-target-held))
	}
	return held
}
