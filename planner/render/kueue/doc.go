// Package kueue renders a capacity repository as Kueue objects
// (kueue.x-k8s.io/v1beta2), per cluster: a Topology per flavor whose pools lay
// their nodes out in levels, a ResourceFlavor per flavor, a
// WorkloadPriorityClass per tier, a Cohort per cohort, a ClusterQueue per team
// with its part of the team's quota (planner.ForCluster), and a LocalQueue in
// each of the team's namespaces. Findings lists the rules of allot that Kueue
// cannot say, at their CUE line, so that nothing is rendered subtly different
// without a word (docs/kueue.md).
//
// The objects are small local structs with exactly the fields rendered, not
// Kueue's Go module (which pins older k8s.io and controller-runtime
// releases); the Kueue suite checks them against Kueue's own CRDs and
// controller. It is pure: no client, no files.
package kueue
