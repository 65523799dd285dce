package planner

import (
	"strings"
	"testing"

	"github.com/allot-dev/allot/schema"
)

func TestWithObserved(t *testing.T) {
	for name, tc := range map[string]struct {
		max         int64
		obs         Observed
		wantNodes   int64
		wantReplace int64
		wantCost    string // 730 x $10 x nodes
		wantMsg     string // "" for no finding
	}{
		// 64 GPUs of quota on 8-GPU nodes: 8 nodes, none spare.
		"all healthy": {max: 12, obs: Observed{Nodes: 8, UsableNodes: 8, HealthyGPUs: 64}, wantNodes: 8, wantCost: "58400"},
		// 2 nodes down: 48 healthy GPUs, 16 short: 2 replacements.
		"two nodes down": {max: 12, obs: Observed{Nodes: 8, UsableNodes: 6, HealthyGPUs: 48}, wantNodes: 10, wantReplace: 2, wantCost: "73000",
			wantMsg: "pool p has 48 healthy GPUs of the 64 its quotas need (2 of 8 nodes unusable); 2 replacement node(s) planned"},
		// A node with 4 of its GPUs faulty: 60 healthy, 4 short: one node.
		"part of a node": {max: 12, obs: Observed{Nodes: 8, UsableNodes: 8, HealthyGPUs: 60}, wantNodes: 9, wantReplace: 1, wantCost: "65700",
			wantMsg: "pool p has 60 healthy GPUs of the 64 its quotas need (0 of 8 nodes unusable); 1 replacement node(s) planned"},
		// nodes.max leaves room for one replacement only.
		"held at max": {max: 9, obs: Observed{Nodes: 8, UsableNodes: 6, HealthyGPUs: 48}, wantNodes: 9, wantReplace: 1, wantCost: "65700",
			wantMsg: "at nodes.max (9) it stays 8 GPUs short until nodes recover"},
		// Nodes not registered yet are not unhealthy: the target already adds them.
		"nodes still coming": {max: 12, obs: Observed{Nodes: 4, UsableNodes: 4, HealthyGPUs: 32}, wantNodes: 8, wantCost: "58400",
			wantMsg: "pool p has 32 healthy GPUs of the 64 its quotas need (0 of 4 nodes unusable)"},
		// An observation out of range (an edited status) is read inside it: no
		// overflow into "-1 healthy GPUs" and "9223372036854775804 of -5 nodes".
		"out of range": {max: 12, obs: Observed{Nodes: -5, UsableNodes: 1<<63 - 1, HealthyGPUs: -1}, wantNodes: 8, wantCost: "58400",
			wantMsg: "pool p has 0 healthy GPUs of the 64 its quotas need (0 of 0 nodes unusable)"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config([]*schema.Pool{pool("p", 8, 0, tc.max, "10")}, map[schema.TeamName]map[schema.Flavor]int64{"a": {"h100": 64}})
			base := Build(cfg)
			got, findings := WithObserved(cfg, base, map[schema.PoolName]Observed{"p": tc.obs})
			pp := got.Pool("p")
			if pp.NodesTarget != tc.wantNodes || pp.ReplacementNodes != tc.wantReplace || pp.GPUsTarget != tc.wantNodes*8 {
				t.Errorf("nodes %d (replacement %d, GPUs %d), want %d (%d)", pp.NodesTarget, pp.ReplacementNodes, pp.GPUsTarget, tc.wantNodes, tc.wantReplace)
			}
			if got.TotalMonthlyUSD.String() != tc.wantCost || got.Team("a").MonthlyUSD.String() != tc.wantCost {
				t.Errorf("cost %s (team %s), want %s", got.TotalMonthlyUSD, got.Team("a").MonthlyUSD, tc.wantCost)
			}
			if base.Pool("p").NodesTarget != 8 || base.TotalMonthlyUSD.String() != "58400" {
				t.Errorf("the base plan changed: %d nodes, $%s", base.Pool("p").NodesTarget, base.TotalMonthlyUSD)
			}
			switch {
			case tc.wantMsg == "" && len(findings) > 0:
				t.Errorf("unexpected findings %v", findings)
			case tc.wantMsg != "" && (len(findings) != 1 || !strings.Contains(findings[0].Message, tc.wantMsg) || findings[0].Rule != RuleUnhealthyCapacity):
				t.Errorf("findings %v, want one saying %q", findings, tc.wantMsg)
			}
		})
	}
}
