// Package whatif owns the what-if simulation of a capacity change: it replays one
// workload against the base and the proposed configuration through the scheduling
// core (scheduler/sim, the same core the cluster runs), compares per team quota
// utilization, p50 and p95 queue wait and preemptions, names the teams that would
// wait longer, and renders the comparison as text and Markdown. It is pure: it
// takes configurations and jobs and returns values.
package whatif
