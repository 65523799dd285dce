package workload

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzRead: any input either parses into jobs that are valid and survive a
// write/read round trip, or fails with a file:line error; it never panics. The
// seed corpus runs as part of go test.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		"id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer\nj1,0,600,nlp,production,2,8,,rack,\n",
		"job_id,submit_time,duration,num_gpus,gpu_milli,num_nodes,gpus_per_node,user,team,priority,status\nh,0,84.0,16,1000,2,8,u1,,,Pass\n",
		"u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n0,1,1,1,1,0,84,0,Pass\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,1,460,G2|T4,LS,Running,0,10,0\n",
		"id,submit,duration,team,tier,pods,gpus_per_pod\nj,1e300,NaN,a,b,1,1\n",
		"\ufeffid,submit,duration,team,tier,pods,gpus_per_pod\n\"j\"\"1\",0,0,a,b,1,1\n",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		jobs, _, err := Read(strings.NewReader(in), "f.csv")
		if err != nil {
			var we *Error
			if errors.As(err, &we) && !strings.HasPrefix(err.Error(), "f.csv:") {
				t.Fatalf("error without file:line: %v", err)
			}
			return
		}
		for i, j := range jobs {
			// Traces may leave team and tier blank; allot import fills them in.
			if j.Team == "" {
				jobs[i].Team = "default"
			}
			if j.Tier == "" {
				jobs[i].Tier = "default"
			}
			if j.ID == "" || j.Pods < 1 || j.GPUsPerPod < 1 || j.Submit < 0 || j.Duration < 0 {
				t.Fatalf("invalid job accepted: %+v", j)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, jobs); err != nil {
			t.Fatal(err)
		}
		again, _, err := Read(&buf, "again.csv")
		if err != nil {
			t.Fatalf("re-reading what was written: %v\n%s", err, buf.String())
		}
		if len(again) != len(jobs) {
			t.Fatalf("round trip: %d jobs, want %d", len(again), len(jobs))
		}
	})
}
