// Package kueue applies the Kueue objects allot renders for a cluster
// (planner/render/kueue) to it, for clusters whose workloads Kueue admits
// instead of allot's embedded scheduler. The suite in this package runs the
// real Kueue (bin/kueue, 'make kueue') on a test control plane.
package kueue
