package slurm

import (
	"context"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/slurmtest"
	planslurm "github.com/allot-dev/allot/planner/slurm"
)

// cohortRepo: alpha (limit 2) and gamma (nominal 2, borrowing 2: limit 4)
// share cohort lab (4 GPUs); beta is alone with 4.
const cohortRepo = `package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 2, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: prod: priority: 10
cohorts: lab: {}
teams: {
	alpha: {costCenter: "A", owners: ["@a"], cohort: "lab", quota: h100: {nominal: 2, borrowingLimit: 0}}
	gamma: {costCenter: "G", owners: ["@g"], cohort: "lab", quota: h100: {nominal: 2, borrowingLimit: 2}}
	beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}
}
`

// TestExplainReal: Slurm's pending reasons of real jobs, in allot's words
// with Slurm's own numbers: a team at its limit (OverQuota), a team within
// its own but its cohort full (CohortExhausted), busy nodes
// (InsufficientNodes), a running job, and ids Slurm does not have.
func TestExplainReal(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	r := Runner{Env: c.Env()}
	ctx := context.Background()
	converge(t, r, build(t, cohortRepo))
	user := strings.TrimSpace(c.Run(t, "id", "-un"))
	c.Run(t, "sacctmgr", "-i", "add", "account", "ops")
	c.Run(t, "sacctmgr", "-i", "add", "user", user, "account=alpha,beta,gamma,ops")
	submit := func(account, gres string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", account, "-p", "gpu", "--gres="+gres, "--wrap", "sleep 300"))
	}
	explain := func(id string) planslurm.Explanation {
		t.Helper()
		es, err := r.Explain(ctx, id)
		if err != nil || len(es) != 1 {
			t.Fatalf("explain %s: %v, %+v", id, err, es)
		}
		t.Logf("%s: %s: %s", id, es[0].Code, es[0].Message)
		return es[0]
	}

	alpha := submit("alpha", "gpu:h100:2")
	beta := submit("beta", "gpu:h100:4")
	c.WaitJob(t, alpha, "RUNNING", "")
	c.WaitJob(t, beta, "RUNNING", "")
	if e := explain(alpha); e.Code != "" || !strings.HasPrefix(e.Message, "it runs on n") || e.GPUs != 2 || e.GRESType != "h100" {
		t.Errorf("running: %+v", e)
	}

	over := submit("alpha", "gpu:h100:1")
	c.WaitJob(t, over, "PENDING", "AssocGrpGRES")
	if e := explain(over); e.Code != "OverQuota" || e.Message != "team alpha may use 2 of h100 GPUs (gres/gpu:h100); 2 in use, it asks for 1" {
		t.Errorf("alpha over its limit: %+v", e)
	}

	cohort := submit("gamma", "gpu:h100:3")
	c.WaitJob(t, cohort, "PENDING", "AssocGrpGRES")
	if e := explain(cohort); e.Code != "CohortExhausted" || e.Message != "cohort lab may use 4 of h100 GPUs (gres/gpu:h100); 2 in use, it asks for 3" {
		t.Errorf("gamma within its limit, lab full: %+v", e)
	}

	// ops has no limit; no node has 4 GPUs free.
	busy := submit("ops", "gpu:h100:4")
	c.WaitJob(t, busy, "PENDING", "Resources")
	if e := explain(busy); e.Code != "InsufficientNodes" || e.Message != "partition gpu's nodes lack 4 free h100 GPUs on 1 node(s)" {
		t.Errorf("busy nodes: %+v", e)
	}

	if _, err := r.Explain(ctx, "99999"); err == nil || !strings.Contains(err.Error(), "Invalid job id") {
		t.Errorf("a job Slurm does not have: %v", err)
	}
	for _, bad := range []string{"1;reboot", "-h", "", "1_2_3", strings.Repeat("9", 13)} {
		if _, err := r.Explain(ctx, bad); err == nil || !strings.Contains(err.Error(), "want a Slurm job id") {
			t.Errorf("explain %q: %v", bad, err)
		}
	}
}

// TestRunBounded: a command that prints more than MaxOutput is stopped
// and named, its output never held whole.
func TestRunBounded(t *testing.T) {
	r := Runner{MaxOutput: 1 << 10}
	if _, err := r.run(context.Background(), []string{"seq", "1000000"}); err == nil || !strings.Contains(err.Error(), "seq 1000000: printed more than 1024 bytes") {
		t.Errorf("a long answer: %v", err)
	}
	if out, err := r.run(context.Background(), []string{"seq", "3"}); err != nil || out != "1\n2\n3\n" {
		t.Errorf("a short answer: %q, %v", out, err)
	}
	if _, err := r.run(context.Background(), []string{"sh", "-c", "echo no such job >&2; exit 1"}); err == nil || !strings.Contains(err.Error(), "no such job") {
		t.Errorf("a failure: %v", err)
	}
}
