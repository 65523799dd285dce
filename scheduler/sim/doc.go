// Package sim is allot's discrete-event simulator: it replays a workload against a
// fleet on a virtual clock through a scheduling policy (allot's scheduler core, or
// the reference policy), checks the invariants after every step (no node over
// committed, no partial gang, quotas and required topology kept) and reports
// utilization, waits, preemptions and per-team figures. Job durations are used
// only to end jobs: the policy never sees them.
package sim
