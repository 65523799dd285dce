package terraform

import (
	"fmt"

	"github.com/allot-dev/allot/schema"
)

// gke renders a google_container_node_pool per pool. The pool's size is fixed at
// the planned target (allot, not the cluster autoscaler, owns it); a pool with a
// topology gets a compact placement policy so its nodes share a network fabric;
// a pool with committed nodes consumes any matching reservation first.
func gke(m *module, c *schema.Cluster, pools []*schema.Pool, targets map[schema.PoolName]int64) error {
	m.terraform["required_providers"] = map[string]any{
		"google": map[string]any{"source": "hashicorp/google", "version": GoogleProviderVersion},
	}
	m.variable("project", "string", "The Google Cloud project of the cluster.", nil)
	m.variable("cluster_name", "string", "The name of the GKE cluster.", string(c.Name))
	var location any
	if c.Region != "" {
		location = c.Region
	}
	m.variable("location", "string", "The region or zone of the GKE cluster.", location)
	m.variable("node_locations", "map(list(string))", "The zone of each pool's nodes, by pool name (GKE node_locations). GKE's node_count is per zone: a pool of a regional cluster must name its one zone, or it would get its planned node count in every zone of the region.", map[string]any{})
	accelerators := map[string]any{}
	for _, p := range pools {
		accelerators[string(p.Flavor)] = "nvidia-" + string(p.Flavor)
	}
	m.variable("accelerator_types", "map(string)", "The GKE accelerator type of every flavor (e.g. nvidia-h100-80gb).", accelerators)
	m.providers["google"] = map[string]any{"project": expr("${var.project}")}
	for _, p := range pools {
		if p.MachineType == "" {
			return &PoolError{Pool: p.Name, Reason: "a gke pool needs a machineType"}
		}
		nodeConfig := map[string]any{
			"machine_type": p.MachineType,
			"labels":       poolLabels(p),
			"guest_accelerator": []any{map[string]any{
				"type":  expr(fmt.Sprintf("${var.accelerator_types[%s]}", quoted(string(p.Flavor)))),
				"count": p.GPUsPerNode,
				"gpu_driver_installation_config": []any{map[string]any{
					"gpu_driver_version": "LATEST",
				}},
			}},
		}
		if p.Price.CommittedNodes > 0 {
			nodeConfig["reservation_affinity"] = []any{map[string]any{
				"consume_reservation_type": "ANY_RESERVATION",
			}}
		}
		body := map[string]any{
			"name":        string(p.Name),
			"cluster":     expr("${var.cluster_name}"),
			"location":    expr("${var.location}"),
			"node_count":  targets[p.Name],
			"node_config": []any{nodeConfig},
			"management":  []any{map[string]any{"auto_repair": true, "auto_upgrade": true}},
		}
		if p.Topology != nil {
			body["placement_policy"] = []any{map[string]any{"type": "COMPACT"}}
		}
		body["node_locations"] = expr(fmt.Sprintf("${lookup(var.node_locations, %s, null)}", quoted(string(p.Name))))
		body["lifecycle"] = []any{map[string]any{"precondition": []any{map[string]any{
			"condition":     gkeOneZone(p.Name),
			"error_message": fmt.Sprintf("Pool %s: GKE's node_count is per zone: set var.node_locations[%q] to the one zone of its nodes (needed when var.location is a region), so that it has exactly the nodes allot planned.", p.Name, p.Name),
		}}}}
		m.resource("google_container_node_pool", ResourceName(p.Name), body)
	}
	return nil
}

// gkeOneZone is the condition that a pool's node_count is its whole size: it
// names exactly one zone, or names none in a zonal cluster (a zone has three
// dash-separated parts, us-east1-b; a region two, us-east1).
func gkeOneZone(pool schema.PoolName) expr {
	zones := fmt.Sprintf(`length(lookup(var.node_locations, %s, []))`, quoted(string(pool)))
	return expr(fmt.Sprintf(`${%s == 1 || (%s == 0 && length(split("-", var.location)) == 3)}`, zones, zones))
}
