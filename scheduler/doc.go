// Package scheduler is allot's scheduling core: a pure, clock-free model of a GPU
// fleet (nodes per flavor with topology domains and health), a quota tree of teams in
// nested cohorts, ordered tiers, and the pending and running workloads (gangs of
// pods). Each Cycle decides, for the time it is given, which pending workloads to
// admit and where to bind their pods, which running workloads to preempt and why,
// and why every other pending workload waits; it returns those decisions as Results
// for a thin runner (the simulator, or the in-cluster binder) to apply. It does no
// I/O, reads no clock and never sees how long a workload will run.
package scheduler
