package slurm

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/internal/slurmtest"
	"github.com/allot-dev/allot/planner"
	planslurm "github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
)

const repo = `package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 2, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: {
	prod: priority: 10
	spot: {priority: 1, preemptible: true}
}
cohorts: lab: {}
teams: {
	alpha: {costCenter: "A", owners: ["@a"], cohort: "lab", quota: h100: {nominal: 4, borrowingLimit: 0}}
	beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}
}
`

func build(t *testing.T, src string) *planslurm.Cluster {
	t.Helper()
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil {
		t.Fatal(findings)
	}
	c, err := planslurm.Build(cfg, planner.Build(cfg), "hpc")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// converge plans and applies want, and returns the changes it ran.
func converge(t *testing.T, r Runner, want *planslurm.Cluster) []planslurm.Change {
	t.Helper()
	ctx := context.Background()
	live, err := r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changes := planslurm.Diff(want, live)
	if err := r.Apply(ctx, changes); err != nil {
		t.Fatal(err)
	}
	return changes
}

// TestConverge against a real Slurm: apply creates the accounting; a second
// apply changes nothing; a hand-made drift is undone; a quota lowered in Git
// is enforced; a team removed is pruned; an account and a QOS allot did not
// create are never touched, even when the repository names them.
func TestConverge(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	r := Runner{Env: c.Env()}
	// The site's own account and QOS, made by hand before allot.
	c.Run(t, "sacctmgr", "-i", "add", "qos", "site", "Priority=5")
	c.Run(t, "sacctmgr", "-i", "add", "account", "ops", "Description=site", "Organization=site")
	c.Run(t, "sacctmgr", "-i", "modify", "account", "where", "name=ops", "set", "GrpTRES=gres/gpu=1")
	foreign := func() string {
		return c.Run(t, "sacctmgr", "-nP", "show", "assoc", "where", "account=ops", "format=account,grptres") +
			c.Run(t, "sacctmgr", "-nP", "show", "qos", "where", "name=site", "format=name,priority")
	}
	before := foreign()

	if got := converge(t, r, build(t, repo)); len(got) == 0 {
		t.Fatal("first apply changed nothing")
	}
	if got := converge(t, r, build(t, repo)); len(got) != 0 {
		t.Fatalf("second apply changed %+v", got)
	}

	// Drift: an admin raises alpha's limit by hand.
	c.Run(t, "sacctmgr", "-i", "modify", "account", "where", "name=alpha", "set", "GrpTRES=gres/gpu=8,gres/gpu:h100=8")
	got := converge(t, r, build(t, repo))
	if len(got) != 1 || got[0].Name != "alpha" || got[0].Op != "modify" {
		t.Fatalf("drift: changes %+v, want one modify of alpha", got)
	}

	// Lower alpha's quota to 2: a 2-GPU job runs, the next GPU pends.
	lowered := strings.Replace(repo, "quota: h100: {nominal: 4,", "quota: h100: {nominal: 2,", 1)
	converge(t, r, build(t, lowered))
	user := strings.TrimSpace(c.Run(t, "id", "-un"))
	c.Run(t, "sacctmgr", "-i", "add", "user", user, "account=alpha,beta")
	submit := func(account, gres string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", account, "-p", "gpu", "--gres="+gres, "--wrap", "sleep 300"))
	}
	running := submit("alpha", "gpu:h100:2")
	c.WaitJob(t, running, "RUNNING", "")
	over := submit("alpha", "gpu:h100:1")
	other := submit("beta", "gpu:h100:4")
	c.WaitJob(t, other, "RUNNING", "")
	c.WaitJob(t, over, "PENDING", "AssocGrpGRES")

	// Prune: beta leaves the repository; its jobs are cancelled first.
	c.Run(t, "scancel", other)
	noBeta := strings.Replace(lowered, `beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}`, "", 1)
	got = converge(t, r, build(t, noBeta))
	if len(got) != 1 || got[0].Op != "remove" || got[0].Name != "beta" {
		t.Fatalf("prune: changes %+v, want the removal of beta", got)
	}

	// The repository names the site's QOS: a conflict, left alone.
	clash := strings.Replace(noBeta, "spot: {priority: 1,", "site: {priority: 1,", 1)
	got = planslurm.Diff(build(t, clash), mustRead(t, r))
	if !hasConflict(got, "qos", "site") {
		t.Errorf("a QOS allot did not make is not a conflict: %+v", got)
	}
	if after := foreign(); after != before {
		t.Errorf("the site's account or QOS changed:\nbefore %q\nafter  %q", before, after)
	}
}

func mustRead(t *testing.T, r Runner) *planslurm.Live {
	t.Helper()
	live, err := r.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return live
}

func hasConflict(cs []planslurm.Change, kind, name string) bool {
	for _, c := range cs {
		if c.Op == "conflict" && c.Kind == kind && c.Name == name && c.Argv == nil {
			return true
		}
	}
	return false
}
