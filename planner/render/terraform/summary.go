package terraform

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/allot-dev/allot/schema"
)

// PoolPlan is what a Terraform plan of a rendered module does to one pool:
// its node count before (as Terraform found it after refreshing) and after, and
// the resources of the pool it adds, changes and destroys (a replacement counts
// as one add and one destroy, as Terraform counts it).
type PoolPlan struct {
	Cluster     schema.ClusterName `json:"cluster"`
	Pool        schema.PoolName    `json:"pool"`
	NodesBefore int64              `json:"nodes_before"`
	NodesAfter  int64              `json:"nodes_after"`
	Add         int                `json:"add"`
	Change      int                `json:"change"`
	Destroy     int                `json:"destroy"`
	// Resumed counts the onprem or kwok nodes whose create hook runs again
	// because the run that created them was cut short or failed before it
	// could confirm them (see the _created resources of hooks).
	Resumed int `json:"resumed,omitempty"`
	// Drift lists the addresses of the pool's resources that changed outside
	// Terraform since the last apply (found by the plan's refresh).
	Drift []string `json:"drift,omitempty"`
}

// Changed reports whether the plan does anything to the pool.
func (c PoolPlan) Changed() bool { return c.Add+c.Change+c.Destroy > 0 }

// Summarize returns, per pool of the module planned in p, what the plan does,
// in pool-name order. Resources that belong to no pool are left out. It reads
// the resources as this package renders them: a google_container_node_pool's
// name and node_count, an aws_eks_node_group's node_group_name and
// scaling_config desired_size, and for onprem and kwok the terraform_data
// instances of <pool>_nodes, one per node (input.pool and input.node); a
// tainted node (its create hook failed) does not count before the plan.
func Summarize(cluster schema.ClusterName, p *tfjson.Plan) []PoolPlan {
	if p == nil {
		return nil
	}
	byPool := map[schema.PoolName]*PoolPlan{}
	get := func(pool schema.PoolName) *PoolPlan {
		c := byPool[pool]
		if c == nil {
			c = &PoolPlan{Cluster: cluster, Pool: pool}
			byPool[pool] = c
		}
		return c
	}
	// Nodes created by this plan, and nodes confirmed by it, per pool.
	created := map[schema.PoolName]map[string]bool{}
	confirmed := map[schema.PoolName][]string{}
	for _, rc := range p.ResourceChanges {
		if rc.Change == nil || rc.Mode != tfjson.ManagedResourceMode {
			continue
		}
		ch := rc.Change
		before, okBefore := poolOf(rc.Type, ch.Before)
		after, okAfter := poolOf(rc.Type, ch.After)
		if !okBefore && !okAfter {
			continue
		}
		v := after
		if !okAfter {
			v = before
		}
		c := get(v.pool)
		if rc.ActionReason != tfjson.ActionReasonReplaceBecauseTainted {
			c.NodesBefore += before.nodes
		}
		c.NodesAfter += after.nodes
		switch a := ch.Actions; {
		case a.Create():
			c.Add++
		case a.Delete():
			c.Destroy++
		case a.Update():
			c.Change++
		case a.Replace():
			c.Add++
			c.Destroy++
		}
		if a := ch.Actions; a.Create() || a.Replace() {
			switch {
			case after.node != "" && after.confirms:
				confirmed[v.pool] = append(confirmed[v.pool], after.node)
			case after.node != "":
				if created[v.pool] == nil {
					created[v.pool] = map[string]bool{}
				}
				created[v.pool][after.node] = true
			}
		}
	}
	for pool, nodes := range confirmed {
		for _, n := range nodes {
			if !created[pool][n] {
				byPool[pool].Resumed++
			}
		}
	}
	for _, rc := range p.ResourceDrift {
		if rc.Change == nil {
			continue
		}
		v, ok := poolOf(rc.Type, rc.Change.Before)
		if !ok {
			v, ok = poolOf(rc.Type, rc.Change.After)
		}
		if ok {
			c := get(v.pool)
			c.Drift = append(c.Drift, rc.Address)
		}
	}
	out := make([]PoolPlan, 0, len(byPool))
	for _, c := range byPool {
		slices.Sort(c.Drift)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b PoolPlan) int { return cmp.Compare(a.Pool, b.Pool) })
	return out
}

// resource is what one side of a resource change says about its pool.
type resource struct {
	pool  schema.PoolName
	nodes int64 // how many nodes the values stand for
	// node names the node of an onprem or kwok node resource; confirms is
	// set for its _created instance, which stands for no node of its own.
	node     string
	confirms bool
}

// poolOf reads the pool a resource's values belong to; ok is false for values
// of no pool (or no values: a resource that does not exist on that side of
// the change).
func poolOf(typ string, values any) (r resource, ok bool) {
	v, _ := values.(map[string]any)
	if v == nil {
		return r, false
	}
	switch typ {
	case "google_container_node_pool":
		// node_count is per zone: a pool of several zones (as a regional
		// cluster's pools are before they name their zone) has that many
		// times more nodes.
		name, ok := v["name"].(string)
		nodes := number(v["node_count"])
		if zones, _ := v["node_locations"].([]any); len(zones) > 1 {
			nodes *= int64(len(zones))
		}
		return resource{pool: schema.PoolName(name), nodes: nodes}, ok
	case "aws_eks_node_group":
		name, ok := v["node_group_name"].(string)
		var size int64
		if sc, _ := v["scaling_config"].([]any); len(sc) > 0 {
			if m, _ := sc[0].(map[string]any); m != nil {
				size = number(m["desired_size"])
			}
		}
		return resource{pool: schema.PoolName(name), nodes: size}, ok
	case "terraform_data":
		in, _ := v["input"].(map[string]any)
		name, ok := in["pool"].(string)
		if !ok {
			return r, false
		}
		r = resource{pool: schema.PoolName(name)}
		// The pool's own resource carries its planned size, which an
		// interrupted apply may have recorded before its nodes exist: the node
		// instances are what count.
		if node, isNode := in["node"].(string); isNode {
			r.node = node
			if r.confirms, _ = in["confirmed"].(bool); !r.confirms {
				r.nodes = 1
			}
		}
		return r, true
	}
	return r, false
}

// number reads a JSON number decoded as float64 or json.Number.
func number(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			f, _ := n.Float64()
			return int64(f)
		}
		return i
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}
