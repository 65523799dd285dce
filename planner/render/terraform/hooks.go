package terraform

import (
	"fmt"
	"strconv"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/schema"
)

// Environment variables the hook command of onprem and kwok modules receives.
const (
	EnvAction     = "ALLOT_ACTION" // create or delete
	EnvCluster    = "ALLOT_CLUSTER"
	EnvPool       = "ALLOT_POOL"
	EnvFlavor     = "ALLOT_FLAVOR"
	EnvNode       = "ALLOT_NODE"
	EnvNodeLabels = "ALLOT_NODE_LABELS" // a JSON object
	EnvGPUs       = "ALLOT_GPUS"        // GPUs of the node
	EnvPoolNodes  = "ALLOT_POOL_NODES"  // the pool's target node count
	// EnvResumed is "1" when a create hook runs again because an earlier run
	// was cut short inside it: the node may exist already.
	EnvResumed = "ALLOT_RESUMED"
)

// RunIDVariable is the input variable of onprem and kwok modules that tells
// one run from another; a runner sets it to a new value for every plan.
const RunIDVariable = "run_id"

// hooks renders onprem and kwok pools with Terraform's built-in provider only, so
// that the module inits, plans and applies offline. Each pool has:
//
//   - terraform_data.<pool>: its input carries the pool and its node count, so a
//     resize shows in the plan as an in-place change of input.nodes;
//   - terraform_data.<pool>_nodes: one instance per node (for_each over the
//     node names of fleet.Layout), whose local-exec hooks run var.command with
//     ALLOT_ACTION=create when the node appears and ALLOT_ACTION=delete when it
//     goes, with the node's name and labels (pool, flavor, cluster, topology) in
//     the environment. Growing a pool adds instances, shrinking removes the
//     highest-numbered ones, and a change of a node's labels replaces that node
//     only; in a pool with repair, nodes keep their names and a retired node
//     is left out (fleet.LayoutHeld), so its delete hook runs;
//   - terraform_data.<pool>_created: one instance per node, created once the
//     node's create hook has finished. Terraform records a new resource in the
//     state before its creation hook runs, so a run killed inside the hook (the
//     manager's pod dies) leaves a node in the state whose hook never finished.
//     Its _created instance is then missing, and the next apply creates it:
//     that runs the create hook again, with ALLOT_RESUMED=1, for exactly the
//     nodes whose hook may not have finished. In a run that goes through, the
//     hook runs once per node: the _created instance runs a no-op when its node
//     was created by the same run (local.run: var.run_id, which allot's runner
//     sets anew for every plan, or else the plan's timestamp, to the second).
//     Terraform's dependencies are per resource block, not per instance: the
//     _created instances wait for every node of the run, so after a run cut
//     short, every node it created is confirmed again.
//
// Create hooks must be idempotent, keyed by ALLOT_NODE (create the node if it
// is not there): a resumed create may find the node there; a node whose
// create hook failed or was interrupted is tainted and created again, without
// a delete hook first; and a run killed between a hook's end and Terraform's
// next state write (at once with the local backend, at most every 20 seconds
// with a remote one) runs that node's create hook again, not flagged. Delete
// hooks must accept a node that is already gone.
//
// Terraform runs no destroy-time hook for a resource block that is removed from
// the configuration: to retire a whole pool, shrink it to 0 first.
func hooks(m *module, cfg *schema.Config, c *schema.Cluster, pools []*schema.Pool, targets map[schema.PoolName]int64, held map[schema.PoolName]fleet.Held) error {
	m.variable("command", "string", "The command run when a node is created or deleted; it reads the ALLOT_* environment.", DefaultCommand)
	m.variable(RunIDVariable, "string", "Identifies the run; allot's runner sets a new one for every plan (default: the plan's timestamp).", "")
	m.locals["run"] = expr(fmt.Sprintf("${coalesce(var.%s, plantimestamp())}", RunIDVariable))
	nodes := map[string]any{}
	for _, p := range pools {
		nodes[string(p.Name)] = map[string]any{}
	}
	for _, n := range fleet.LayoutHeld(cfg, targets, held) {
		if n.Cluster != c.Name {
			continue
		}
		labels := map[string]any{}
		for k, v := range n.Labels() {
			labels[k] = v
		}
		nodes[string(n.Pool)].(map[string]any)[n.Name] = labels
	}
	m.locals["nodes"] = nodes
	for _, p := range pools {
		name := ResourceName(p.Name)
		target := targets[p.Name]
		m.resource("terraform_data", name, map[string]any{
			"input": map[string]any{
				"pool":          string(p.Name),
				"cluster":       string(c.Name),
				"flavor":        string(p.Flavor),
				"gpus_per_node": p.GPUsPerNode,
				"nodes":         target,
			},
		})
		env := func(action string, node, labels expr) map[string]any {
			return map[string]any{
				EnvAction:     action,
				EnvCluster:    string(c.Name),
				EnvPool:       string(p.Name),
				EnvFlavor:     string(p.Flavor),
				EnvNode:       node,
				EnvNodeLabels: labels,
				EnvGPUs:       strconv.FormatInt(p.GPUsPerNode, 10),
				EnvPoolNodes:  strconv.FormatInt(target, 10),
			}
		}
		nodesName := name + "_nodes"
		m.resource("terraform_data", nodesName, map[string]any{
			"for_each": expr(fmt.Sprintf("${local.nodes[%s]}", quoted(string(p.Name)))),
			"input": map[string]any{
				"node":    expr("${each.key}"),
				"pool":    string(p.Name),
				"labels":  expr("${each.value}"),
				"command": expr("${var.command}"),
				// The run that created the node, kept across later runs: the
				// node's _created instance compares it with its own.
				"created": expr("${local.run}"),
			},
			"triggers_replace": expr("${each.value}"),
			"lifecycle":        []any{map[string]any{"ignore_changes": []any{"input.created"}}},
			"provisioner": []any{
				map[string]any{"local-exec": map[string]any{
					"command":     expr("${var.command}"),
					"environment": env("create", expr("${each.key}"), expr("${jsonencode(each.value)}")),
				}},
				// Destroy-time hooks may refer to self only: the command and the
				// node travel in the input.
				map[string]any{"local-exec": map[string]any{
					"when":        "destroy",
					"command":     expr("${self.input.command}"),
					"environment": env("delete", expr("${self.input.node}"), expr("${jsonencode(self.input.labels)}")),
				}},
			},
		})
		node := fmt.Sprintf("terraform_data.%s[each.key]", nodesName) // nodesName is an identifier (checkName)
		resumed := env("create", expr("${each.key}"), expr("${jsonencode(each.value)}"))
		resumed[EnvResumed] = "1"
		m.resource("terraform_data", name+"_created", map[string]any{
			"for_each": expr(fmt.Sprintf("${local.nodes[%s]}", quoted(string(p.Name)))),
			"input": map[string]any{
				"node":      expr("${each.key}"),
				"pool":      string(p.Name),
				"confirmed": true,
			},
			// A new instance of the node (e.g. new labels) is confirmed anew.
			"triggers_replace": expr(fmt.Sprintf("${%s.id}", node)),
			"provisioner": []any{
				map[string]any{"local-exec": map[string]any{
					"command":     expr(fmt.Sprintf(`${%s.output.created == local.run ? "true" : var.command}`, node)),
					"environment": resumed,
				}},
			},
		})
	}
	return nil
}

// NodeAddress is the Terraform address of a node of an onprem or kwok pool,
// e.g. for terraform plan -replace of a node that is gone from the cluster.
func NodeAddress(pool schema.PoolName, node string) string {
	return fmt.Sprintf("terraform_data.%s_nodes[%q]", ResourceName(pool), node)
}
