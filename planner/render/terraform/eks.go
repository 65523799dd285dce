package terraform

import (
	"github.com/allot-dev/allot/schema"
)

// eks renders an aws_eks_node_group per pool: desired size at the planned target,
// bounded by the pool's nodes.min and nodes.max (EKS wants max_size >= 1), on
// demand, with the NVIDIA AMI and the GPU taint.
func eks(m *module, c *schema.Cluster, pools []*schema.Pool, targets map[schema.PoolName]int64) error {
	m.terraform["required_providers"] = map[string]any{
		"aws": map[string]any{"source": "hashicorp/aws", "version": AWSProviderVersion},
	}
	var region any
	if c.Region != "" {
		region = c.Region
	}
	m.variable("region", "string", "The AWS region of the EKS cluster.", region)
	m.variable("cluster_name", "string", "The name of the EKS cluster.", string(c.Name))
	m.variable("node_role_arn", "string", "The IAM role of the GPU nodes.", nil)
	m.variable("subnet_ids", "list(string)", "The subnets the GPU nodes run in.", nil)
	m.variable("ami_type", "string", "The AMI type of the GPU nodes.", "AL2023_x86_64_NVIDIA")
	m.providers["aws"] = map[string]any{"region": expr("${var.region}")}
	for _, p := range pools {
		if p.MachineType == "" {
			return &PoolError{Pool: p.Name, Reason: "an eks pool needs a machineType (instance type)"}
		}
		tags := map[string]any{}
		for k, v := range poolLabels(p) {
			tags[k] = v
		}
		body := map[string]any{
			"cluster_name":    expr("${var.cluster_name}"),
			"node_group_name": string(p.Name),
			"node_role_arn":   expr("${var.node_role_arn}"),
			"subnet_ids":      expr("${var.subnet_ids}"),
			"instance_types":  []any{p.MachineType},
			"ami_type":        expr("${var.ami_type}"),
			"capacity_type":   "ON_DEMAND",
			"scaling_config": []any{map[string]any{
				"desired_size": targets[p.Name],
				"min_size":     min(p.MinNodes, targets[p.Name]),
				"max_size":     max(p.MaxNodes, targets[p.Name], 1), // a grow phase may hold a pool above a lowered max
			}},
			"update_config": []any{map[string]any{"max_unavailable": 1}},
			"labels":        poolLabels(p),
			"taint": []any{map[string]any{
				"key": GPUTaint.Key, "value": GPUTaint.Value, "effect": GPUTaint.Effect,
			}},
			"tags": tags,
		}
		m.resource("aws_eks_node_group", ResourceName(p.Name), body)
	}
	return nil
}
