// Package health owns the GPU health model of a node: the checks and their
// results per GPU, the XID classification table (data, with per-cluster
// overrides), the thresholds, and the node-level decision the NVML agent turns
// into node state: GPUHealthy or not, the failing checks, the healthy GPU count,
// whether the fault is fatal (the node is tainted), and recovery (a new boot ID,
// or the checks passing again for a configured time). It is pure: readings and
// the time come in as values, a State and a Report go out.
package health
