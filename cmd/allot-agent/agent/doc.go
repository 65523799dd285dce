// Package agent is the NVML side of GPU health: it reads every GPU through
// go-nvml on an interval, waits on an NVML event set for XID errors (which
// trigger a poll at once), folds what it read into the health model
// (fleet/health), and publishes the report: on its own node (the GPUHealthy
// condition, the healthy-gpus annotation, the gpu-fault taint and an Event per
// change), or on stdout for a dry run. It exports the agent's metrics.
package agent
