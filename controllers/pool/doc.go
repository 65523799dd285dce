// Package pool keeps each Pool's status true to its nodes: how many are
// registered and usable, their GPUs and healthy GPUs (as the node contract of
// fleet/nodestate reads them, the same reading the scheduler places by), the
// nodes with a fault, and the CapacityReady and GPUHealthy conditions, with an
// event whenever either changes. The capacity it compares against is the
// Pool's node target less its spare nodes: what the quotas need.
package pool
