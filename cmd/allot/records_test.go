package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeRecord writes head, then a quoted field of "x,y" lines up to size
// bytes in all, closed, to file (gzip-compressed when the name ends .gz).
func writeRecord(t *testing.T, file, head string, size int) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w io.Writer = f
	if strings.HasSuffix(file, ".gz") {
		zw := gzip.NewWriter(f)
		defer zw.Close()
		w = zw
	}
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	bw.WriteString(head + `"`)
	for n := len(head); n < size; n += 4 {
		bw.WriteString("x,y\n")
	}
	bw.WriteString("\",,\n")
}

// TestHostileRecords runs allot, as a user does in its own process, over
// files of one record that spans lines in a quoted field (5 MB, and 256 MB
// gzip-compressed to a few hundred KB): every verb that reads a workload,
// trace, node list or events file exits with the file and the line the
// record starts at, no Go stack trace, and a peak RSS of allot's own, not
// the record's. Before, a 5 MB file took allot import to 2.8 GB.
func TestHostileRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs allot over files of up to 256 MB unpacked")
	}
	tmp := t.TempDir()
	examples, _ := filepath.Abs(filepath.Join("..", "..", "examples"))
	work := filepath.Join(examples, "workloads", "mixed.csv")
	job := "id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer\nj1,0,600,nlp,production,1,1,,,\nj2,0,600,nlp,production,1,1,"
	files := map[string]string{
		"work.csv":    job,
		"work.csv.gz": job,
		"trace.csv":   "job_id,submit_time,duration,num_gpus,note\nj1,0,1,1,\nj2,0,1,1,",
		"nodes.csv":   "name,gpus,flavor\nn1,8,h100-80gb\nn2,8,",
		"events.csv":  "time,node,event\n0,n1,fail\n1,n1,",
	}
	for name, head := range files {
		size := 5 << 20
		if strings.HasSuffix(name, ".gz") {
			size = 256 << 20
		}
		writeRecord(t, filepath.Join(tmp, name), head, size)
	}
	f := func(name string) string { return filepath.Join(tmp, name) }
	for _, r := range []struct {
		args []string
		want string
	}{
		{[]string{"import", f("work.csv")}, "work.csv:3: field 8 is longer than 16384 bytes (MaxFieldBytes)"},
		{[]string{"import", f("work.csv.gz")}, "work.csv.gz:3: field 8 is longer than 16384 bytes (MaxFieldBytes)"},
		{[]string{"import", f("trace.csv")}, "trace.csv:3: field 5 is longer than 16384 bytes (MaxFieldBytes)"},
		{[]string{"sim", examples, "--workload", f("work.csv")}, "work.csv:3: field 8 is longer"},
		{[]string{"sim", examples, "--workload", f("work.csv.gz")}, "work.csv.gz:3: field 8 is longer"},
		{[]string{"sim", examples, "--workload", work, "--nodes", f("nodes.csv")}, "nodes.csv:3: field 3 is longer"},
		{[]string{"sim", examples, "--workload", work, "--events", f("events.csv")}, "events.csv:3: field 3 is longer"},
		{[]string{"plan", examples, "--simulate", f("work.csv")}, "work.csv:3: field 8 is longer"},
		{[]string{"plan", examples, "--simulate", work, "--simulate-events", f("events.csv")}, "events.csv:3: field 3 is longer"},
	} {
		name := strings.ReplaceAll(strings.ReplaceAll(strings.Join(r.args, " "), tmp, "TMP"), examples, "examples")
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], r.args...)
			cmd.Env = append(os.Environ(), asAllotEnv+"=1", "GITHUB_ACTIONS=")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("did not end within 2 minutes:\n%.3000s", out.String())
			}
			got := out.String()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage {
				t.Errorf("exit %d, want %d (unreadable input)", code, exitUsage)
			}
			if !strings.Contains(got, r.want) {
				t.Errorf("output lacks %q", r.want)
			}
			if m := stackTrace.FindString(got); m != "" {
				t.Errorf("a Go stack trace (%q) reaches the user", m)
			}
			// Linux counts ru_maxrss in KiB.
			if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10; rss > 400<<20 {
				t.Errorf("peak RSS %d MB; want under 400 MB", rss>>20)
			}
			if t.Failed() {
				t.Logf("output:\n%.3000s", got)
			}
		})
	}
}
