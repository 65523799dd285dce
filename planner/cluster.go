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
	// Per flavor: the clusters carrying it, in name order, and their GPUs.
	type split struct {
		clusters []schema.ClusterName
		gpus     []int64
		sum      int64
		mine     int // index of cluster, -1 if it has none
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
		s := &split{mine: -1}
		for i, c := range slices.Sorted(maps.Keys(m)) {
			s.clusters = append(s.clusters, c)
			s.gpus = append(s.gpus, m[c])
			s.sum += m[c]
			if c == cluster {
				s.mine = i
			}
		}
		splits[f] = s
	}
	part := func(f schema.Flavor, n int64) int64 {
		s := splits[f]
		if s == nil || s.mine < 0 || s.sum == 0 {
			return 0
		}
		return apportion(n, s.gpus, s.sum)[s.mine]
	}
	out.Teams = map[schema.TeamName]*schema.Team{}
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
		out.Teams[name] = &ct
	}
	return out
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
