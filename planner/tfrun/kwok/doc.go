// Package kwok is the node hook of kwok modules (see package
// planner/render/terraform): run by a terraform_data local-exec provisioner
// with the ALLOT_* environment, it creates a simulated pool's Node object in
// the cluster's API server, reporting Ready with its GPUs as a kubelet would,
// or deletes it. Calls are idempotent, as node hooks must be: a create finds
// a node that exists (or was half made by a run cut short) and completes it,
// a delete finds a node already gone.
package kwok
