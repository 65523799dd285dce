// Package kueue serves allot manager --scheduler=kueue: it copies each team's
// usage and pending workloads from its Kueue ClusterQueue's status into its
// Team status. The CapacitySource reconciler applies the Kueue objects
// (planner/render/kueue) in its safe order.
package kueue
