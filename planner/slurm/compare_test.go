package slurm

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

const compareRepo = `package capacity
clusters: {
	hpc: {provider: "onprem", scheduler: "slurm"}
	k8s: {provider: "onprem"}
}
pools: {
	h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 2, price: onDemandPerNodeHour: 1,
		slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
	k: {cluster: "k8s", flavor: "a100", gpusPerNode: 8, nodes: max: 2, price: onDemandPerNodeHour: 1}
}
tiers: prod: priority: 10
teams: {
	alpha: {costCenter: "A", owners: ["@a"], quota: {h100: nominal: 4, a100: nominal: 8}}
	beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}
}
`

func loadSrc(t *testing.T, src string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("%s", findings)
	}
	return cfg, planner.Build(cfg)
}

// TestCompare: what a change of the repository does to a Slurm cluster's
// accounting, as allot slurm apply will do it after the merge; a change of
// a Kubernetes cluster's quota alone does nothing to Slurm.
func TestCompare(t *testing.T) {
	bc, bp := loadSrc(t, compareRepo)
	for _, c := range []struct {
		name, from, to string
		want           []string // op kind name
	}{
		{"unchanged", "", "", nil},
		{"kubernetes only", "a100: nominal: 8", "a100: nominal: 16", nil},
		{"quota lowered", "beta: {costCenter: \"B\", owners: [\"@b\"], quota: h100: nominal: 4}", "beta: {costCenter: \"B\", owners: [\"@b\"], quota: h100: nominal: 2}", []string{"modify account beta"}},
		{"tier added", "tiers: prod: priority: 10", "tiers: {prod: priority: 10, spot: {priority: 1, preemptible: true}}", []string{"add qos spot", "modify qos prod", "modify qos prod", "modify account alpha", "modify account beta"}}, // prod: priority, then Preempt=spot
		{"team removed", "\tbeta: {costCenter: \"B\", owners: [\"@b\"], quota: h100: nominal: 4}\n", "", []string{"remove account beta"}},
		{"cluster now Kubernetes", `hpc: {provider: "onprem", scheduler: "slurm"}`, `hpc: {provider: "onprem"}`, []string{"remove account beta", "remove account alpha", "remove qos prod"}}, // children first, in reverse
	} {
		src := compareRepo
		if c.from != "" {
			if !strings.Contains(src, c.from) {
				t.Fatalf("%s: the repository lacks %q", c.name, c.from)
			}
			src = strings.Replace(src, c.from, c.to, 1)
		}
		if c.name == "cluster now Kubernetes" {
			src = strings.Replace(src, "\n\t\tslurm: {partition: \"gpu\", nodePrefix: \"n\", firstIndex: 1}", "", 1)
		}
		hc, hp := loadSrc(t, src)
		got := Compare(bc, bp, hc, hp)
		var ops []string
		for _, cc := range got {
			if cc.Cluster != "hpc" {
				t.Errorf("%s: changes of cluster %s", c.name, cc.Cluster)
			}
			for _, ch := range cc.Changes {
				ops = append(ops, ch.Op+" "+ch.Kind+" "+ch.Name)
				if ch.Op != "conflict" && len(ch.Argv) == 0 {
					t.Errorf("%s: %+v has no sacctmgr argv", c.name, ch)
				}
			}
		}
		if strings.Join(ops, "; ") != strings.Join(c.want, "; ") {
			t.Errorf("%s: changes %q, want %q\n%+v", c.name, ops, c.want, got)
		}
	}
}
