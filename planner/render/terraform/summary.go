package terraform

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/allot-dev/allot/schema"
)

// PoolChange is what a Terraform plan of a rendered module does to one pool:
// its node count before (as Terraform found it after refreshing) and after, and
// the resources of the pool it adds, changes and destroys (a replacement counts
// as one add and one destroy, as Terraform counts it).
type PoolChange struct {
	Cluster     schema.ClusterName `json:"cluster"`
	Pool        schema.PoolName    `json:"pool"`
	NodesBefore int64              `json:"nodes_before"`
	NodesAfter  int64              `json:"nodes_after"`
	Add         int                `json:"add"`
	Change      int                `json:"change"`
	Destroy     int                `json:"destroy"`
	// Drift lists the addresses of the pool's resources that changed outside
	// Terraform since the last apply (found by the plan's refresh).
	Drift []string `json:"drift,omitempty"`
}

// Changed reports whether the plan does anything to the pool.
func (c PoolChange) Changed() bool { return c.Add+c.Change+c.Destroy > 0 }

// Summarize returns, per pool of the module planned in p, what the plan does,
// in pool-name order. Resources that belong to no pool are left out. It reads
// the resources as this package renders them: a google_container_node_pool's
// name and node_count, an aws_eks_node_group's node_group_name and
// scaling_config desired_size, and for onprem and kwok the terraform_data
// instances of <pool>_created, one per node whose create hook finished
// (input.pool and input.confirmed).
func Summarize(cluster schema.ClusterName, p *tfjson.Plan) []PoolChange {
	byPool := map[schema.PoolName]*PoolChange{}
	get := func(pool schema.PoolName) *PoolChange {
		c := byPool[pool]
		if c == nil {
			c = &PoolChange{Cluster: cluster, Pool: pool}
			byPool[pool] = c
		}
		return c
	}
	if p == nil {
		return nil
	}
	for _, rc := range p.ResourceChanges {
		if rc.Change == nil || rc.Mode != tfjson.ManagedResourceMode {
			continue
		}
		ch := rc.Change
		before, beforeNodes, okBefore := poolOf(rc.Type, ch.Before)
		after, afterNodes, okAfter := poolOf(rc.Type, ch.After)
		if !okBefore && !okAfter {
			continue
		}
		pool := after
		if !okAfter {
			pool = before
		}
		c := get(pool)
		c.NodesBefore += beforeNodes
		c.NodesAfter += afterNodes
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
	}
	for _, rc := range p.ResourceDrift {
		if rc.Change == nil {
			continue
		}
		pool, _, ok := poolOf(rc.Type, rc.Change.Before)
		if !ok {
			pool, _, ok = poolOf(rc.Type, rc.Change.After)
		}
		if ok {
			c := get(pool)
			c.Drift = append(c.Drift, rc.Address)
		}
	}
	out := make([]PoolChange, 0, len(byPool))
	for _, c := range byPool {
		slices.Sort(c.Drift)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b PoolChange) int { return cmp.Compare(a.Pool, b.Pool) })
	return out
}

// poolOf returns the pool a resource's values belong to and how many nodes they
// stand for; ok is false for values of no pool (or no values: a resource that
// does not exist on that side of the change).
func poolOf(typ string, values any) (pool schema.PoolName, nodes int64, ok bool) {
	v, _ := values.(map[string]any)
	if v == nil {
		return "", 0, false
	}
	switch typ {
	case "google_container_node_pool":
		name, ok := v["name"].(string)
		return schema.PoolName(name), number(v["node_count"]), ok
	case "aws_eks_node_group":
		name, ok := v["node_group_name"].(string)
		var size int64
		if sc, _ := v["scaling_config"].([]any); len(sc) > 0 {
			if m, _ := sc[0].(map[string]any); m != nil {
				size = number(m["desired_size"])
			}
		}
		return schema.PoolName(name), size, ok
	case "terraform_data":
		in, _ := v["input"].(map[string]any)
		name, ok := in["pool"].(string)
		if !ok {
			return "", 0, false
		}
		// A node counts once its create hook has finished, i.e. once its
		// <pool>_created instance exists: after a run killed inside a hook,
		// the node's own instance is in the state but the node may not be,
		// and the pool's resource may carry a size its nodes never reached.
		if confirmed, _ := in["confirmed"].(bool); confirmed {
			return schema.PoolName(name), 1, true
		}
		return schema.PoolName(name), 0, true
	}
	return "", 0, false
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
