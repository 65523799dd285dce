package planner

import (
	"fmt"
	"slices"

	"github.com/allot-dev/allot/schema"
)

// Observed is what the cluster shows of a pool (its Pool status): the nodes
// registered, those usable (Ready, without a GPU fault) and their healthy GPUs.
type Observed struct {
	Nodes, UsableNodes, HealthyGPUs int64
}

// within returns o with every count inside what a pool of gpn GPUs per node
// can show: 0 <= UsableNodes <= Nodes <= schema.MaxFleetNodes and
// 0 <= HealthyGPUs <= Nodes*gpn. An observation comes from outside (a file, a
// status anyone with write access may edit): out of range, it would make the
// arithmetic below overflow into nonsense.
func (o Observed) within(gpn int64) Observed {
	o.Nodes = min(max(o.Nodes, 0), schema.MaxFleetNodes)
	o.UsableNodes = min(max(o.UsableNodes, 0), o.Nodes)
	o.HealthyGPUs = min(max(o.HealthyGPUs, 0), o.Nodes*gpn)
	return o
}

// RuleUnhealthyCapacity names the finding of a pool whose healthy capacity is
// below what its quotas assign it.
const RuleUnhealthyCapacity = "pool-unhealthy-capacity"

// WithObserved returns the plan with replacement nodes for pools whose healthy
// capacity, as observed, is below what the quotas assign them: the nodes the
// cluster shows unusable stay (they may come back), and new ones are planned,
// within nodes.max, so that the healthy GPUs after the change cover the
// assignment. Costs follow. Each such pool gets a warning finding at its
// declaration, saying how short it is and what the replacements do. Pools
// without an observation are left as planned. base is not changed.
func WithObserved(cfg *schema.Config, base *Plan, obs map[schema.PoolName]Observed) (*Plan, schema.Findings) {
	p := *base
	p.Pools = slices.Clone(base.Pools)
	p.Flavors = slices.Clone(base.Flavors)
	var findings schema.Findings
	for i := range p.Pools {
		pp := &p.Pools[i]
		o, ok := obs[pp.Pool]
		o = o.within(pp.GPUsPerNode)
		pool := cfg.Pools[pp.Pool]
		if !ok || pool == nil || pp.AssignedGPUs == 0 || o.HealthyGPUs >= pp.AssignedGPUs {
			continue
		}
		gpn := pp.GPUsPerNode
		// After the change: what is healthy now, plus the nodes the target adds
		// beyond those registered.
		healthyAfter := func(target int64) int64 { return o.HealthyGPUs + max(0, target-o.Nodes)*gpn }
		short := pp.AssignedGPUs - healthyAfter(pp.NodesTarget)
		var add int64
		if short > 0 {
			add = min((short+gpn-1)/gpn, pool.MaxNodes-pp.NodesTarget)
		}
		pp.NodesTarget += add
		pp.ReplacementNodes = add
		msg := fmt.Sprintf("pool %s has %d healthy GPUs of the %d its quotas need (%d of %d nodes unusable)",
			pp.Pool, o.HealthyGPUs, pp.AssignedGPUs, o.Nodes-o.UsableNodes, o.Nodes)
		if add > 0 {
			msg += fmt.Sprintf("; %d replacement node(s) planned", add)
		}
		if left := pp.AssignedGPUs - healthyAfter(pp.NodesTarget); left > 0 {
			msg += fmt.Sprintf("; at nodes.max (%d) it stays %d GPUs short until nodes recover", pool.MaxNodes, left)
			pp.AtMax = true
		}
		findings = append(findings, schema.Finding{Severity: schema.SeverityWarning, Rule: RuleUnhealthyCapacity, Pos: pool.Pos, Message: msg})
		for j := range p.Flavors {
			if p.Flavors[j].Flavor == pp.Flavor {
				p.Flavors[j].TargetGPUs += add * gpn
			}
		}
	}
	p.cost(cfg)
	return &p, findings
}
