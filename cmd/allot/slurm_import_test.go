package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/allot-dev/allot/internal/slurmtest"
	"github.com/allot-dev/allot/scheduler/workload"
)

// sacctFields are the fields docs/cli.md tells an admin to export, and
// ElapsedRaw, which the test checks durations against.
const sacctFields = "JobID,JobName,Account,User,Partition,QOS,Submit,Start,End,State,NNodes,AllocTRES,ElapsedRaw"

// TestImportRealSacct runs jobs on a real Slurm (typed and untyped GPUs, an
// array, two nodes, one still running, one cancelled while pending, one of
// an account that is no team), imports what sacct -P says of them (steps
// included, as without -X) and checks every job against Slurm's own
// record; then allot sim replays the import against the repository.
func TestImportRealSacct(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2, GPUsPerNode: 4, GPUType: "h100", Partition: "gpu"})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(`package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "hopper", gpusPerNode: 4, nodes: {min: 2, max: 2}, price: onDemandPerNodeHour: 8,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1, gresType: "h100"}}
tiers: {prod: priority: 10, normal: priority: 5}
teams: vision: {costCenter: "V", owners: ["@v"], quota: hopper: nominal: 8}
teams: nlp: {costCenter: "N", owners: ["@n"], quota: hopper: nominal: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	user := strings.TrimSpace(c.Run(t, "id", "-un"))
	for _, acct := range []string{"vision", "ops"} {
		c.Run(t, "sacctmgr", "-i", "add", "account", acct)
		c.Run(t, "sacctmgr", "-i", "add", "user", user, "account="+acct)
	}
	since := time.Now().Add(-time.Minute).Format("2006-01-02T15:04:05")
	sbatch := func(args ...string) string {
		return strings.TrimSpace(c.Run(t, "sbatch", append([]string{"--parsable"}, args...)...))
	}
	typed := sbatch("-A", "vision", "--gres=gpu:h100:2", "--wrap", "sleep 1")
	untyped := sbatch("-A", "vision", "--gres=gpu:1", "--wrap", "sleep 1")
	array := sbatch("-A", "vision", "--array=0-1", "--gres=gpu:h100:1", "--wrap", "sleep 1")
	multi := sbatch("-A", "vision", "-N", "2", "--gres=gpu:h100:4", "--wrap", "srun sleep 1")
	ops := sbatch("-A", "ops", "--gres=gpu:h100:1", "--wrap", "sleep 1")
	want := map[string]struct {
		team      string
		pods, gpp int64
	}{
		typed: {"vision", 1, 2}, untyped: {"vision", 1, 1}, array + "_0": {"vision", 1, 1}, array + "_1": {"vision", 1, 1},
		multi: {"vision", 2, 4}, ops: {"", 1, 1},
	}
	// Wait until every job has ended, then start one that is still
	// running when sacct is read.
	var text string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		text = c.Run(t, "sacct", "-a", "-X", "-n", "-P", "-S", since, "-o", "JobID,State")
		if n := strings.Count(text, "|COMPLETED"); n == len(want) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("jobs not done after 60 s:\n%s", text)
		}
	}
	running := sbatch("-A", "vision", "--gres=gpu:h100:1", "--wrap", "sleep 300")
	c.WaitJob(t, running, "RUNNING", "")
	// Both nodes' four GPUs: it waits for the running one, and is cancelled
	// while it does.
	pending := sbatch("-A", "vision", "-N", "2", "--gres=gpu:h100:4", "--wrap", "sleep 1")
	c.WaitJob(t, pending, "PENDING", "Resources")
	c.Run(t, "scancel", pending)

	// slurmctld tells slurmdbd of a job's start and end a moment later.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		text = c.Run(t, "sacct", "-a", "-P", "-S", since, "-o", sacctFields)
		if strings.Contains(text, "\n"+running+"|") && strings.Contains(text, "\n"+pending+"|") && strings.Contains(text, "\n"+typed+".batch|") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("sacct lacks the steps, the running or the cancelled job after 30 s:\n%s", text)
		}
	}
	t.Logf("sacct -P:\n%s", text)
	file := filepath.Join(t.TempDir(), "sacct.txt")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "import", file, "--repo", dir)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s\nsacct:\n%s", code, stderr, text)
	}

	// Slurm's record of each job, read here apart from the importer: its
	// submit time and ElapsedRaw.
	slurm := map[string][]string{}
	var earliest time.Time
	for _, line := range strings.Split(strings.TrimSpace(text), "\n")[1:] {
		f := strings.Split(line, "|")
		slurm[f[0]] = f
		if s, err := time.Parse("2006-01-02T15:04:05", f[6]); err == nil && f[0] != pending && !strings.Contains(f[0], ".") && (earliest.IsZero() || s.Before(earliest)) {
			earliest = s
		}
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if lines[0] != "id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer" || len(lines)-1 != len(want) {
		t.Fatalf("import wrote %d jobs, want %d (not %s, cancelled, nor %s, running, nor steps):\n%s", len(lines)-1, len(want), pending, running, stdout)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		w, ok := want[f[0]]
		if !ok {
			t.Errorf("job %s imported; Slurm has only %v", f[0], want)
			continue
		}
		s := slurm[f[0]]
		submit, _ := time.Parse("2006-01-02T15:04:05", s[6])
		if got := f[1]; got != strconv.Itoa(int(submit.Sub(earliest).Seconds())) {
			t.Errorf("job %s: submit %s, Slurm's is %s (%v after the earliest)", f[0], got, s[6], submit.Sub(earliest))
		}
		if f[2] != s[12] {
			t.Errorf("job %s: duration %s, Slurm's ElapsedRaw %s", f[0], f[2], s[12])
		}
		team := w.team
		if team == "" {
			team = f[3] // account ops is no team: its user is dealt onto one
			if team != "vision" && team != "nlp" {
				t.Errorf("job %s: team %s, want one of the repository's", f[0], team)
			}
		}
		if f[3] != team || f[4] != "normal" || f[5] != strconv.FormatInt(w.pods, 10) || f[6] != strconv.FormatInt(w.gpp, 10) || f[7] != "hopper" {
			t.Errorf("job %s: %s; want team %s, tier normal (the QOS), %d pods of %d GPUs of hopper (GRES h100)\nSlurm: %v", f[0], l, team, w.pods, w.gpp, s)
		}
	}

	// allot slurm usage: the GPU-hours per account and GRES type, as
	// Slurm's ElapsedRaw gives them, and the running job's until now.
	wantHours := map[string]float64{}
	for id, w := range want {
		e, _ := strconv.ParseFloat(slurm[id][12], 64)
		wantHours[slurm[id][2]] += float64(w.pods*w.gpp) * e / 3600
	}
	t.Setenv("SLURM_CONF", c.Conf)
	var usageOut, usageErr bytes.Buffer
	if code := run([]string{"slurm", "usage", "--since", "1h", "-o", "json"}, &usageOut, &usageErr); code != 0 {
		t.Fatalf("allot slurm usage: exit %d: %s", code, usageErr.String())
	}
	t.Logf("slurm usage:\n%s", usageOut.String())
	var got struct {
		Until time.Time
		Usage []workload.SlurmUsage
	}
	if err := json.Unmarshal(usageOut.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	// The running job's GPU counts up to now (sacct --truncate -E now).
	started, err := time.ParseInLocation("2006-01-02T15:04:05", slurm[running][7], time.Local)
	if err != nil {
		t.Fatal(err)
	}
	wantHours["vision"] += got.Until.Sub(started).Seconds() / 3600
	gotHours := map[string]float64{}
	for _, u := range got.Usage {
		if u.GRESType != "h100" {
			t.Errorf("usage of GRES type %q; every job ran on h100: %+v", u.GRESType, u)
		}
		gotHours[u.Account] += u.GPUHours
	}
	if d := cmp.Diff(wantHours, gotHours, cmpopts.EquateApprox(0, 2.0/3600)); d != "" {
		t.Errorf("GPU-hours per account (-Slurm's ElapsedRaw +usage):\n%s", d)
	}

	// The finance report reads the usage: vision's is of hopper (its GRES
	// type h100, also for the untyped GPUs of partition gpu); ops is no team.
	// (The import's repository names Slurm's own QOS normal as a tier and
	// asks more quota than its pools have: the report's must load.)
	valid, usageFile := t.TempDir(), filepath.Join(t.TempDir(), "usage.json")
	if err := os.WriteFile(usageFile, usageOut.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(valid, "capacity.cue"), []byte(`package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "hopper", gpusPerNode: 4, nodes: {min: 2, max: 2}, price: onDemandPerNodeHour: 8,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1, gresType: "h100"}}
tiers: standard: priority: 5
teams: vision: {costCenter: "V", owners: ["@v"], quota: hopper: nominal: 8}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, page, stderr := allot(t, nil, "report", valid, "--usage", usageFile, "-o", "-")
	if code != 0 {
		t.Fatalf("report --usage: exit %d\n%s", code, stderr)
	}
	if row := `<td class="id">vision</td><td class="id">hopper</td><td class="num">8</td>`; !strings.Contains(page, row) {
		t.Errorf("the report lacks vision's use of hopper (%q)", row)
	}
	if !strings.Contains(stderr, `account "ops", GRES type "h100", partition "gpu"`) || strings.Contains(stderr, `account "vision"`) {
		t.Errorf("report --usage: want ops left out, vision kept; stderr:\n%s", stderr)
	}

	// The round trip: sim replays the imported history.
	workloadFile := filepath.Join(t.TempDir(), "slurm.csv")
	if err := os.WriteFile(workloadFile, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = allot(t, nil, "sim", dir, "--workload", workloadFile, "-o", "json")
	if code != 0 {
		t.Fatalf("sim: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Summary struct{ Jobs, Completed int } `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Jobs != len(want) || rep.Summary.Completed != len(want) {
		t.Errorf("sim: %d jobs, %d completed; want %d of each\n%s", rep.Summary.Jobs, rep.Summary.Completed, len(want), stdout)
	}
}

// TestSlurmUsageSince: --since takes a date, a date and time or a span back
// from now; anything else (an option sacct would read) is an error naming
// the forms.
func TestSlurmUsageSince(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.Local)
	for in, want := range map[string]time.Time{
		"2026-11-01":          time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local),
		"2026-11-01T08:30:00": time.Date(2026, 11, 1, 8, 30, 0, 0, time.Local),
		"30d":                 now.AddDate(0, 0, -30),
		"12h":                 now.Add(-12 * time.Hour),
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("--since %s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-a", "yesterday", "-5h", "11/01/2026", "999999d"} {
		if _, err := parseSince(in, now); err == nil || !strings.Contains(err.Error(), "want a date (2026-11-01)") {
			t.Errorf("--since %q: %v, want an error naming the forms", in, err)
		}
	}
}

// TestSimRawSacct: allot sim reads sacct -P output as it is (no import
// first), and a job takes the flavor its GRES type (else, untyped, its
// partition) names: both 8-GPU jobs run on the one hopper node, one after
// the other, though the a100 nodes are free.
func TestSimRawSacct(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"capacity.cue": `package capacity
clusters: {
	hpc: {provider: "onprem", scheduler: "slurm"}
	k8s: {provider: "onprem"}
}
pools: {
	h: {cluster: "hpc", flavor: "hopper", gpusPerNode: 8, nodes: {min: 1, max: 1}, price: onDemandPerNodeHour: 8,
		slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1, gresType: "h100"}}
	a: {cluster: "k8s", flavor: "a100", gpusPerNode: 8, nodes: {min: 2, max: 2}, price: onDemandPerNodeHour: 4}
}
tiers: standard: priority: 5
teams: vision: {costCenter: "V", owners: ["@v"], quota: {hopper: nominal: 8, a100: nominal: 16}}
`,
		"sacct.txt": `JobID|Account|User|Partition|QOS|Submit|Start|End|State|NNodes|AllocTRES
1|vision|alice|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T11:00:00|COMPLETED|1|cpu=1,gres/gpu:h100=8,gres/gpu=8,node=1
2|vision|alice|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T11:00:00|COMPLETED|1|cpu=1,gres/gpu=8,node=1
3|vision|alice|other|normal|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T11:00:00|COMPLETED|1|cpu=1,gres/gpu:a100=8,gres/gpu=8,node=1
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := allot(t, nil, "sim", dir, "--workload", filepath.Join(dir, "sacct.txt"), "-o", "json")
	if code != 0 {
		t.Fatalf("sim: exit %d\n%s", code, stderr)
	}
	var rep struct {
		Jobs []struct {
			ID    string
			Nodes []string
			WaitS *float64 `json:"wait_s"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	pool := map[string]string{}
	waited := 0
	for _, j := range rep.Jobs {
		if len(j.Nodes) != 1 {
			t.Fatalf("job %s ran on %v\n%s", j.ID, j.Nodes, stdout)
		}
		pool[j.ID] = j.Nodes[0]
		if j.WaitS != nil && *j.WaitS > 0 {
			waited++
		}
	}
	t.Logf("nodes: %v", pool)
	if !strings.Contains(pool["1"], "h") || pool["1"] != pool["2"] || strings.Contains(pool["3"], pool["1"]) || waited != 1 {
		t.Errorf("jobs 1 (h100) and 2 (untyped, partition gpu) want the one hopper node in turn, job 3 (a100) an a100 node: nodes %v, %d waited", pool, waited)
	}
}
