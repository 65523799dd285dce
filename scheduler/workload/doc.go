// Package workload reads and writes the workload files allot sim replays: the
// project's CSV (id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer),
// the normalized trace schema of ../shared/traces, HeliosData's cluster_log.csv,
// the raw Helios (DIR-LAB layout), Alibaba openb pod and node lists and the
// cluster-trace-gpu-v2020 pai_task_table and Slurm's sacct -P output, plain
// or gzip-compressed, one job at a time (Reader) or whole (Read). It maps
// users (and Slurm accounts) to teams and jobs that span nodes to gangs of
// whole nodes.
package workload
