package slurm_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/internal/slurmtest"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
)

// enforceRepo is the harness's cluster (nodes n1, n2 of 4 H100 each, one
// partition gpu) with two teams of 4 GPUs each.
const enforceRepo = `package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 2, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: {
	prod: priority: 10
	spot: {priority: 1, preemptible: true}
}
teams: {
	alpha: {costCenter: "A", owners: ["@a"], quota: h100: nominal: 4}
	beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}
}
`

// TestRenderedAccountingEnforced runs the rendered sacctmgr commands (argv)
// against a real Slurm: a team at its GPU limit gets its next job pending
// with AssocGrpGRES, typed or untyped, while the other team's job runs.
func TestRenderedAccountingEnforced(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	applyEnforceRepo(t, c)

	submit := func(account, gres string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", account, "-p", "gpu", "--gres="+gres, "--wrap", "sleep 300"))
	}
	full := submit("alpha", "gpu:h100:4")
	c.WaitJob(t, full, "RUNNING", "")
	typed := submit("alpha", "gpu:h100:1")
	untyped := submit("alpha", "gpu:1")
	other := submit("beta", "gpu:h100:2")
	c.WaitJob(t, other, "RUNNING", "")
	c.WaitJob(t, typed, "PENDING", "AssocGrpGRES")
	c.WaitJob(t, untyped, "PENDING", "AssocGrpGRES")
}

// TestRenderedPreemptionRequeues: the rendered QOS make a production-tier
// job requeue an opportunist (preemptible tier) one on a real Slurm: alpha's
// spot job holds the only node's GPUs; beta's prod job, within beta's
// limit, takes them, and the spot job goes back to the queue (requeued, not
// cancelled).
func TestRenderedPreemptionRequeues(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 1, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	applyEnforceRepo(t, c)
	submit := func(account, qos string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", account, "--qos", qos, "-p", "gpu", "--gres=gpu:h100:4", "--wrap", "sleep 300"))
	}
	spot := submit("alpha", "spot")
	c.WaitJob(t, spot, "RUNNING", "")
	prod := submit("beta", "prod")
	c.WaitJob(t, prod, "RUNNING", "")
	c.WaitJob(t, spot, "PENDING", "")
	if out := c.Run(t, "scontrol", "-o", "show", "job", spot); !strings.Contains(out, " Restarts=1 ") {
		t.Errorf("the spot job was not requeued once:\n%s", out)
	}
}

// applyEnforceRepo runs enforceRepo's rendered sacctmgr commands (argv) on
// c and lets this user submit to alpha and beta.
func applyEnforceRepo(t *testing.T, c *slurmtest.Cluster) {
	t.Helper()
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(enforceRepo)}})
	if cfg == nil {
		t.Fatal(findings)
	}
	want, err := slurm.Build(cfg, planner.Build(cfg), "hpc")
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range want.Commands() {
		for _, argv := range sec.Argv {
			c.Run(t, argv[0], argv[1:]...)
		}
	}
	user := strings.TrimSpace(c.Run(t, "id", "-un"))
	c.Run(t, "sacctmgr", "-i", "add", "user", user, "account=alpha,beta")
}
