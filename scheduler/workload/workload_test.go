package workload

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/internal/testfiles"
)

func TestReadFormats(t *testing.T) {
	for name, tc := range map[string]struct {
		in         string
		wantFormat Format
		want       []Spec
	}{
		"project CSV, unknown columns ignored, flavors split": {
			in: "id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer,note\n" +
				"j1,0,600,nlp,production,2,8,,rack,,x\n" +
				"j2,30.5,300,speech,research,1,4,a100|h100,,host,\n",
			wantFormat: FormatAllot,
			want: []Spec{
				{ID: "j1", Submit: 0, Duration: 600, Team: "nlp", Tier: "production", Pods: 2, GPUsPerPod: 8, Require: "rack"},
				{ID: "j2", Submit: 30.5, Duration: 300, Team: "speech", Tier: "research", Pods: 1, GPUsPerPod: 4, Flavors: []string{"a100", "h100"}, Prefer: "host"},
			},
		},
		"normalized: multi-node jobs become gangs of whole nodes, CPU jobs dropped, users become teams": {
			in: "job_id,submit_time,duration,num_gpus,gpu_milli,num_nodes,gpus_per_node,user,team,priority,status\n" +
				"a,0,84.0,1,1000,1,1,u1,,,Pass\n" +
				"b,10,60,16,1000,2,8,u2,,,Pass\n" +
				"c,20,5,0,,1,,u3,,,Pass\n" +
				"d,30,7,1,460,1,1,,,LS,Running\n",
			wantFormat: FormatNormalized,
			want: []Spec{
				{ID: "a", Duration: 84, Team: "u1", User: "u1", Pods: 1, GPUsPerPod: 1},
				{ID: "b", Submit: 10, Duration: 60, Team: "u2", User: "u2", Pods: 2, GPUsPerPod: 8},
				{ID: "d", Submit: 30, Duration: 7, Tier: "LS", Pods: 1, GPUsPerPod: 1},
			},
		},
		"helios raw: submit times are the running sum of intervals": {
			in: "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n" +
				"0,1,1,1,1,0,84,0,Pass\n1,2,16,1,2,94,87,0,Pass\n2,3,0,4,1,6,10,0,Pass\n3,1,8,1,1,151,83,0,Pass\n",
			wantFormat: FormatHelios,
			want: []Spec{
				{ID: "helios-0", Duration: 84, Team: "u1", User: "u1", Pods: 1, GPUsPerPod: 1},
				{ID: "helios-1", Submit: 94, Duration: 87, Team: "u2", User: "u2", Pods: 2, GPUsPerPod: 8},
				{ID: "helios-3", Submit: 251, Duration: 83, Team: "u1", User: "u1", Pods: 1, GPUsPerPod: 8},
			},
		},
		"openb raw pods: duration from scheduling to deletion, GPU models as flavors": {
			in: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
				"p0,12000,16384,1,1000,,LS,Running,0,100,10\n" +
				"p1,6000,12288,0,0,,BE,Running,5,50,5\n" +
				"p2,6000,12288,2,1000,V100M16|V100M32,BE,Running,7,70,8\n",
			wantFormat: FormatOpenB,
			want: []Spec{
				{ID: "p0", Duration: 90, Tier: "LS", Pods: 1, GPUsPerPod: 1},
				{ID: "p2", Submit: 7, Duration: 62, Tier: "BE", Pods: 1, GPUsPerPod: 2, Flavors: []string{"V100M16", "V100M32"}},
			},
		},
	} {
		t.Run(name, func(t *testing.T) { readAs(t, strings.NewReader(tc.in), "w.csv", tc.wantFormat, tc.want) })
	}
}

func TestReadErrorsNameFileAndLine(t *testing.T) {
	const header = "id,submit,duration,team,tier,pods,gpus_per_pod\n"
	for name, tc := range map[string]struct {
		in       string
		wantLine int
		wantText string
	}{
		"negative submit":          {in: header + "j1,0,1,a,b,1,1\nj2,-5,1,a,b,1,1\n", wantLine: 3, wantText: "column submit"},
		"zero gpus":                {in: header + "j1,0,1,a,b,1,0\n", wantLine: 2, wantText: "gpus_per_pod"},
		"duplicate id":             {in: header + "j1,0,1,a,b,1,1\nj1,0,1,a,b,1,1\n", wantLine: 3, wantText: "already defined at line 2"},
		"not a number":             {in: header + "j1,zero,1,a,b,1,1\n", wantLine: 2, wantText: `"zero"`},
		"empty team":               {in: header + "j1,0,1,,b,1,1\n", wantLine: 2, wantText: "team is empty"},
		"unknown header":           {in: "a,b,c\n1,2,3\n", wantLine: 1, wantText: "unknown header"},
		"bad quoting":              {in: header + "j1,\"0,1,a,b,1,1\n", wantLine: 2, wantText: "quote"},
		"empty file":               {in: "", wantLine: 1, wantText: "empty file"},
		"fractional pods":          {in: header + "j1,0,1,a,b,1.5,1\n", wantLine: 2, wantText: "whole number"},
		"infinite duration":        {in: header + "j1,0,Inf,a,b,1,1\n", wantLine: 2, wantText: "column duration"},
		"duration past the clock":  {in: header + "j1,0,1,a,b,1,1\nj2,0,1e10,a,b,1,1\n", wantLine: 3, wantText: "up to 1e9"},
		"submit past the clock":    {in: header + "j1,1000000001,1,a,b,1,1\n", wantLine: 2, wantText: "column submit"},
		"a column twice":           {in: "id,id,submit,duration,team,tier,pods,gpus_per_pod\nj1,j2,0,1,a,b,1,1\n", wantLine: 1, wantText: `column "id" appears twice (columns 1 and 2)`},
		"error on later row":       {in: header + "j1,0,1,a,b,1,1\n\nj2,0,1,a,b,x,1\n", wantLine: 4, wantText: "column pods"},
		"GPU count beyond 63 bits": {in: header + "j1,0,1,a,b,1,1\nj2,0,1,a,b,1099511627776,1099511627776\n", wantLine: 3, wantText: "does not fit in 63 bits"},
		"normalized GPU count beyond 63 bits": {in: "job_id,submit_time,duration,num_gpus,num_nodes,gpus_per_node\nj,0,1,8,1099511627776,1099511627776\n",
			wantLine: 2, wantText: "does not fit in 63 bits"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.in), "jobs.csv")
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("err = %v, want a *workload.Error", err)
			}
			if we.File != "jobs.csv" || we.Line != tc.wantLine || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %q (line %d), want jobs.csv line %d containing %q", err, we.Line, tc.wantLine, tc.wantText)
			}
			if !strings.HasPrefix(err.Error(), "jobs.csv:") {
				t.Errorf("err = %q, want it to start with file:line", err)
			}
		})
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	jobs := []Spec{
		{ID: "a", Submit: 1.5, Duration: 10, Team: "t", Tier: "x", Pods: 2, GPUsPerPod: 8, Flavors: []string{"f1", "f2"}, Require: "rack"},
		{ID: "b,c", Submit: 3, Duration: 0.25, Team: "u", Tier: "y", Pods: 1, GPUsPerPod: 1, Prefer: "host"},
	}
	var buf bytes.Buffer
	if err := Write(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(&buf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// A job pinned to a cluster adds the cluster column.
	jobs[1].Cluster = "eks-use1"
	buf.Reset()
	if err := Write(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer,cluster\n") {
		t.Errorf("header: %q", buf.String())
	}
	if got, _, err = Read(&buf, "x"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jobs, got); diff != "" {
		t.Errorf("round trip with a cluster (-want +got):\n%s", diff)
	}
}

func TestAssignKeepsUsersTogether(t *testing.T) {
	jobs := []Spec{{Team: "u1"}, {Team: "u2"}, {Team: "u1"}, {Team: "nlp", Tier: "research"}, {Team: "u3", Tier: "BE"}, {Team: "u4", Tier: "LS"}}
	Assign(jobs, []string{"nlp", "speech"}, []string{"production", "research", "opportunist"}, "research")
	var got []string
	for _, j := range jobs {
		got = append(got, j.Team+"/"+j.Tier)
	}
	want := []string{"nlp/research", "speech/research", "nlp/research", "nlp/research", "nlp/opportunist", "speech/production"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestAssignSpreadsJobsWithNoUser: a trace that names neither user nor team
// (openb's pod lists) is dealt job by job, not all onto the first team; the
// jobs of a user in the same batch still stay together.
func TestAssignSpreadsJobsWithNoUser(t *testing.T) {
	jobs := []Spec{{ID: "a"}, {ID: "b"}, {ID: "c", Team: "u1"}, {ID: "d"}, {ID: "e", Team: "u1"}, {ID: "f"}}
	Assign(jobs, []string{"nlp", "speech"}, nil, "research")
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID+"/"+j.Team)
	}
	want := []string{"a/nlp", "b/speech", "c/nlp", "d/speech", "e/nlp", "f/nlp"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A real pod list: its pods spread evenly over three teams.
	path, _ := testfiles.Path("traces/openb/openb_pod_list_default.csv")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pods, _, err := Read(f, path)
	if err != nil {
		t.Fatal(err)
	}
	Assign(pods, []string{"x", "y", "z"}, nil, "research")
	per := map[string]int{}
	for _, p := range pods {
		per[p.Team]++
	}
	for _, team := range []string{"x", "y", "z"} {
		if n := per[team]; n < len(pods)/3 || n > len(pods)/3+1 {
			t.Errorf("team %s has %d of %d pods, want a third (%v)", team, n, len(pods), per)
		}
	}
}

// TestReadTheSharedTraces reads the full traces of ../shared when it is there,
// else their slices in testdata/ (the header and first 1,000 rows of each).
func TestReadTheSharedTraces(t *testing.T) {
	type counts struct {
		format      Format
		jobs, gangs int // in the full trace
		sliceJobs   int // in its slice
		sliceGangs  int
	}
	for file, want := range map[string]counts{
		// 10,796 GPU jobs; 1,247 span several nodes (README of the traces).
		"traces/helios/helios_15k_users.csv":            {FormatNormalized, 10796, 1247, 1000, 63},
		"traces/helios/helios_jobs_15k_dirlab.csv":      {FormatHelios, 10796, 1247, 1000, 63},
		"traces/openb/alibaba_openb_v2023_gpu_pods.csv": {FormatNormalized, 7064, 0, 1000, 0},
	} {
		t.Run(file, func(t *testing.T) {
			path, full := testfiles.Path(file)
			if !full {
				want.jobs, want.gangs = want.sliceJobs, want.sliceGangs
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			jobs, format, err := Read(f, path)
			if err != nil {
				t.Fatal(err)
			}
			gangs := 0
			for _, j := range jobs {
				if j.Pods > 1 {
					gangs++
				}
			}
			if format != want.format || len(jobs) != want.jobs || gangs != want.gangs {
				t.Errorf("%s: format %s, %d jobs, %d gangs; want %s, %d, %d", path, format, len(jobs), gangs, want.format, want.jobs, want.gangs)
			}
		})
	}
}

func TestReadNodes(t *testing.T) {
	in := "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,64000,262144,0,\nn2,96000,393216,8,G2\n"
	got, err := ReadNodes(strings.NewReader(in), "nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{Name: "n0", Flavor: "P100", GPUs: 2}, {Name: "n2", Flavor: "G2", GPUs: 8}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ReadNodes(strings.NewReader("sn,gpu,model\nn0,2,P100\nn0,2,P100\n"), "nodes.csv"); err == nil || !strings.Contains(err.Error(), "nodes.csv:3:") {
		t.Errorf("duplicate node: err = %v, want nodes.csv:3:", err)
	}
	// 10^11 GPUs on one node made the simulator index each of them (past the
	// machine's memory).
	if _, err := ReadNodes(strings.NewReader("name,gpus,flavor\nn0,8,h100\nn1,100000000000,h100\n"), "nodes.csv"); err == nil || !strings.Contains(err.Error(), "nodes.csv:3: column gpus: 100000000000 GPUs on one node; at most 128") {
		t.Errorf("huge node: err = %v", err)
	}
}
