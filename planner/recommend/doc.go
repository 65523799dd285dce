// Package recommend owns capacity planned from demand: it replays a workload
// history through the scheduling core (scheduler/sim) and searches, per team and
// flavor, the smallest nominal quota in whole nodes whose simulated p95 queue
// wait meets a target; it prices the fleet the planner sizes for those quotas,
// recommends the committed node count of each pool from the replay's use, and
// draws the cost-versus-wait curve around the recommendation. It is pure: it
// takes a configuration and jobs and returns values (replays may run in
// parallel goroutines).
package recommend
