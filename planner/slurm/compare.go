package slurm

import (
	"maps"
	"slices"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// ClusterChanges is what a change of the repository does to one Slurm
// cluster's accounting.
type ClusterChanges struct {
	Cluster schema.ClusterName `json:"cluster"`
	Changes []Change           `json:"changes"`
}

// Compare returns, for each Slurm cluster of base or head whose
// accounting differs, the changes allot slurm apply makes to a cluster that
// holds base's accounting once head is merged: what a pull request changes
// in Slurm, for its reviewers. A cluster whose render fails (its findings
// say why) is left out.
func Compare(baseCfg *schema.Config, base *planner.Plan, headCfg *schema.Config, head *planner.Plan) []ClusterChanges {
	names := map[schema.ClusterName]bool{}
	for _, cfg := range []*schema.Config{baseCfg, headCfg} {
		for _, c := range cfg.ClustersRunBy(schema.SchedulerSlurm) {
			names[c] = true
		}
	}
	var out []ClusterChanges
	for _, name := range slices.Sorted(maps.Keys(names)) {
		live, want := &Live{}, &Cluster{Name: name}
		if cl := baseCfg.Clusters[name]; cl != nil && cl.Scheduler == schema.SchedulerSlurm {
			b, err := Build(baseCfg, base, name)
			if err != nil {
				continue
			}
			live.QOS, live.Accounts = b.QOS, b.Accounts
		}
		if cl := headCfg.Clusters[name]; cl != nil && cl.Scheduler == schema.SchedulerSlurm {
			h, err := Build(headCfg, head, name)
			if err != nil {
				continue
			}
			want = h
		}
		if changes := Diff(want, live); len(changes) > 0 {
			out = append(out, ClusterChanges{Cluster: name, Changes: changes})
		}
	}
	return out
}
