package slurmtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStartRunStop starts a cluster, runs a GPU job on it, and stops it
// with the job still running: nothing of the harness may be left.
func TestStartRunStop(t *testing.T) {
	begin := time.Now()
	c := Start(t, Options{Nodes: 3, GPUsPerNode: 4})
	t.Logf("3 nodes idle in %v", time.Since(begin).Round(time.Millisecond))

	out := c.Run(t, "sinfo", "-h", "-N", "-o", "%N %G %T")
	for _, n := range []string{"n1", "n2", "n3"} {
		if !strings.Contains(out, n+" gpu:h100:4 idle") {
			t.Errorf("sinfo lacks %s with 4 idle h100: %q", n, out)
		}
	}
	c.Run(t, "sacctmgr", "-i", "add", "account", "a")
	c.Run(t, "sacctmgr", "-i", "add", "user", currentUser(), "account=a")
	id := strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "-A", "a", "--gres=gpu:h100:2", "--wrap", "sleep 300"))
	c.WaitJob(t, id, "RUNNING", "")
	for deadline := time.Now().Add(10 * time.Second); len(c.stepds()) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if len(c.stepds()) == 0 {
		t.Fatalf("job %s runs but no slurmstepd carries the harness's marker: %v", id, c.Leftovers())
	}

	begin = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(begin).Round(time.Millisecond))
	if left := c.Leftovers(); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
	}
}

// TestTwoAtOnce runs two clusters side by side: each sees only its own
// nodes and jobs.
func TestTwoAtOnce(t *testing.T) {
	t.Parallel()
	a := Start(t, Options{Nodes: 1, GPUsPerNode: 2})
	b := Start(t, Options{Nodes: 2, GPUsPerNode: 2, GPUType: "a100"})
	if out := a.Run(t, "sinfo", "-h", "-N", "-o", "%N %G"); strings.TrimSpace(out) != "n1 gpu:h100:2" {
		t.Errorf("cluster a: sinfo %q", out)
	}
	if out := b.Run(t, "sinfo", "-h", "-N", "-o", "%N %G"); strings.Count(out, "gpu:a100:2") != 2 {
		t.Errorf("cluster b: sinfo %q", out)
	}
	b.Run(t, "sacctmgr", "-i", "add", "account", "only-b")
	if out := a.Run(t, "sacctmgr", "-nP", "show", "account", "format=account"); strings.Contains(out, "only-b") {
		t.Errorf("cluster a sees cluster b's account: %q", out)
	}
}

// recorder is a testing.TB that records Skip and Fatal instead of acting.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

// TestRequireWithoutBinaries: without Slurm on PATH a test skips with one
// line naming the install command, and fails instead under
// ALLOT_REQUIRE_SLURM=1.
func TestRequireWithoutBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for tc, want := range map[string]string{"": "skip", "1": "fail"} {
		t.Setenv(RequireEnv, tc)
		r := &recorder{TB: t}
		Require(r)
		got, msg := "skip", r.skipped
		if r.failed != "" {
			got, msg = "fail", r.failed
		}
		if got != want || msg == "" {
			t.Errorf("%s=%q: %s %q, want %s", RequireEnv, tc, got, msg, want)
		}
		if strings.Contains(msg, "\n") || !strings.Contains(msg, Install) || !strings.Contains(msg, "slurmctld") {
			t.Errorf("%s=%q: message %q is not one line naming slurmctld and %q", RequireEnv, tc, msg, Install)
		}
	}
}
