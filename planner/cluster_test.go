package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/schema"
)

// A flavor in two clusters, 16 and 8 planned GPUs: each team's quota splits
// 2:1 by largest remainder, and the parts add up to the quota.
func TestForCluster(t *testing.T) {
	p1, p2 := pool("p1", 8, 2, 2, "1"), pool("p2", 8, 1, 1, "1")
	p2.Cluster = "c2"
	p1.Cluster = "c1"
	l4 := pool("l4", 8, 1, 1, "1")
	l4.Cluster, l4.Flavor = "c1", "l4"
	cfg := config([]*schema.Pool{p1, p2, l4}, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 10, "l4": 8}, "b": {"h100": 14}})
	cfg.Teams["a"].Quota["h100"] = schema.Quota{Nominal: 10, BorrowingLimit: lim(4)}
	plan := Build(cfg)

	c1, c2 := ForCluster(cfg, plan, "c1"), ForCluster(cfg, plan, "c2")
	want := map[schema.ClusterName]map[schema.TeamName]map[schema.Flavor]schema.Quota{
		// a: 10 x 2/3 = 6.67 -> 7, 3.33 -> 3; borrowing 4 -> 3, 1. b: 14 -> 9.33 -> 9, 4.67 -> 5.
		"c1": {"a": {"h100": {Nominal: 7, BorrowingLimit: lim(3)}, "l4": {Nominal: 8}}, "b": {"h100": {Nominal: 9}}},
		// l4 has no pool in c2.
		"c2": {"a": {"h100": {Nominal: 3, BorrowingLimit: lim(1)}, "l4": {Nominal: 0}}, "b": {"h100": {Nominal: 5}}},
	}
	for name, c := range map[schema.ClusterName]*schema.Config{"c1": c1, "c2": c2} {
		got := map[schema.TeamName]map[schema.Flavor]schema.Quota{}
		for tn, team := range c.Teams {
			got[tn] = team.Quota
		}
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("cluster %s quotas (-want +got):\n%s", name, diff)
		}
	}
	if len(c1.Pools) != 2 || c1.Pools["p1"] == nil || c1.Pools["l4"] == nil || len(c2.Pools) != 1 || c2.Pools["p2"] == nil {
		t.Errorf("pools: c1 %v, c2 %v", c1.Pools, c2.Pools)
	}
	// With a hub, a worker keeps its pools and the quotas whole.
	if w := ClusterPools(cfg, "c2"); len(w.Pools) != 1 || w.Pools["p2"] == nil || w.Teams["a"].Quota["h100"].Nominal != 10 || w.Teams["b"].Quota["h100"].Nominal != 14 {
		t.Errorf("ClusterPools(c2): pools %v, team a %v, team b %v", w.Pools, w.Teams["a"].Quota, w.Teams["b"].Quota)
	}
	if cfg.Teams["a"].Quota["h100"].Nominal != 10 || len(cfg.Pools) != 3 {
		t.Error("ForCluster changed the configuration it was given")
	}
}
