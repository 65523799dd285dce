package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/slurmtest"
)

// TestSlurmPlanApply: plan shows the additions, apply makes them, and then
// plan shows no changes and apply changes nothing, against a real Slurm.
func TestSlurmPlanApply(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 1, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(`package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 1, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: prod: priority: 10
teams: alpha: {costCenter: "A", owners: ["@a"], quota: h100: nominal: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLURM_CONF": c.Conf}
	code, stdout, stderr := allot(t, env, "slurm", "plan", dir, "--cluster", "hpc")
	if code != 0 || !strings.Contains(stdout, "+ qos prod ") || !strings.Contains(stdout, "+ account alpha Parent=root") {
		t.Fatalf("plan: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := allot(t, env, "slurm", "apply", dir, "--cluster", "hpc"); code != 0 || !strings.Contains(stderr, "hpc: 3 change(s) applied") {
		t.Fatalf("apply: exit %d\n%s", code, stderr)
	}
	if code, stdout, _ := allot(t, env, "slurm", "plan", dir, "--cluster", "hpc"); code != 0 || stdout != "no changes\n" {
		t.Errorf("plan after apply: exit %d, %q", code, stdout)
	}
	if code, _, stderr := allot(t, env, "slurm", "apply", dir, "--cluster", "hpc"); code != 0 || !strings.Contains(stderr, "hpc: 0 change(s) applied") {
		t.Errorf("second apply: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := allot(t, env, "slurm", "plan", dir, "--cluster", "nope"); code != 2 || !strings.Contains(stderr, "[hpc]") {
		t.Errorf("unknown cluster: exit %d\n%s", code, stderr)
	}

	// allot explain slurm/ID: alpha's limit of 4 is in use.
	user := strings.TrimSpace(c.Run(t, "id", "-un"))
	c.Run(t, "sacctmgr", "-i", "add", "user", user, "account=alpha")
	submit := func(gres string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", "alpha", "--gres="+gres, "--wrap", "sleep 300"))
	}
	c.WaitJob(t, submit("gpu:h100:4"), "RUNNING", "")
	over := submit("gpu:1")
	c.WaitJob(t, over, "PENDING", "AssocGrpGRES")
	code, stdout, stderr = allot(t, env, "explain", "slurm/"+over)
	want := "slurm/" + over + ": account alpha, QOS prod, partition gpu, 1 GPUs on 1 node(s): PENDING (AssocGrpGRES)\n" +
		"  OverQuota: team alpha may use 4 of GPUs (gres/gpu); 4 in use, it asks for 1\n  The team's GPU limit"
	if code != 0 || !strings.HasPrefix(stdout, want) {
		t.Errorf("explain: exit %d\n%s%s\nwant it to start\n%s", code, stdout, stderr, want)
	}
	if code, _, stderr := allot(t, env, "explain", "slurm/1;reboot"); code != exitUsage || !strings.Contains(stderr, `job "1;reboot": want a Slurm job id`) {
		t.Errorf("explain of a bad id: exit %d, %s", code, stderr)
	}
}
