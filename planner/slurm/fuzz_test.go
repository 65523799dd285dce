package slurm

import (
	"regexp"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// safeLine is what a rendered line may hold: Slurm names, numbers, hostlists,
// key=value, lists, and the comments' words. No quote but the empty ”, no
// $, `, ;, |, &, newline inside a value, or space inside a name.
var safeLine = regexp.MustCompile(`^([#A-Za-z0-9_=,:/\[\]. ()-]|'')*$`)

// FuzzRender builds a Slurm cluster from names and numbers straight into the
// model, as if the schema and the policies had let anything through: Render
// either refuses or writes only safe lines naming what it was given.
func FuzzRender(f *testing.F) {
	f.Add("nlp", "prod", "research", "gpu", "dgx", "h100", 3, int64(1), int64(4))
	f.Add("a b", "x;rm -rf /", "c\nd", "p=q", "n[1-2]", "gpu:h100", 0, int64(0), int64(1))
	f.Add("root", "normal", "$(id)", "`id`", "a,b", "'", 7, int64(-1), int64(-5))
	f.Fuzz(func(t *testing.T, team, tier, cohort, partition, prefix, gres string, digits int, first, nodes int64) {
		if nodes > 64 {
			nodes = 64
		}
		cfg := &schema.Config{
			Clusters: map[schema.ClusterName]*schema.Cluster{"hpc": {Name: "hpc", Provider: schema.ProviderOnPrem, Scheduler: schema.SchedulerSlurm}},
			Pools: map[schema.PoolName]*schema.Pool{"p": {Name: "p", Cluster: "hpc", Flavor: "h100", GPUsPerNode: 8, MaxNodes: nodes,
				Slurm: &schema.SlurmNodes{Partition: partition, NodePrefix: prefix, NodeDigits: digits, FirstIndex: first, GRESType: gres}}},
			Tiers:   map[schema.TierName]*schema.Tier{schema.TierName(tier): {Name: schema.TierName(tier), Priority: 1}},
			Cohorts: map[schema.CohortName]*schema.Cohort{schema.CohortName(cohort): {Name: schema.CohortName(cohort)}},
			Teams: map[schema.TeamName]*schema.Team{schema.TeamName(team): {Name: schema.TeamName(team), Cohort: schema.CohortName(cohort),
				Quota: map[schema.Flavor]schema.Quota{"h100": {Nominal: 8}}, Weight: quantity.Int(1)}},
		}
		files, err := Render(cfg, planner.Build(cfg))
		if err != nil {
			return
		}
		for _, file := range files {
			if strings.HasSuffix(file.Path, ".json") {
				continue
			}
			for _, l := range strings.Split(string(file.Data), "\n") {
				if !safeLine.MatchString(l) {
					t.Fatalf("%s: unsafe line %q", file.Path, l)
				}
			}
		}
		for _, name := range []string{team, tier, partition, prefix, gres} {
			if nodes > 0 && !schema.SlurmName.MatchString(name) {
				t.Fatalf("rendered with %q, which is not a Slurm name", name)
			}
		}
	})
}
