// Package workload reads and writes the workload files allot sim replays: the
// project's CSV (id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer),
// the normalized trace schema of ../shared/traces, and the raw Helios (DIR-LAB
// layout) and Alibaba openb pod and node lists. It maps users to teams and jobs
// that span nodes to gangs of whole nodes.
package workload
