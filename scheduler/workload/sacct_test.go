package workload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sacctEdges is sacct -P output (without -X, so steps appear) of every kind
// of line a Slurm history holds.
const sacctEdges = `JobID|JobName|Account|User|Partition|QOS|Submit|Start|End|State|NNodes|AllocTRES|ElapsedRaw
10|wrap|vision|alice|gpu|production|2026-11-28T10:00:00|2026-11-28T10:00:05|2026-11-28T11:00:05|COMPLETED|1|billing=1,cpu=1,gres/gpu:h100=2,gres/gpu=2,node=1|3600
10.batch|batch|vision||||2026-11-28T10:00:05|2026-11-28T10:00:05|2026-11-28T11:00:05|COMPLETED|1|cpu=1,gres/gpu:h100=2,gres/gpu=2,mem=0,node=1|3600
10.extern|extern|vision||||2026-11-28T10:00:05|2026-11-28T10:00:05|2026-11-28T11:00:05|COMPLETED|1|billing=1,cpu=1,node=1|3600
11|train|nlp|bob|gpu|normal|2026-11-28T09:00:00|2026-11-28T09:10:00|2026-11-28T09:20:00|FAILED|2|billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,node=2|600
11.0|python|nlp||||2026-11-28T09:10:01|2026-11-28T09:10:01|2026-11-28T09:20:00|FAILED|2|cpu=2,gres/gpu:h100=16,gres/gpu=16,node=2|599
12_3|wrap|vision|alice|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:01:00|2026-11-28T10:02:00|TIMEOUT|1|cpu=1,gres/gpu=1,node=1|60
12_[4-9]|wrap|vision|alice|gpu|normal|2026-11-28T10:00:00|Unknown|Unknown|PENDING|1||0
13+0|het|nlp|bob|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:05:00|2026-11-28T10:06:00|COMPLETED|1|cpu=1,gres/gpu:a100=4,gres/gpu=4,node=1|60
13+1|het|nlp|bob|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:05:00|2026-11-28T10:06:00|COMPLETED|1|cpu=1,node=1|60
14|wrap|nlp|carol|gpu|normal|2026-11-28T10:00:00|None|2026-11-28T10:30:00|CANCELLED by 1000|0||0
15|wrap|nlp|carol|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:30:00|2026-11-28T10:30:00|CANCELLED by 1000|1||0
16|wrap|nlp|carol|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:30:00|Unknown|RUNNING|1|cpu=1,gres/gpu=8,node=1|120
17|wrap|nlp|carol|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:30:00|2026-11-28T10:40:00|PREEMPTED|1|cpu=1,gres/gpu:a100=2,gres/gpu:h100=2,node=1|600
18|cpu|nlp|carol|cpu|normal|2026-11-28T10:00:00|2026-11-28T10:30:00|2026-11-28T10:40:00|COMPLETED|1|cpu=4,mem=4G,node=1|600
19|odd|nlp|carol|gpu|normal|2026-11-28T10:00:00|2026-11-28T10:30:00|2026-11-28T10:40:00|NODE_FAIL|2|cpu=2,gres/gpu=3|600
`

// TestReadSacct reads a hand-made history with every edge a Slurm admin
// meets: steps left out, array tasks and het components as jobs, times
// that never came, cancelled-before-start and running jobs left out, typed
// and untyped GPUs, whole nodes, CPU jobs, and sacct -p's trailing pipe.
func TestReadSacct(t *testing.T) {
	h100, a100 := &SlurmJob{Account: "vision", Partition: "gpu", GRESType: "h100"}, &SlurmJob{Account: "nlp", Partition: "gpu", GRESType: "a100"}
	want := []Spec{
		{ID: "10", Submit: 3600, Duration: 3600, Team: "vision", User: "alice", Tier: "production", Pods: 1, GPUsPerPod: 2, Slurm: h100},
		{ID: "11", Submit: 0, Duration: 600, Team: "nlp", User: "bob", Tier: "normal", Pods: 2, GPUsPerPod: 8, Slurm: &SlurmJob{Account: "nlp", Partition: "gpu", GRESType: "h100"}},
		{ID: "12_3", Submit: 3600, Duration: 60, Team: "vision", User: "alice", Tier: "normal", Pods: 1, GPUsPerPod: 1, Slurm: &SlurmJob{Account: "vision", Partition: "gpu"}},
		{ID: "13+0", Submit: 3600, Duration: 60, Team: "nlp", User: "bob", Tier: "normal", Pods: 1, GPUsPerPod: 4, Slurm: a100},
		// Two types: any flavor.
		{ID: "17", Submit: 3600, Duration: 600, Team: "nlp", User: "carol", Tier: "normal", Pods: 1, GPUsPerPod: 4, Slurm: &SlurmJob{Account: "nlp", Partition: "gpu"}},
		// 3 GPUs over 2 nodes: 2 a node, as a gang of whole nodes.
		{ID: "19", Submit: 3600, Duration: 600, Team: "nlp", User: "carol", Tier: "normal", Pods: 2, GPUsPerPod: 2, Slurm: &SlurmJob{Account: "nlp", Partition: "gpu"}},
	}
	for name, in := range map[string]string{
		"-P": sacctEdges,
		"-p": strings.ReplaceAll(sacctEdges, "\n", "|\n"),
		// Columns in another order, ElapsedRaw instead of End.
		"reordered": reorderSacct(sacctEdges),
	} {
		t.Run(name, func(t *testing.T) {
			got, format, err := Read(strings.NewReader(in), "sacct.txt")
			if err != nil {
				t.Fatal(err)
			}
			if format != FormatSacct {
				t.Errorf("format %s, want %s", format, FormatSacct)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("jobs (-want +got):\n%s", d)
			}
		})
	}
}

// reorderSacct reverses the columns of a sacct text and drops End.
func reorderSacct(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		f := strings.Split(line, "|")
		f = append(f[:8], f[9:]...) // End
		for i := len(f) - 1; i >= 0; i-- {
			b.WriteString(f[i])
			if i > 0 {
				b.WriteByte('|')
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestReadSacctErrors: what sacct never writes, or a history too large to
// replay, is an error at its line naming the column.
func TestReadSacctErrors(t *testing.T) {
	const header = "JobID|Account|User|Submit|Start|End|State|NNodes|AllocTRES\n"
	row := func(id, nodes, tres string) string {
		return id + "|a|u|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T10:01:00|COMPLETED|" + nodes + "|" + tres + "\n"
	}
	for name, tc := range map[string]struct{ in, want string }{
		"no GPUs column": {"JobID|Submit|Start|End\n", "s.txt:1: the header looks like Slurm's sacct -P output, but it has neither AllocTRES nor ReqTRES"},
		"no run column":  {"JobID|Submit|Start|AllocTRES\n", "s.txt:1: the header looks like Slurm's sacct -P output, but it has neither End nor ElapsedRaw"},
		"lacks Start":    {"JobID|Submit|End|AllocTRES\n", "s.txt:1: the header looks like Slurm's sacct -P output (it has jobid, submit) but lacks start; run sacct -a -X -P"},
		"bad TRES":       {header + row("1", "1", "cpu=1,gres/gpu=x"), `s.txt:2: column AllocTRES: gres/gpu="x" is not a count up to 2^40 (read as Slurm's sacct -P output)`},
		"TRES no =":      {header + row("1", "1", "cpu=1,gpu"), `s.txt:2: column AllocTRES: "gpu" is not NAME=COUNT`},
		"absurd GPUs":    {header + row("1", "1", "gres/gpu=4096"), "s.txt:2: column AllocTRES: 4096 GPUs on each of 1 nodes; at most 128 a node"},
		"huge count":     {header + row("1", "1", "gres/gpu=99999999999999999999"), `s.txt:2: column AllocTRES: gres/gpu="99999999999999999999" is not a count`},
		"absurd nodes":   {header + row("1", "2000000", "gres/gpu=8"), "s.txt:2: column NNodes: 2000000 nodes; at most 1000000"},
		"long account":   {header + "1|" + strings.Repeat("a", 300) + "|u|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T10:01:00|COMPLETED|1|gres/gpu=1\n", "s.txt:2: column account: 300 bytes; at most 256"},
		"empty id":       {header + row("", "1", "gres/gpu=1"), "s.txt:2: column JobID is empty"},
		"bad time":       {header + "1|a|u|28/11/2026|2026-11-28T10:00:00|2026-11-28T10:01:00|COMPLETED|1|gres/gpu=1\n", `s.txt:2: column submit: "28/11/2026" is neither`},
		"negative run":   {header + "1|a|u|2026-11-28T10:00:00|2026-11-28T10:05:00|2026-11-28T10:01:00|COMPLETED|1|gres/gpu=1\n", "s.txt:2: column end: 2026-11-28T10:01:00 is before start"},
		"duplicate":      {header + row("7", "1", "gres/gpu=1") + row("7", "1", "gres/gpu=1"), "s.txt:3: job 7 already defined at line 2"},
		"bad type":       {header + row("1", "1", "gres/gpux=1"), `s.txt:2: column AllocTRES: "gres/gpux" is not gres/gpu or gres/gpu:TYPE`},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.in), "s.txt")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to start %q", err, tc.want)
			}
		})
	}
}

// TestSacctTeamsAndFlavors: an account that is a team is the job's team;
// the users of other accounts are dealt, one user staying in one team; a
// GRES type or partition the repository knows gives the flavor.
func TestSacctTeamsAndFlavors(t *testing.T) {
	jobs, _, err := Read(strings.NewReader(sacctEdges), "sacct.txt")
	if err != nil {
		t.Fatal(err)
	}
	NewDealer([]string{"vision", "speech", "ml"}).Deal(jobs)
	SlurmFlavors(jobs, map[string]string{"h100": "h100-sxm"}, map[string]string{"gpu": "l40s"})
	type got struct{ Team, Flavor string }
	var out []got
	for _, j := range jobs {
		out = append(out, got{j.Team, strings.Join(j.Flavors, "|")})
	}
	want := []got{
		{"vision", "h100-sxm"}, // 10: account vision, typed h100
		{"vision", "h100-sxm"}, // 11: account nlp is no team: bob dealt the first
		{"vision", "l40s"},     // 12_3: untyped: the partition's flavor
		{"vision", "l40s"},     // 13+0: bob again; a100 unknown: the partition's
		{"speech", "l40s"},     // 17: carol dealt the next
		{"speech", "l40s"},     // 19
	}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("teams and flavors (-want +got):\n%s", d)
	}
}

// TestSumSlurmUsage: GPU-hours per account and GRES type, of the jobs that
// ran only (not steps, not the running or never started).
func TestSumSlurmUsage(t *testing.T) {
	jobs, _, err := Read(strings.NewReader(sacctEdges), "sacct.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []SlurmUsage{
		{Account: "nlp", GRESType: "", Partition: "gpu", GPUHours: 4.0*600/3600 + 4.0*600/3600}, // 17 (two types), 19
		{Account: "nlp", GRESType: "a100", Partition: "gpu", GPUHours: 4.0 * 60 / 3600},         // 13+0
		{Account: "nlp", GRESType: "h100", Partition: "gpu", GPUHours: 16.0 * 600 / 3600},       // 11
		{Account: "vision", GRESType: "", Partition: "gpu", GPUHours: 1.0 * 60 / 3600},          // 12_3
		{Account: "vision", GRESType: "h100", Partition: "gpu", GPUHours: 2.0},                  // 10
	}
	if d := cmp.Diff(want, SumSlurmUsage(jobs)); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}
}
