package terraform

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/allot-dev/allot/schema"
)

// change builds a resource change of a plan.
func change(typ, addr string, actions tfjson.Actions, before, after any) *tfjson.ResourceChange {
	return &tfjson.ResourceChange{Address: addr, Type: typ, Mode: tfjson.ManagedResourceMode,
		Change: &tfjson.Change{Actions: actions, Before: before, After: after}}
}

func node(pool, name string) map[string]any {
	return map[string]any{"input": map[string]any{"pool": pool, "node": name, "command": "hook"}}
}

func confirmed(pool, name string) map[string]any {
	return map[string]any{"input": map[string]any{"pool": pool, "node": name, "confirmed": true}}
}

var (
	actCreate  = tfjson.Actions{tfjson.ActionCreate}
	actUpdate  = tfjson.Actions{tfjson.ActionUpdate}
	actDelete  = tfjson.Actions{tfjson.ActionDelete}
	actReplace = tfjson.Actions{tfjson.ActionDelete, tfjson.ActionCreate}
	actNoop    = tfjson.Actions{tfjson.ActionNoop}
)

func TestSummarize(t *testing.T) {
	gke := func(n float64) map[string]any { return map[string]any{"name": "h100-gke", "node_count": n} }
	eks := func(n float64) map[string]any {
		return map[string]any{"node_group_name": "p5-eks", "scaling_config": []any{map[string]any{"desired_size": n, "max_size": 16.0}}}
	}
	tests := map[string]struct {
		changes []*tfjson.ResourceChange
		drift   []*tfjson.ResourceChange
		want    []PoolPlan
	}{
		"gke pool grows in place": {
			changes: []*tfjson.ResourceChange{change("google_container_node_pool", "a", actUpdate, gke(3), gke(5))},
			want:    []PoolPlan{{Cluster: "c", Pool: "h100-gke", NodesBefore: 3, NodesAfter: 5, Change: 1}},
		},
		"gke regional pool moves to one zone: 2 nodes in each of 3 zones become 2": {
			changes: []*tfjson.ResourceChange{change("google_container_node_pool", "a", actUpdate,
				map[string]any{"name": "h100-gke", "node_count": 2.0, "node_locations": []any{"us-east1-b", "us-east1-c", "us-east1-d"}},
				map[string]any{"name": "h100-gke", "node_count": 2.0, "node_locations": []any{"us-east1-b"}})},
			want: []PoolPlan{{Cluster: "c", Pool: "h100-gke", NodesBefore: 6, NodesAfter: 2, Change: 1}},
		},
		"eks group created": {
			changes: []*tfjson.ResourceChange{change("aws_eks_node_group", "a", actCreate, nil, eks(4))},
			want:    []PoolPlan{{Cluster: "c", Pool: "p5-eks", NodesBefore: 0, NodesAfter: 4, Add: 1}},
		},
		"kwok pool grows by one node": {
			changes: []*tfjson.ResourceChange{
				change("terraform_data", "p", actUpdate, map[string]any{"input": map[string]any{"pool": "a100", "nodes": 1.0}}, map[string]any{"input": map[string]any{"pool": "a100", "nodes": 2.0}}),
				change("terraform_data", "n0", actNoop, node("a100", "a100-0"), node("a100", "a100-0")),
				change("terraform_data", "c0", actNoop, confirmed("a100", "a100-0"), confirmed("a100", "a100-0")),
				change("terraform_data", "n1", actCreate, nil, node("a100", "a100-1")),
				change("terraform_data", "c1", actCreate, nil, confirmed("a100", "a100-1")),
			},
			want: []PoolPlan{{Cluster: "c", Pool: "a100", NodesBefore: 1, NodesAfter: 2, Add: 2, Change: 1}},
		},
		"kwok nodes confirmed after a run cut short": {
			changes: []*tfjson.ResourceChange{
				change("terraform_data", "n0", actNoop, node("a100", "a100-0"), node("a100", "a100-0")),
				change("terraform_data", "c0", actCreate, nil, confirmed("a100", "a100-0")),
			},
			want: []PoolPlan{{Cluster: "c", Pool: "a100", NodesBefore: 1, NodesAfter: 1, Add: 1, Resumed: 1}},
		},
		"a tainted node is not counted before": {
			changes: []*tfjson.ResourceChange{func() *tfjson.ResourceChange {
				rc := change("terraform_data", "n0", actReplace, node("a100", "a100-0"), node("a100", "a100-0"))
				rc.ActionReason = tfjson.ActionReasonReplaceBecauseTainted
				return rc
			}(), change("terraform_data", "c0", actCreate, nil, confirmed("a100", "a100-0"))},
			want: []PoolPlan{{Cluster: "c", Pool: "a100", NodesBefore: 0, NodesAfter: 1, Add: 2, Destroy: 1}},
		},
		"kwok pool shrinks": {
			changes: []*tfjson.ResourceChange{
				change("terraform_data", "n1", actDelete, node("a100", "a100-1"), nil),
				change("terraform_data", "c1", actDelete, confirmed("a100", "a100-1"), nil),
			},
			want: []PoolPlan{{Cluster: "c", Pool: "a100", NodesBefore: 1, NodesAfter: 0, Destroy: 2}},
		},
		"drift found by the refresh": {
			changes: []*tfjson.ResourceChange{change("google_container_node_pool", "a", actUpdate, gke(4), gke(3))},
			drift:   []*tfjson.ResourceChange{change("google_container_node_pool", "google_container_node_pool.h100-gke", actUpdate, gke(3), gke(4))},
			want:    []PoolPlan{{Cluster: "c", Pool: "h100-gke", NodesBefore: 4, NodesAfter: 3, Change: 1, Drift: []string{"google_container_node_pool.h100-gke"}}},
		},
		"resources of no pool are left out": {
			changes: []*tfjson.ResourceChange{
				change("terraform_data", "x", actCreate, nil, map[string]any{"input": "something"}),
				change("google_compute_network", "n", actCreate, nil, map[string]any{"name": "net"}),
			},
			want: []PoolPlan{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Summarize("c", &tfjson.Plan{ResourceChanges: tc.changes, ResourceDrift: tc.drift})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := Summarize("c", nil); got != nil {
		t.Errorf("summary of no plan: %v", got)
	}
}

func TestNodeAddress(t *testing.T) {
	for pool, want := range map[string]string{
		"a100":  `terraform_data.a100_nodes["a100-3"]`,
		"8x-l4": `terraform_data.pool-8x-l4_nodes["a100-3"]`,
	} {
		if got := NodeAddress(schema.PoolName(pool), "a100-3"); got != want {
			t.Errorf("NodeAddress(%s) = %s, want %s", pool, got, want)
		}
	}
}
