package workload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// fileLine is how every error of a file starts.
var fileLine = regexp.MustCompile(`^f\.csv:[0-9]+: `)

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

func tarred(name, s string) string {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(s)), Typeflag: tar.TypeReg})
	tw.Write([]byte(s))
	tw.Close()
	return b.String()
}

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
		"job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n" +
			"1,u1,vc1,16,1,2,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n" +
			"2,u2,vc2,1,1,1,CANCELLED,2020-06-09 18:41:00,,2020-06-09 18:45:36,,0\n",
		"job_id,user,vc,gpu_num,node_num,submit_time,start_time,end_time\n1,u1,,8,1,2020-06-09T18:41:27Z,2020-06-09T18:41:27+08:00,2020-06-09 18:45:36Z\n",
		"job_id,submit_time,duration,num_gpus\r\na,2020-06-09 18:41:01.5,1,1\r\n,,,\r\nb,2020-06-09 10:41:01,2,2\r\n",
		"4f05,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.29,50.0,MISC\nab,worker,2.0,Failed,1.0,9.0,600.0,1.0,800.0,\n",
		"name,num_gpu,gpu_spec,creation_time,deletion_time,scheduled_time\np,1,nan,5,10,\nq,2,A|A|B,1,2,1\n",
		// Quoted fields spanning lines, quotes and separators within them.
		"job_id,submit_time,duration,num_gpus,note\nj1,0,1,1,\"a\nb,\"\"c\"\"\r\n\"\nj2,0,1,\"2\n\"\n",
		"job_id,submit_time,duration,num_gpus\n\"j\n1\",0,1,1\n\"open",
		"job_id,submit_time,duration,num_gpus\nj1,0,1,1,\"" + strings.Repeat("x\n", MaxFieldBytes/2+1) + "\"\n",
		"job_id,submit_time,duration,num_gpus\nj1,0,1,1" + strings.Repeat(",", MaxFields) + "\n",
		"job_id,submit_time,duration,num_gpus\nj1,0,1,1" + strings.Repeat(",\"x\ny\"", MaxFields-5) + "\n",
		gzipped("job_id,submit_time,duration,num_gpus\nj1,0,1,1,\"a\nb\"\n"),
		gzipped(tarred("t.csv", "job_id,submit_time,duration,num_gpus\n\"j\n1\",0,1,1\n")),
		gzipped("job_id,submit_time,duration,num_gpus\n" + strings.Repeat("\n", 1<<20)),
		// Slurm's sacct -P and -p, steps and all.
		sacctEdges,
		"JobID|Account|User|Submit|Start|End|State|NNodes|AllocTRES|\n1|a|u|2026-11-28T10:00:00|2026-11-28T10:00:00|2026-11-28T10:01:00|COMPLETED|1|gres/gpu:h100=8,node=1|\n1.0|||x|x|x|||\n",
		"JobID|Submit|Start|ElapsedRaw|ReqTRES|State\n2_1|0|5|60|gres/gpu=2,node=2|TIMEOUT\n3+1|1|Unknown|0|gres/gpu=1|PENDING\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		jobs, _, err := Read(strings.NewReader(in), "f.csv")
		runtime.ReadMemStats(&after)
		// What a file's records take beyond the file itself is bounded by
		// a record's, whatever their shape (maps and jobs grow with rows).
		if grew, bound := after.TotalAlloc-before.TotalAlloc, uint64(8*len(in)+4*MaxRecordBytes+1<<20); grew > bound {
			t.Fatalf("allocated %d bytes reading %d", grew, len(in))
		}
		if err != nil {
			if !fileLine.MatchString(err.Error()) {
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
