// Package v1alpha1 holds the allot.dev/v1alpha1 API: the Team, Cohort, Tier and
// Pool custom resources that the renderer writes from a capacity repository and
// that the manager's reconcilers and embedded scheduler read. Every kind is
// cluster-scoped, like Kueue's ClusterQueue and Cohort: quotas, tiers and pools are
// fleet-wide, not owned by a namespace (a team's workloads run in the Namespace
// named after the team). Specs mirror the user-facing CUE fields of the capacity
// repository; money and fractions are exact decimal strings, never floats; GPUs
// and node counts are int64. Statuses carry Flux-style conditions and the
// figures the controllers observe; all of them are optional.
//
// +kubebuilder:object:generate=true
// +groupName=allot.dev
package v1alpha1
