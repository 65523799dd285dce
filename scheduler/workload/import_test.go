package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadTraceVariants reads the forms traces take beyond the files of
// ../shared (testdata/import): HeliosData's cluster_log.csv of any cluster,
// openb pod lists as pandas writes them, Alibaba's pai_task_table with and
// without its header, compressed files, spreadsheets' exports (byte order
// mark, CRLF, quoted commas, rows of empty cells), columns in any order or
// missing, dates and times with and without zones.
func TestReadTraceVariants(t *testing.T) {
	heliosLog := []Spec{
		{ID: "1425511", Submit: 61, Duration: 36848, Team: "vcJkd", User: "uXBbc", Pods: 1, GPUsPerPod: 1},
		{ID: "1425512", Submit: 87, Duration: 249, Team: "vchbv", User: "uVMrF", Pods: 2, GPUsPerPod: 8},
		{ID: "1425513", Submit: 88, Duration: 675233, Team: "vcpDC", User: "uzqls", Pods: 1, GPUsPerPod: 1},
		{ID: "1425516", Submit: 120, Duration: 60, Team: "vcJkd", User: "uXBbc", Pods: 1, GPUsPerPod: 8},
		{ID: "1425517", Submit: 180, Duration: 30, Team: "vcJkd", User: "uXBbc", Pods: 1, GPUsPerPod: 2},
	}
	pai := []Spec{
		{ID: "4f057009a5d481acec67b088/tensorflow", Submit: 1739162, Duration: 38, Pods: 1, GPUsPerPod: 1},
		{ID: "ab12/worker", Submit: 1739100, Duration: 200, Pods: 2, GPUsPerPod: 8},
	}
	for file, tc := range map[string]struct {
		format Format
		want   []Spec
	}{
		// Columns in another order, unknown ones, a blank gpu_milli (a whole GPU).
		"normalized-reordered.csv": {FormatNormalized, []Spec{
			{ID: "b", Submit: 10, Duration: 60, Team: "u2", User: "u2", Pods: 2, GPUsPerPod: 8},
			{ID: "a", Duration: 84, Team: "nlp", User: "u1", Tier: "LS", Pods: 1, GPUsPerPod: 1},
		}},
		// Only the columns the schema cannot do without; a 0-GPU job left out.
		"normalized-minimal.csv": {FormatNormalized, []Spec{
			{ID: "j1", Duration: 10, Pods: 1, GPUsPerPod: 1},
			{ID: "j3", Submit: 7.5, Duration: 20, Pods: 1, GPUsPerPod: 4},
		}},
		// A byte order mark, CRLF, an empty line and a row of empty cells,
		// quoted commas.
		"spreadsheet-crlf-bom.csv": {FormatAllot, []Spec{
			{ID: "j1", Duration: 600, Team: "nlp", Tier: "production", Pods: 2, GPUsPerPod: 8, Require: "rack"},
			{ID: "j,2", Submit: 30, Duration: 300, Team: "speech, research", Tier: "research", Pods: 1, GPUsPerPod: 4, Flavors: []string{"a100", "h100"}, Prefer: "host"},
		}},
		// Where the comma is the decimal sign, spreadsheets separate fields
		// with semicolons; and tab-separated values.
		"spreadsheet-semicolon.csv": {FormatAllot, []Spec{
			{ID: "j1", Duration: 600, Team: "nlp", Tier: "production", Pods: 2, GPUsPerPod: 8},
			{ID: "j2", Submit: 30.5, Duration: 300, Team: "speech; research", Tier: "research", Pods: 1, GPUsPerPod: 4},
		}},
		"normalized.tsv": {FormatNormalized, []Spec{{ID: "j1", Duration: 10, Team: "u1", User: "u1", Pods: 1, GPUsPerPod: 2}}},
		// Times in two zones and a fractional second: they count from the
		// earliest, which is not the first row.
		"normalized-zoned.csv": {FormatNormalized, []Spec{
			{ID: "late", Submit: 30, Duration: 5, Team: "u1", User: "u1", Pods: 1, GPUsPerPod: 1},
			{ID: "early", Duration: 7, Team: "u2", User: "u2", Pods: 1, GPUsPerPod: 2},
			{ID: "frac", Submit: 0.5, Duration: 1, Team: "u3", User: "u3", Pods: 1, GPUsPerPod: 1},
		}},
		// Every end state that ran is replayed for as long as it ran; a job
		// cancelled before it started, a CPU job and a running one are not.
		// The CPU job submitted first is the origin of the times.
		"helios-cluster-log.csv":    {FormatHeliosLog, heliosLog},
		"helios-cluster-log.csv.gz": {FormatHeliosLog, heliosLog},
		// Without duration: from start_time to end_time. Without vc: the user.
		"helios-cluster-log-no-duration.csv": {FormatHeliosLog, []Spec{
			{ID: "7", Submit: 10, Duration: 3600, Team: "vc1", User: "u1", Pods: 1, GPUsPerPod: 8},
			{ID: "8", Duration: 30, Team: "u2", User: "u2", Pods: 1, GPUsPerPod: 4},
		}},
		// Philly in HeliosData's layout: no cpu_num and node_num, its own
		// states, a killed job that never started (None).
		"philly-cluster-log.csv": {FormatHeliosLog, []Spec{
			{ID: "application_1506638472019_10238", Submit: 60, Duration: 3600, Team: "vc7", User: "u1", Pods: 1, GPUsPerPod: 4},
			{ID: "application_1506638472019_10240", Duration: 8, Team: "vc9", User: "u2", Pods: 1, GPUsPerPod: 1},
		}},
		// DIR-LAB's layout as its README writes the columns, without node_num.
		"dirlab-philly.csv": {FormatHelios, []Spec{
			{ID: "helios-0", Duration: 100, Team: "u12", User: "u12", Pods: 1, GPUsPerPod: 4},
			{ID: "helios-1", Submit: 30, Duration: 5, Team: "u13", User: "u13", Pods: 1, GPUsPerPod: 2},
		}},
		// pandas' "nan" for no GPU model, a model listed twice, a fraction of
		// a GPU, a Pending pod deleted while it waited, a CPU pod.
		"openb-pods.csv": {FormatOpenB, []Spec{
			{ID: "openb-pod-0017", Submit: 9437497, Duration: 1332357, Tier: "Burstable", Pods: 1, GPUsPerPod: 8},
			{ID: "openb-pod-0022", Submit: 9679175, Duration: 294651, Tier: "BE", Pods: 1, GPUsPerPod: 1},
			{ID: "openb-pod-0035", Submit: 9967058, Duration: 1512, Tier: "LS", Pods: 1, GPUsPerPod: 1, Flavors: []string{"V100M16", "V100M32"}},
			{ID: "openb-pod-0061", Submit: 10001278, Duration: 125, Tier: "BE", Pods: 1, GPUsPerPod: 1},
		}},
		// As it ships (no header), with its header, as a .tar.gz: a
		// parameter server without GPUs, a task that never launched and one
		// still running are left out.
		"pai_task_table.csv":        {FormatPAI, pai},
		"pai_task_table-header.csv": {FormatPAI, pai},
		"pai_task_table.tar.gz":     {FormatPAI, pai},
		"header-only.csv":           {FormatAllot, nil},
	} {
		t.Run(file, func(t *testing.T) { readAs(t, variant(t, file), file, tc.format, tc.want) })
	}
}

// variant opens a file of testdata/import.
func variant(t *testing.T, file string) io.Reader {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "import", file))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readAs reads in as the workload file name, and checks its layout and jobs.
func readAs(t *testing.T, in io.Reader, name string, format Format, want []Spec) {
	t.Helper()
	got, gotFormat, err := Read(in, name)
	if err != nil {
		t.Fatal(err)
	}
	if gotFormat != format {
		t.Errorf("format %s, want %s", gotFormat, format)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

// TestReadTraceErrors: what cannot be imported is an error at its file and
// line that says what is wrong, and for a trace the layout it was read as.
func TestReadTraceErrors(t *testing.T) {
	for file, tc := range map[string]struct {
		line int
		want []string
	}{
		"normalized-mixed-zones.csv":      {3, []string{`column submit_time: "2020-06-09T18:41:00+08:00" is one of dates and times with a time zone, but the rows above hold dates and times without a time zone`, "(read as the normalized trace schema)"}},
		"mixed-kinds.csv":                 {3, []string{`column submit_time: "600" is one of numbers of seconds, but the rows above hold dates and times without a time zone`}},
		"helios-cluster-log-negative.csv": {2, []string{"column end_time: 2020-09-01 00:01:10 is before start_time 2020-09-01 01:01:10 (a negative run)", "(read as a HeliosData cluster_log.csv)"}},
		"openb-negative.csv":              {2, []string{"column deletion_time: 90 is before the pod's start 100", "(read as an openb pod list of cluster-trace-gpu-v2023)"}},
		"openb-multigpu-no-times.csv":     {1, []string{"the header looks like an openb pod list of cluster-trace-gpu-v2023 (it has name, num_gpu) but lacks creation_time, deletion_time"}},
		"pai_job_table-header.csv":        {1, []string{"looks like the pai_task_table of Alibaba's cluster-trace-gpu-v2020 (it has job_name, start_time, end_time) but lacks task_name, inst_num, plan_gpu; pai_job_table has no GPU counts"}},
		"near-normalized.csv":             {1, []string{"the header looks like the normalized trace schema (it has job_id, duration) but lacks submit_time, num_gpus"}},
		"no-header.csv":                   {1, []string{"line 1 holds numbers, not column names: the file needs a header"}},
		"cluster_log.zip":                 {1, []string{"a zip archive: unzip it"}},
		"truncated.csv.gz":                {2, []string{"the compressed file ends early (truncated?): unexpected EOF"}},
		"cluster_job_log":                 {1, []string{"JSON, not CSV: allot imports CSV traces (Philly's cluster_job_log is JSON"}},
		"jobs.xlsx":                       {1, []string{"a spreadsheet workbook: save the sheet as CSV"}},
		"two-files.tar.gz":                {6, []string{"the archive holds pai_task_table.csv and other.csv: extract the one to import"}},
		"duplicate-ids.csv":               {4, []string{"job j1 already defined at line 2"}},
		"negative-duration.csv":           {2, []string{`column duration: "-10" is not a non-negative number of seconds`}},
		"nan-duration.csv":                {2, []string{`column duration: "NaN" is not a non-negative number of seconds`}},
		"huge-duration.csv":               {2, []string{`column duration: "1e12" is not a non-negative number of seconds up to 1e9`}},
		"epoch-seconds.csv":               {2, []string{`column submit_time: "1591699261"`, "a Unix time? give seconds from the trace's start, or a date and time"}},
		"decimal-comma.csv":               {2, []string{`column duration: "84,5" is not a non-negative number of seconds`}},
		"us-date.csv":                     {2, []string{`column submit_time: "06/09/2020 18:41" is neither a number of seconds nor a date and time like 2020-06-09 18:41:01`}},
	} {
		t.Run(file, func(t *testing.T) {
			_, _, err := Read(variant(t, file), file)
			var we *Error
			if !errors.As(err, &we) || we.File != file || we.Line != tc.line {
				t.Fatalf("err = %v, want a *workload.Error at %s:%d", err, file, tc.line)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// rows is a trace of n jobs made up as it is read: no file, and nothing
// held but the row being read.
type rows struct {
	n, i int
	buf  []byte
}

func (r *rows) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.i > r.n {
			return 0, io.EOF
		}
		if r.i == 0 {
			r.buf = []byte("job_id,submit_time,duration,num_gpus,gpu_milli,num_nodes,gpus_per_node,user,team,priority,status\n")
		} else {
			r.buf = fmt.Appendf(nil, "job-%d,%d,%d,%d,1000,1,%d,user-%d,,,Pass\n", r.i, r.i, 100+r.i%1000, 1+r.i%8, 1+r.i%8, r.i%300)
		}
		r.i++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// TestReaderStreamsInBoundedMemory: a trace of half a million jobs goes
// through a Reader holding what it needs to find a duplicate ID (a hash and
// a line per job), not the jobs, as Read does (allot import held them all).
func TestReaderStreamsInBoundedMemory(t *testing.T) {
	const n = 500_000
	rd, err := NewReader(&rows{n: n}, "big.csv")
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	peak := uint64(0)
	count := 0
	for {
		j, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if count++; count%100_000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, base))
			if want := fmt.Sprintf("job-%d", count); j.ID != want {
				t.Fatalf("job %d is %s", count, j.ID)
			}
		}
	}
	if count != n {
		t.Fatalf("%d jobs, want %d", count, n)
	}
	// Half a million Specs alone are over 80 MB (168 bytes each, and their
	// strings); the hashes and lines of their IDs ~10 MB.
	if peak > 40<<20 {
		t.Errorf("heap grew by %d MB reading %d jobs; want under 40 MB", peak>>20, n)
	}
}
