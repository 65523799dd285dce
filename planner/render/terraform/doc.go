// Package terraform renders one Terraform root module per cluster, in Terraform's
// JSON syntax (main.tf.json), from a capacity repository and its plan: a
// google_container_node_pool per pool of a gke cluster, an aws_eks_node_group per
// pool of an eks cluster, and for onprem and kwok clusters Terraform's built-in
// terraform_data resources whose local-exec hooks run a configurable command per
// node, so that those modules init, plan and apply offline. It is pure: modules
// are returned as bytes, with sorted keys and two-space indentation.
package terraform
