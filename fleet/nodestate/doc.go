// Package nodestate owns how GPU health is written on a Node and read back: the
// GPUHealthy condition, the allot.dev/healthy-gpus annotation, the
// allot.dev/gpu-fault taint, and the agent's remembered health state. The NVML
// agent applies a health.Report to its node with Apply; the scheduler and pool
// health read what a node offers with Read. It is pure: nodes in, nodes out.
package nodestate
