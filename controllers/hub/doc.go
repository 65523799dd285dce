// Package hub holds the controllers of allot manager --hub: the management
// cluster's view of its worker clusters. ClusterReconciler keeps each
// registered worker's reachability (conditions Reachable and Lost on its
// Cluster object) from probes of the worker's API server through the
// kubeconfig of its Secret.
package hub
