package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/slurmtest"
)

// TestSlurmDemo: make demo-slurm end to end on a real Slurm: alpha's second
// job pends on alpha's GPU limit, explain says so with the numbers, the
// pull request's plan shows the quota and the Slurm change, and after the
// merge and apply the job runs; the harness and the repository are gone
// when it returns.
func TestSlurmDemo(t *testing.T) {
	slurmtest.Require(t)
	var out bytes.Buffer
	o := demoOptions(t, &out)
	res, err := runSlurm(context.Background(), o)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.reason != "AssocGrpGRES" || !strings.Contains(res.explain, "OverQuota: team alpha may use 2 of h100 GPUs (gres/gpu:h100); 2 in use, it asks for 2") {
		t.Errorf("before the change: reason %q, explain:\n%s", res.reason, res.explain)
	}
	for _, want := range []string{"alpha  h100         2      4     +2", "hpc            modify account  alpha  GrpTRES=gres/gpu=4,gres/gpu:h100=4"} {
		if !strings.Contains(res.plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, res.plan)
		}
	}
	if !res.runningAfter {
		t.Error("alpha's second job did not run after the change")
	}
	if _, err := os.Stat(res.harness); !os.IsNotExist(err) {
		t.Errorf("the harness folder %s is still there: %v", res.harness, err)
	}
	if !strings.Contains(out.String(), "Cleaned up: the repository, the Slurm cluster.") {
		t.Errorf("the demo did not say what it cleaned up")
	}
}
