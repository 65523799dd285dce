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

func TestLayoutHeld(t *testing.T) {
	cfg := &schema.Config{Pools: map[schema.PoolName]*schema.Pool{
		"p": {Name: "p", Cluster: "c", Flavor: "f", GPUsPerNode: 8, Topology: &schema.Topology{Levels: []string{"rack", "host"}, Sizes: map[string]int64{"rack": 2}}},
	}}
	names := func(nodes []Node) (out []string) {
		for _, n := range nodes {
			out = append(out, n.Name+"@"+n.Domains[0].Name)
		}
		return out
	}
	for name, tc := range map[string]struct {
		held Held
		want []string
	}{
		"nothing yet":                    {Held{}, []string{"p-0@p-rack-0", "p-1@p-rack-0", "p-2@p-rack-1"}},
		"a retired node's seat moves on": {Held{Names: []string{"p-0", "p-1", "p-2"}, Retired: map[string]bool{"p-1": false}}, []string{"p-0@p-rack-0", "p-2@p-rack-1", "p-3@p-rack-1"}},
		"kept stays at its index":        {Held{Names: []string{"p-0", "p-1", "p-2"}, Retired: map[string]bool{"p-1": true}}, []string{"p-0@p-rack-0", "p-1@p-rack-0", "p-2@p-rack-1", "p-3@p-rack-1"}},
		// A retired node gone, and forgotten: the nodes there keep their
		// seats, a low index is not taken back over a high one.
		"gone and forgotten":                    {Held{Names: []string{"p-2", "p-3", "p-4"}}, []string{"p-2@p-rack-1", "p-3@p-rack-1", "p-4@p-rack-2"}},
		"a gap filled lowest first":             {Held{Names: []string{"p-0", "p-4"}}, []string{"p-0@p-rack-0", "p-1@p-rack-0", "p-4@p-rack-2"}},
		"too many: the highest go":              {Held{Names: []string{"p-0", "p-1", "p-2", "p-5"}}, []string{"p-0@p-rack-0", "p-1@p-rack-0", "p-2@p-rack-1"}},
		"a kept name not there is not laid out": {Held{Names: []string{"p-0", "p-1", "p-2"}, Retired: map[string]bool{"p-7": true}}, []string{"p-0@p-rack-0", "p-1@p-rack-0", "p-2@p-rack-1"}},
		"names of no pool are ignored": {Held{Names: []string{"q-0", "p-", "", "p-01", "p-99999999999", "p-0", "p-0"}, Retired: map[string]bool{"q-0": true, "p-01": true}},
			[]string{"p-0@p-rack-0", "p-1@p-rack-0", "p-2@p-rack-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := names(LayoutHeld(cfg, map[schema.PoolName]int64{"p": 3}, map[schema.PoolName]Held{"p": tc.held}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
		})
	}
}
