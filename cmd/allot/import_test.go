package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
)

// traceVariants are the trace files of the workload reader's tests.
var traceVariants = filepath.Join("..", "..", "scheduler", "workload", "testdata", "import")

// TestImportTraceVariants locks what allot import writes for traces beyond
// those of ../shared: a gzip-compressed HeliosData cluster_log.csv, a
// .tar.gz of a headerless pai_task_table, times in two zones, a
// spreadsheet's export, Slurm's sacct -P, a header alone.
func TestImportTraceVariants(t *testing.T) {
	const header = "id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer\n"
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"helios cluster log, gzip": {[]string{"helios-cluster-log.csv.gz", "--teams", "vision,nlp", "--tiers", "production,research"}, header +
			"1425511,61,36848,vision,research,1,1,,,\n" +
			"1425512,87,249,nlp,research,2,8,,,\n" +
			"1425513,88,675233,vision,research,1,1,,,\n" +
			"1425516,120,60,vision,research,1,8,,,\n" +
			"1425517,180,30,vision,research,1,2,,,\n"},
		"pai task table, tar.gz": {[]string{"pai_task_table.tar.gz"}, header +
			"4f057009a5d481acec67b088/tensorflow,1739162,38,default,default,1,1,,,\n" +
			"ab12/worker,1739100,200,default,default,2,8,,,\n"},
		"zoned times": {[]string{"normalized-zoned.csv"}, header +
			"late,30,5,u1,default,1,1,,,\n" +
			"early,0,7,u2,default,1,2,,,\n" +
			"frac,0.5,1,u3,default,1,1,,,\n"},
		"spreadsheet": {[]string{"spreadsheet-crlf-bom.csv"}, header +
			"j1,0,600,nlp,production,2,8,,rack,\n" +
			"\"j,2\",30,300,\"speech, research\",research,1,4,a100|h100,,host\n"},
		"openb, QoS to tiers, pods dealt one by one (no users)": {[]string{"openb-pods.csv", "--teams", "vision,nlp", "--tiers", "production,research,opportunist"}, header +
			"openb-pod-0017,9437497,1332357,vision,research,1,8,,,\n" +
			"openb-pod-0022,9679175,294651,nlp,opportunist,1,1,,,\n" +
			"openb-pod-0035,9967058,1512,vision,production,1,1,V100M16|V100M32,,\n" +
			"openb-pod-0061,10001278,125,nlp,opportunist,1,1,,,\n"},
		"sacct -P, an account that is a team kept, another's user dealt": {[]string{"sacct.txt", "--teams", "speech,robotics", "--tiers", "production,research"}, header +
			"4101,0,3600,speech,production,1,2,,,\n" +
			"4102,300,14400,robotics,research,4,8,,,\n" +
			"4103_0,360,600,speech,research,1,1,,,\n" +
			"4103_1,360,360,speech,research,1,1,,,\n"},
		"header only": {[]string{"header-only.csv"}, header},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"import", filepath.Join(traceVariants, tc.args[0])}, tc.args[1:]...)
			code, stdout, stderr := allot(t, nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != tc.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tc.want)
			}
		})
	}
}

// TestImportErrors: a trace allot cannot import is exit 2, file:line and
// what is wrong (with the layout the header was read as), nothing on
// stdout, no stack trace.
func TestImportErrors(t *testing.T) {
	for file, want := range map[string]string{
		"openb-multigpu-no-times.csv":     "openb-multigpu-no-times.csv:1: the header looks like an openb pod list of cluster-trace-gpu-v2023 (it has name, num_gpu) but lacks creation_time, deletion_time",
		"pai_job_table-header.csv":        "pai_job_table-header.csv:1: the header looks like the pai_task_table",
		"helios-cluster-log-negative.csv": "helios-cluster-log-negative.csv:2: column end_time: 2020-09-01 00:01:10 is before start_time 2020-09-01 01:01:10 (a negative run) (read as a HeliosData cluster_log.csv)",
		"normalized-mixed-zones.csv":      "normalized-mixed-zones.csv:3: column submit_time",
		"duplicate-ids.csv":               "duplicate-ids.csv:4: job j1 already defined at line 2",
		"nan-duration.csv":                `nan-duration.csv:2: column duration: "NaN"`,
		"epoch-seconds.csv":               "a Unix time?",
		"cluster_log.zip":                 "cluster_log.zip:1: a zip archive",
		"no-header.csv":                   "no-header.csv:1: line 1 holds numbers",
	} {
		t.Run(file, func(t *testing.T) {
			code, stdout, stderr := allot(t, nil, "import", filepath.Join(traceVariants, file))
			if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" || stackTrace.MatchString(stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestImportRepoInBatches: allot import deals a trace onto the repository's
// teams batch by batch; what it writes is what mapping the whole trace at
// once (as allot sim does) gives, users and tiers alike.
func TestImportRepoInBatches(t *testing.T) {
	var b strings.Builder
	b.WriteString("job_id,submit_time,duration,num_gpus,user,priority\n")
	for i := range 10_000 { // more than two batches
		fmt.Fprintf(&b, "j%d,%d,%d,%d,user%d,%s\n", i, i, 60+i%600, 1+i%8, (i*7919)%450, []string{"LS", "BE", "Burstable", ""}[i%4])
	}
	trace := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "import", trace, "--repo", contractRepo)
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	jobs, _, err := workload.Read(strings.NewReader(b.String()), "trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	c, err := checkDir(contractRepo, nil)
	if err != nil || c.cfg == nil {
		t.Fatalf("loading %s: %v", contractRepo, err)
	}
	sim.AssignToConfig(jobs, sim.QuotaFromSchema(c.cfg))
	var want bytes.Buffer
	if err := workload.Write(&want, jobs); err != nil {
		t.Fatal(err)
	}
	if stdout != want.String() {
		t.Errorf("import --repo differs from mapping the whole trace: %d bytes against %d", len(stdout), want.Len())
	}
	if n := strings.Count(stdout, "\n"); n != 10_001 {
		t.Errorf("import wrote %d lines; want the header and 10,000 jobs", n)
	}
}
