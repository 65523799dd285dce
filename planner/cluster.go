package planner

import (
	"maps"
	"slices"

	"github.com/allot-dev/allot/schema"
)

// ForCluster returns the part of cfg one cluster enforces, for a fleet that
// runs one manager (and one scheduler) per cluster: the cluster's pools, and
// each team's quota of each flavor split among the clusters in proportion to
// their planned GPUs of that flavor (largest remainder, so a team's parts add
// up to its quota exactly). Borrowing and lending limits are split the same
// way; an unlimited one stays unlimited. A flavor the cluster has no planned
// GPUs of gets a nominal of 0 there. cfg is not changed; the result shares
// what it does not change.
func ForCluster(cfg *schema.Config, plan *Plan, cluster schema.ClusterName) *schema.Config {
	out := ClusterPools(cfg, cluster)
	share := shares(plan, func(c schema.ClusterName) bool { return c == cluster })
	out.Teams = splitQuotas(cfg, share)
	return out
}

// Kubernetes returns the part of cfg its Kubernetes clusters enforce: cfg
// without the clusters Slurm runs and their pools, and each team's quota less
// the share ForCluster gives those clusters, so that a Slurm cluster's share
// and the Kubernetes part add up to the team's quota. Without a Slurm cluster
// it is cfg itself. cfg is not changed.
func Kubernetes(cfg *schema.Config, plan *Plan) *schema.Config {
	slurm := cfg.ClustersRunBy(schema.SchedulerSlurm)
	if len(slurm) == 0 {
		return cfg
	}
	out := *cfg
	out.Clusters = map[schema.ClusterName]*schema.Cluster{}
	for name, c := range cfg.Clusters {
		if c.Scheduler != schema.SchedulerSlurm {
			out.Clusters[name] = c
		}
	}
	out.Pools = map[schema.PoolName]*schema.Pool{}
	for name, p := range cfg.Pools {
		if out.Clusters[p.Cluster] != nil {
			out.Pools[name] = p
		}
	}
	slurmShare := shares(plan, func(c schema.ClusterName) bool { return slices.Contains(slurm, c) })
	out.Teams = splitQuotas(cfg, func(f schema.Flavor, n int64) int64 { return n - slurmShare(f, n) })
	return &out
}

// shares returns the part of n GPUs of flavor f that falls to the clusters
// in(c) holds, each cluster's share in proportion to its planned GPUs of f
// (largest remainder, so the shares of all clusters add up to n); 0 for a
// flavor no cluster has planned GPUs of.
func shares(plan *Plan, in func(schema.ClusterName) bool) func(f schema.Flavor, n int64) int64 {
	// Per flavor: the clusters carrying it, in name order, and their GPUs.
	type split struct {
		gpus []int64
		sum  int64
		mine []int // indexes of the clusters in holds
	}
	splits := map[schema.Flavor]*split{}
	byCluster := map[schema.Flavor]map[schema.ClusterName]int64{}
	for _, pp := range plan.Pools {
		if byCluster[pp.Flavor] == nil {
			byCluster[pp.Flavor] = map[schema.ClusterName]int64{}
		}
		byCluster[pp.Flavor][pp.Cluster] += pp.GPUsTarget
	}
	for f, m := range byCluster {
		s := &split{}
		for i, c := range slices.Sorted(maps.Keys(m)) {
			s.gpus = append(s.gpus, m[c])
			s.sum += m[c]
			if in(c) {
				s.mine = append(s.mine, i)
			}
		}
		splits[f] = s
	}
	return func(f schema.Flavor, n int64) int64 {
		s := splits[f]
		if s == nil || len(s.mine) == 0 || s.sum == 0 {
			return 0
		}
		parts := apportion(n, s.gpus, s.sum)
		var sum int64
		for _, i := range s.mine {
			sum += parts[i]
		}
		return sum
	}
}

// splitQuotas returns cfg's teams with each quota, borrowing and lending
// limit of flavor f replaced by part(f, it); an unlimited one stays
// unlimited.
func splitQuotas(cfg *schema.Config, part func(f schema.Flavor, n int64) int64) map[schema.TeamName]*schema.Team {
	teams := map[schema.TeamName]*schema.Team{}
	for name, t := range cfg.Teams {
		ct := *t
		ct.Quota = map[schema.Flavor]schema.Quota{}
		for f, q := range t.Quota {
			cq := schema.Quota{Nominal: part(f, q.Nominal)}
			if q.BorrowingLimit != nil {
				b := part(f, *q.BorrowingLimit)
				cq.BorrowingLimit = &b
			}
			if q.LendingLimit != nil {
				l := part(f, *q.LendingLimit)
				cq.LendingLimit = &l
			}
			ct.Quota[f] = cq
		}
		teams[name] = &ct
	}
	return teams
}

// ClusterPools returns cfg with only the pools of one cluster and every
// team's quota whole: for a worker cluster of a fleet whose hub enforces the
// quotas fleet-wide (allot manager --quota-from-hub), where a team may run
// all of its quota in this cluster. cfg is not changed.
func ClusterPools(cfg *schema.Config, cluster schema.ClusterName) *schema.Config {
	out := *cfg
	out.Pools = map[schema.PoolName]*schema.Pool{}
	for name, p := range cfg.Pools {
		if p.Cluster == cluster {
			out.Pools[name] = p
		}
	}
	return &out
}
