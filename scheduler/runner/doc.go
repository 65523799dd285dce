// Package runner is allot's embedded scheduler in the cluster: a controller-runtime
// runnable that feeds a mutex-guarded cache from informers on Nodes, Pods, Jobs and
// the allot.dev Team, Cohort, Tier and Pool objects, decides with the scheduling
// core (the same one the simulator drives), and applies the decisions through the
// API: every pod of a gang bound or none, preemption through the Eviction API,
// pending reasons on the pods, team status and metrics. It runs only on the
// leader and rebuilds its state from the bound pods in the API before its first
// cycle, so a restart or a hand-over never binds twice. Where each gang stands
// with the core is a pure lifecycle (lifecycle.go): one transition function from
// facts (admitted, bound, refused, running, requeued) to the effects the runner
// carries out.
package runner
