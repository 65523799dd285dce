// Package capacity is the GitOps reconciler of allot: it makes a Git revision
// of a capacity repository true in the cluster.
//
// For each CapacitySource it fetches the revision (a Git repository it mirrors
// itself, or a Flux GitRepository's artifact), judges it with the same code as
// 'allot validate' and 'allot plan' (evaluate.Repository), and, only when it has
// no error, applies the rendered objects (planner/render/kube) with server-side
// apply under one field manager, in the safe order of docs/cluster.md: quotas are
// lowered before capacity shrinks and capacity grows before quotas are raised.
// Objects a revision no longer declares are pruned. An invalid revision
// changes nothing: the source is Stalled with the findings in its status and
// the last good revision stays in force.
package capacity
