package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/testfiles"
	"github.com/allot-dev/allot/scheduler/sim"
)

// contractRepo is the contract check's tiny repository (a copy in testdata/).
var contractRepo = testfiles.Local("contract/repo")

func TestSimJSONWithFlagsAfterTheDirectory(t *testing.T) {
	code, stdout, stderr := allot(t, nil, "sim", contractRepo, "-o", "json", "--workload", filepath.Join(contractRepo, "workload.csv"))
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not only JSON: %v\n%s", err, stdout)
	}
	if rep.Summary.Jobs != 3 || rep.Summary.Completed != 3 || len(rep.Jobs) != 3 || len(rep.Teams) != 2 {
		t.Errorf("summary %+v, %d jobs, %d teams; want 3 jobs completed, 2 teams", rep.Summary, len(rep.Jobs), len(rep.Teams))
	}
	for _, j := range rep.Jobs {
		for _, n := range j.Nodes {
			if !strings.HasPrefix(n, "a100-") {
				t.Errorf("job %s on node %s, want a100-<index>", j.ID, n)
			}
		}
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing when it is not a terminal", stderr)
	}
}

func TestSimReportsWhyAJobNeverRan(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.csv")
	// nlp may use 16 + 16 GPUs; a 40-GPU job never runs.
	if err := os.WriteFile(w, []byte("id,submit,duration,team,tier,pods,gpus_per_pod\nbig,0,60,nlp,production,5,8\nok,0,60,nlp,production,1,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "sim", "--workload", w, contractRepo, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, j := range rep.Jobs {
		switch j.ID {
		case "big":
			if j.Start != nil || j.ReasonCode != "OverQuota" || !strings.Contains(j.Reason, "limit 32") {
				t.Errorf("big: start %v, reason %s %q; want never started, OverQuota with limit 32", j.Start, j.ReasonCode, j.Reason)
			}
		case "ok":
			if j.End == nil || j.Reason != "" {
				t.Errorf("ok: end %v, reason %q; want completed", j.End, j.Reason)
			}
		}
	}
}

func TestSimUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("id,submit,duration,team,tier,pods,gpus_per_pod\nj1,0,60,nlp,production,1,8\nj2,zero,60,nlp,production,1,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	undeclared := func(row string) string {
		f := filepath.Join(dir, fmt.Sprintf("undeclared-%d.csv", len(row)))
		if err := os.WriteFile(f, []byte("id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer,cluster\nj1,0,60,nlp,production,1,8,,,,\n"+row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for name, tc := range map[string]struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		"bad row names file and line": {args: []string{"sim", contractRepo, "--workload", bad}, wantCode: 2, wantErr: bad + ":3: column submit"},
		"undeclared team":             {args: []string{"sim", contractRepo, "--workload", undeclared("j2,0,60,nobody,production,1,8,,,,")}, wantCode: 2, wantErr: `:3: job j2: team "nobody" is not declared`},
		"undeclared tier":             {args: []string{"sim", contractRepo, "--workload", undeclared("j2,0,60,nlp,urgent,1,8,,,,")}, wantCode: 2, wantErr: `:3: job j2: tier "urgent" is not declared`},
		"undeclared flavor":           {args: []string{"sim", contractRepo, "--workload", undeclared("j2,0,60,nlp,production,1,8,tpu-v5,,,")}, wantCode: 2, wantErr: `:3: job j2: flavor "tpu-v5"`},
		"undeclared cluster":          {args: []string{"sim", contractRepo, "--workload", undeclared("j2,0,60,nlp,production,1,8,,,,mars")}, wantCode: 2, wantErr: `:3: job j2: cluster "mars" is not declared`},
		"no workload":                 {args: []string{"sim", contractRepo}, wantCode: 2, wantErr: "--workload"},
		"bad output":                  {args: []string{"sim", contractRepo, "--workload", bad, "-o", "yaml"}, wantCode: 2, wantErr: "want text or json"},
		"missing file":                {args: []string{"sim", contractRepo, "--workload", filepath.Join(dir, "nope.csv")}, wantCode: 2, wantErr: "nope.csv"},
		"unloadable repository":       {args: []string{"sim", testfiles.Local("contract/broken"), "--workload", bad}, wantCode: 1, wantErr: "capacity.cue:8:"},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := allot(t, nil, tc.args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.wantCode, tc.wantErr)
			}
			if strings.Contains(stderr, "goroutine") || stdout != "" {
				t.Errorf("stdout %q, stderr %q: want no output and no stack trace", stdout, stderr)
			}
		})
	}
}

func TestImportThenSimMatchesDirectSim(t *testing.T) {
	trace, full := testfiles.Path("traces/helios/helios_jobs_15k_dirlab.csv")
	want := 1000 // the GPU jobs of its slice in testdata/
	if full {
		want = 10796
	}
	code, csv, stderr := allot(t, nil, "import", trace, "--repo", contractRepo)
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) != want+1 || !strings.HasPrefix(lines[0], "id,submit,duration,team,tier,pods,gpus_per_pod") {
		t.Fatalf("import wrote %d lines, header %q; want %d jobs", len(lines), lines[0], want)
	}
	// Keep the replay small: the first 300 jobs.
	w := filepath.Join(t.TempDir(), "h.csv")
	if err := os.WriteFile(w, []byte(strings.Join(lines[:301], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "sim", contractRepo, "--workload", w, "-o", "json")
	if code != 0 {
		t.Fatalf("sim: exit %d: %s", code, stderr)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Jobs != 300 || rep.Summary.GangViolations+rep.Summary.QuotaViolations+rep.Summary.TopologyViolations != 0 {
		t.Errorf("summary %+v", rep.Summary)
	}
}

// TestSimJSONListsAreNeverNull: the contract's teams and jobs are lists even
// when empty (a repository without teams, a workload without rows), so that a
// consumer can iterate them; they were null.
func TestSimJSONListsAreNeverNull(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "capacity.cue"), []byte(`package capacity
clusters: c: provider: "kwok"
pools: p: {cluster: "c", flavor: "f", gpusPerNode: 8, nodes: max: 2, price: onDemandPerNodeHour: 1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(dir, "w.csv")
	if err := os.WriteFile(w, []byte("id,submit,duration,team,tier,pods,gpus_per_pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "sim", repo, "--workload", w, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"teams", "jobs"} {
		if string(got[k]) != "[]" {
			t.Errorf("%s = %s, want []", k, got[k])
		}
	}
}

// TestSimOfABurstPool: on a repository whose pool bursts, sim reports the
// burst nodes' cost per pool and team and, from a second replay without
// burst, the wait saved, in its JSON and its text.
func TestSimOfABurstPool(t *testing.T) {
	repo := filepath.Join("..", "..", "scheduler", "sim", "testdata", "burst")
	work := filepath.Join(repo, "workload.csv")
	code, stdout, stderr := allot(t, nil, "sim", repo, "-o", "json", "--workload", work)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var rep sim.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not only JSON: %v\n%s", err, stdout)
	}
	b := rep.Burst
	if b == nil || len(b.Pools) != 1 || b.Pools[0].PeakNodes != 1 || b.CostUSD.String() != "10.35" || len(b.Teams) != 1 || b.Teams[0].Team != "speech" {
		t.Fatalf("burst %+v, want one node for an hour at $10.35, speech's", b)
	}
	if c := b.Without; c == nil || c.WaitP95S != 3540 || c.WaitP95SavedS != 3240 || c.CostAddedUSD.String() != "10.35" {
		t.Errorf("without burst %+v, want a p95 of 3540 s, 3240 s saved for $10.35", c)
	}
	code, stdout, stderr = allot(t, nil, "sim", repo, "--workload", work)
	if code != 0 || !strings.Contains(stdout, "burst saves 1560s of mean wait and 3240s of p95 for $10.35") {
		t.Errorf("exit %d, stderr %s, text:\n%s", code, stderr, stdout)
	}
}
