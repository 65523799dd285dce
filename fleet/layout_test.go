package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/schema"
)

func TestNodesPerDomain(t *testing.T) {
	for name, tc := range map[string]struct {
		topo *schema.Topology
		want map[string]int64
	}{
		"none": {nil, map[string]int64{}},
		"block rack host": {
			&schema.Topology{Levels: []string{"block", "rack", "host"}, Sizes: map[string]int64{"rack": 4, "block": 8}},
			map[string]int64{"host": 1, "rack": 4, "block": 32},
		},
		"rack only, sized": {
			&schema.Topology{Levels: []string{"rack"}, Sizes: map[string]int64{"rack": 16}},
			map[string]int64{"rack": 16},
		},
		"unsized wide level is the whole pool": {
			&schema.Topology{Levels: []string{"zone", "rack", "host"}, Sizes: map[string]int64{"rack": 2}},
			map[string]int64{"host": 1, "rack": 2, "zone": 0},
		},
		"nvlink domain of 18 hosts": {
			&schema.Topology{Levels: []string{"nvlink", "host"}, Sizes: map[string]int64{"nvlink": 18}},
			map[string]int64{"host": 1, "nvlink": 18},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NodesPerDomain(tc.topo)); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestLayoutNamesAndDomains(t *testing.T) {
	cfg := &schema.Config{Pools: map[schema.PoolName]*schema.Pool{
		"a100": {Name: "a100", Cluster: "lab", Flavor: "a100-40gb", GPUsPerNode: 8,
			Topology: &schema.Topology{Levels: []string{"block", "rack", "host"}, Sizes: map[string]int64{"rack": 2, "block": 2}}},
		"t4": {Name: "t4", Cluster: "lab", Flavor: "t4", GPUsPerNode: 4},
	}}
	nodes := Layout(cfg, map[schema.PoolName]int64{"a100": 5, "t4": 1})
	if len(nodes) != 6 {
		t.Fatalf("got %d nodes, want 6", len(nodes))
	}
	n4 := nodes[4]
	want := []Domain{{"block", "a100-block-1"}, {"rack", "a100-rack-2"}, {"host", "a100-4"}}
	if n4.Name != "a100-4" || !cmp.Equal(n4.Domains, want) {
		t.Fatalf("node 4 = %s %v, want a100-4 %v", n4.Name, n4.Domains, want)
	}
	if nodes[1].Domains[1].Name != "a100-rack-0" || nodes[2].Domains[1].Name != "a100-rack-1" {
		t.Fatalf("hosts 0,1 in rack 0 and host 2 in rack 1: got %v %v", nodes[1].Domains, nodes[2].Domains)
	}
	if nodes[5].Name != "t4-0" || nodes[5].Domains != nil || nodes[5].GPUs != 4 {
		t.Fatalf("t4 node = %+v", nodes[5])
	}
	if got := n4.Labels()[contract.TopologyLabel("rack")]; got != "a100-rack-2" {
		t.Fatalf("rack label = %q", got)
	}
}
