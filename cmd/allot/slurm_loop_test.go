package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	slurmctl "github.com/allot-dev/allot/controllers/slurm"
	"github.com/allot-dev/allot/internal/gittest"
	"github.com/allot-dev/allot/internal/slurmtest"
)

const loopRepo = `package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 1, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: prod: priority: 10
teams: alpha: {costCenter: "A", owners: ["@a"], quota: h100: nominal: 4}
`

// TestSlurmLoop against a real Slurm: the loop applies a Git checkout's
// HEAD and records it; a drift made by hand is undone at the next interval;
// a broken revision leaves the last one applied, with Ready=False and
// Stalled=True; slurm status prints both; the loop ends when its context does.
func TestSlurmLoop(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 1, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	t.Setenv("SLURM_CONF", c.Conf)
	dir := t.TempDir()
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	commit := func(src, msg string) string {
		if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, dir, "add", "-A")
		gittest.Run(t, dir, "commit", "-q", "-m", msg)
		return "sha1:" + strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	}
	good := commit(loopRepo, "alpha: 4 GPUs")
	file := filepath.Join(t.TempDir(), "state", "slurm-hpc.json")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- slurmLoop(ctx, slurmLoopOptions{dir: dir, cluster: "hpc", statusFile: file, interval: time.Second,
			attemptTimeout: time.Minute, now: time.Now, runner: slurmctl.Runner{}}, io.Discard)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	status := func() slurmStatus {
		st, _ := readSlurmStatus(file)
		return st
	}
	waitFor := func(what string, ok func(st slurmStatus) bool) slurmStatus {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			st := status()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s; status %+v", what, st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	ready := func(st slurmStatus) string {
		if r := st.condition("Ready"); r != nil {
			return r.Status
		}
		return ""
	}
	st := waitFor("the first apply", func(st slurmStatus) bool { return st.LastAppliedRevision == good && ready(st) == "True" })
	if st.Changes["add"] == 0 || st.condition("Stalled") != nil {
		t.Errorf("first apply: %+v, want additions and no Stalled", st)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("status file: %v %v, want mode 0600", fi, err)
	}
	limit := func() string {
		return strings.TrimSpace(c.Run(t, "sacctmgr", "-nP", "show", "assoc", "where", "account=alpha", "format=grptres"))
	}
	want := limit()
	if !strings.Contains(want, "gres/gpu:h100=4") {
		t.Fatalf("alpha's limit after apply: %q", want)
	}

	// A drift by hand is undone at the next interval.
	c.Run(t, "sacctmgr", "-i", "modify", "account", "where", "name=alpha", "set", "GrpTRES=gres/gpu=8,gres/gpu:h100=8")
	deadline := time.Now().Add(30 * time.Second)
	for limit() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the drift stayed: %q, want %q", limit(), want)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A broken revision: Ready=False and Stalled, the good one stays applied.
	broken := commit(loopRepo+"teams: alpha: quota: h100: nominal: \"four\"\n", "broken")
	st = waitFor("the broken revision", func(st slurmStatus) bool { return st.LastAttemptedRevision == broken && ready(st) == "False" })
	if st.LastAppliedRevision != good || st.condition("Stalled") == nil || st.condition("Ready").Reason != reasonValidationFailed ||
		!strings.Contains(st.condition("Ready").Message, "capacity.cue:") {
		t.Errorf("broken revision: %+v, want %s kept, Stalled, ValidationFailed at the file's line", st, good)
	}
	if got := limit(); got != want {
		t.Errorf("a broken revision changed alpha's limit: %q", got)
	}

	code, stdout, _ := allot(t, nil, "slurm", "status", "--cluster", "hpc", "--status-file", file)
	if code != 1 || !strings.Contains(stdout, "applied   "+good) || !strings.Contains(stdout, "attempted "+broken) ||
		!strings.Contains(stdout, "Ready     False  ValidationFailed") || !strings.Contains(stdout, "Stalled   True") {
		t.Errorf("slurm status: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = allot(t, nil, "slurm", "status", "--cluster", "hpc", "--status-file", file, "--json")
	var js map[string]any
	if err := json.Unmarshal([]byte(stdout), &js); code != 1 || err != nil || js["lastAppliedRevision"] != good || js["lastAttemptedRevision"] != broken {
		t.Errorf("slurm status --json: exit %d, %v\n%s", code, err, stdout)
	}

	// Mended: applied again, Stalled gone.
	mended := commit(loopRepo, "mended")
	waitFor("the mended revision", func(st slurmStatus) bool {
		return st.LastAppliedRevision == mended && ready(st) == "True" && st.condition("Stalled") == nil
	})
	if code, stdout, _ := allot(t, nil, "slurm", "status", "--cluster", "hpc", "--status-file", file); code != 0 || !strings.Contains(stdout, "Ready     True   Succeeded") {
		t.Errorf("slurm status when ready: exit %d\n%s", code, stdout)
	}

	cancel()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("loop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not stop with its context")
	}
}

// TestSlurmStatusMessage: what a status records of an error is bounded,
// free of credentials and of control characters.
func TestSlurmStatusMessage(t *testing.T) {
	for in, want := range map[string]string{
		"sacctmgr: password=hunter2 refused":             "sacctmgr: password=REDACTED refused",
		"AccountingStoragePass: s3cret, then":            "AccountingStoragePass: REDACTED, then",
		"fetch https://bot:ghp_abc@git.example/x failed": "fetch https://REDACTED@git.example/x failed",
		"token = \"a b c\" and api_key:xyz":              "token = REDACTED and api_key:REDACTED",
		"line one\nline two\x1b[31m":                     `line one\nline two\x1b[31m`,
	} {
		if got := safeMessage(in); got != want {
			t.Errorf("safeMessage(%q) = %q, want %q", in, got, want)
		}
	}
	long := safeMessage(strings.Repeat("x", 10*maxMessage))
	if len(long) > maxMessage || !strings.HasSuffix(long, "(truncated)") {
		t.Errorf("a long message: %d bytes, ends %q", len(long), long[len(long)-20:])
	}
	// The text form escapes what the file holds.
	var b strings.Builder
	printSlurmStatus(&b, slurmStatus{Cluster: "hpc", Conditions: []slurmCondition{{Type: "Ready", Status: "False", Reason: "ApplyFailed", Message: "a\x1b]0;pwned\x07"}}}, time.Now())
	if strings.ContainsAny(b.String(), "\x1b\x07") || !strings.Contains(b.String(), `a\x1b]0;pwned\a`) {
		t.Errorf("status text:\n%q", b.String())
	}
}
