package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot-dev/allot/internal/markdown"
	"github.com/allot-dev/allot/schema"
)

// asAllotEnv makes the test binary run allot's main: TestHostileInputs runs
// allot as a user does, in its own process, so that a fatal error or a panic
// shows as the user would see it rather than ending the test binary.
const asAllotEnv = "ALLOT_TEST_AS_ALLOT"

func TestMain(m *testing.M) {
	if os.Getenv(asAllotEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// stackTrace matches what the Go runtime prints on a panic or a fatal error.
var stackTrace = regexp.MustCompile(`goroutine \d+|panic:|fatal error:|runtime\.`)

// TestHostileInputs runs every verb over the hostile corpus in
// testdata/hostile (see its README): each ends with its exit code and a
// message that says where the input is wrong, and never with a Go stack trace.
// Before this corpus, list.Range and the doubling fields exited 2 with the
// runtime's out-of-memory trace, x.cue as a FIFO hung validate, a symbolic
// link leaving the repository was merged, the template and the overflows
// validated, and explain --sim of a report without wait_s panicked.
func TestHostileInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs allot over the hostile corpus, some of it up to its evaluation memory limit")
	}
	h := filepath.Join(testdata, "hostile")
	examples, _ := filepath.Abs(filepath.Join("..", "..", "examples"))
	work := filepath.Join(examples, "workloads", "mixed.csv")
	tmp := t.TempDir()

	// Repositories that exist only at run time: a FIFO named x.cue; .cue
	// links to a file outside the repository and to a device.
	fifo := filepath.Join(tmp, "fifo")
	outside := filepath.Join(tmp, "outside")
	for _, d := range []string{fifo, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "a.cue"), []byte("package capacity\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, "x.cue"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(tmp, "secret.cue")
	if err := os.WriteFile(secret, []byte("package capacity\nclusters: leaked: provider: \"kwok\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"leak.cue": secret, "null.cue": "/dev/null"} {
		if err := os.Symlink(target, filepath.Join(outside, link)); err != nil {
			t.Fatal(err)
		}
	}
	// Repositories beyond what the loading process reads: 33 nested folders,
	// 10,001 .cue files, a sparse .cue file of 1 GiB (it was read whole
	// before the 16 MiB bound was checked).
	deepDirs := filepath.Join(tmp, "deep-dirs")
	if err := os.MkdirAll(filepath.Join(deepDirs, strings.Repeat("d/", schema.MaxFolderDepth+1)), 0o755); err != nil {
		t.Fatal(err)
	}
	manyFiles := filepath.Join(tmp, "many-files")
	for i := range schema.MaxSourceFiles + 1 {
		name := filepath.Join(manyFiles, fmt.Sprintf("t%02d", i/1000), fmt.Sprintf("f%03d.cue", i%1000))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte("package capacity\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hugeFile := filepath.Join(tmp, "huge-file")
	if err := os.MkdirAll(hugeFile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hugeFile, "big.cue"), []byte("package capacity\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(hugeFile, "big.cue"), 1<<30); err != nil {
		t.Fatal(err)
	}
	// A base whose tree holds big.cue, 64 MiB of zeros (64 KiB in Git): Git's
	// objects were read whole (a blob of 1 GiB took 56 s and 5.3 GB).
	gitRepo := filepath.Join(tmp, "git-base")
	git(t, tmp, "init", "-q", "-b", "main", gitRepo)
	if err := os.WriteFile(filepath.Join(gitRepo, "a.cue"), []byte("package capacity\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitRepo, "big.cue"), make([]byte, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, gitRepo, "add", "-A")
	git(t, gitRepo, "commit", "-qm", "big")
	git(t, gitRepo, "rm", "-q", "big.cue")
	git(t, gitRepo, "commit", "-qm", "small")
	workFIFO := filepath.Join(tmp, "jobs.csv")
	if err := syscall.Mkfifo(workFIFO, 0o644); err != nil {
		t.Fatal(err)
	}
	// A file one byte over MaxInputBytes (sparse: no disk used). It was read
	// cut at the bound: a workload replayed in part, without a word.
	workHuge := filepath.Join(tmp, "huge.csv")
	if err := os.WriteFile(workHuge, []byte("id,submit,duration,gpus\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(workHuge, MaxInputBytes+1); err != nil {
		t.Fatal(err)
	}

	// Each repository, and the finding (position, rule, message) that every
	// verb must show for it: text output as path:line:col: error: rule:
	// message; JSON and Markdown show the message (and the position apart).
	type finding struct{ pos, rule, msg string }
	repos := map[string]finding{
		filepath.Join(h, "repos", "syntax"):       {"capacity.cue:4:27", "syntax", "expected '}', found 'EOF'"},
		filepath.Join(h, "repos", "binary"):       {"capacity.cue:2:1", "syntax", "illegal character NUL"},
		filepath.Join(h, "repos", "deep-nesting"): {"capacity.cue:3:10004", "syntax", "expression exceeds maximum nesting depth"},
		filepath.Join(h, "repos", "template"):     {"capacity.cue:7:15", "schema", "pools.a.machineType: invalid value"},
		filepath.Join(h, "repos", "overflow"):     {"capacity.cue:6:70", "schema", "teams.x.quota.h100.nominal: invalid value 4611686018427387904 (out of bound"},
		filepath.Join(h, "repos", "huge-range"):   {"-", "limit", "evaluating the repository needed more than 1024 MiB of memory"},
		filepath.Join(h, "repos", "doubling"):     {"-", "limit", "evaluating the repository needed more than 1024 MiB of memory"},
		filepath.Join(h, "repos", "deep-fields"):  {"capacity.cue:5:148", "limit", "nests more than 100 levels deep"},
		filepath.Join(h, "repos", "long-number"):  {"capacity.cue:5:21", "limit", "a number of 100000 characters; at most 64"},
		filepath.Join(h, "repos", "exponent"):     {"capacity.cue:5:110", "limit", "1e100001: an exponent beyond ±1000"},
		filepath.Join(h, "repos", "tool-import"):  {"capacity.cue:3:8", "package", "import tool/exec: CUE's tool packages run commands"},
		deepDirs:                                  {strings.Repeat("d/", schema.MaxFolderDepth) + "d", "limit", "folders nest more than 32 levels deep"},
		manyFiles:                                 {"t10/f000.cue", "limit", "the repository holds more than 10000 .cue files"},
		hugeFile:                                  {"big.cue", "limit", "the repository's .cue files hold more than 16 MiB"},
		fifo:                                      {"x.cue", "syntax", "cannot read: open x.cue: a named pipe (FIFO), not a regular file"},
		outside:                                   {"leak.cue", "syntax", "cannot read: open leak.cue: a symbolic link to a file outside the repository"},
	}
	type run struct {
		args     []string
		wantCode int
		want     string
	}
	var runs []run
	for dir, f := range repos {
		text := f.pos + ": error: " + f.rule + ": " + f.msg
		for _, args := range [][]string{
			{"validate", dir},
			{"plan", dir},
			{"render", dir, "-o", filepath.Join(tmp, "out")},
			{"sim", dir, "--workload", work},
			{"import", work, "--repo", dir},
		} {
			runs = append(runs, run{args, exitFindings, text})
		}
		runs = append(runs,
			run{[]string{"plan", dir, "-o", "json"}, exitFindings, `"message": "` + f.msg},
			run{[]string{"plan", dir, "-o", "markdown"}, exitFindings, "| " + f.rule + " | " + markdown.Text(f.msg)},
			run{[]string{"report", dir, "-o", filepath.Join(tmp, "report.html")}, exitFindings, text},
			run{[]string{"plan", examples, "--base", dir}, exitUsage, text})
	}
	f := func(name string) string { return filepath.Join(h, "files", name) }
	runs = append(runs,
		run{[]string{"plan", gitRepo, "--base", "HEAD~1"}, exitUsage, "--base HEAD~1: big.cue at "},
		run{[]string{"validate", gitRepo, "--base", "HEAD~1"}, exitUsage, "the repository's .cue files hold more than 16 MiB"},
		run{[]string{"sim", examples, "--workload", f("workload-overflow.csv")}, exitUsage, "workload-overflow.csv:3: job j2: 1099511627776 pods of 1099511627776 GPUs: the GPU count does not fit in 63 bits"},
		run{[]string{"sim", examples, "--workload", f("workload-huge-times.csv")}, exitUsage, `workload-huge-times.csv:2: column duration: "1e300" is not a non-negative number`},
		run{[]string{"sim", examples, "--workload", f("workload-bad-quote.csv")}, exitUsage, `workload-bad-quote.csv:2: extraneous or missing " in quoted-field`},
		run{[]string{"sim", examples, "--workload", f("workload-binary.csv")}, exitUsage, "workload-binary.csv:1: unknown header"},
		run{[]string{"sim", examples, "--workload", f("workload-huge-gang.csv")}, exitOK, "jobs 1: 0 completed, 1 unschedulable"},
		run{[]string{"sim", examples, "--workload", f("trace-overflow.csv")}, exitUsage, "trace-overflow.csv:2: job j: 1099511627776 pods of 1099511627776 GPUs"},
		run{[]string{"sim", examples, "--workload", workFIFO}, exitUsage, "jobs.csv: not a regular file"},
		run{[]string{"sim", examples, "--workload", workHuge}, exitUsage, "huge.csv: 2147483649 bytes, more than the 2147483648 an input file may have"},
		run{[]string{"plan", examples, "--simulate", work, "--simulate-events", workHuge}, exitUsage, "huge.csv: 2147483649 bytes, more than"},
		run{[]string{"sim", examples, "--workload", work, "--events", f("events-bad.csv")}, exitUsage, `events-bad.csv:3: time "x" is not a non-negative number of seconds`},
		run{[]string{"sim", examples, "--workload", work, "--events", f("events-bad2.csv")}, exitUsage, `events-bad2.csv:2: time "-1"`},
		run{[]string{"sim", examples, "--workload", work, "--nodes", f("nodes-huge.csv")}, exitUsage, "nodes-huge.csv:2: column gpus: 100000000000 GPUs on one node; at most 128"},
		run{[]string{"sim", examples, "--workload", work, "--nodes", f("nodes-bad.csv")}, exitUsage, "nodes-bad.csv:2: column gpus: -8 is out of range"},
		run{[]string{"import", f("trace-helios-bad.csv")}, exitUsage, `trace-helios-bad.csv:2: column interval: "NaN" is not a non-negative number`},
		run{[]string{"import", f("trace-openb-bad.csv")}, exitUsage, `trace-openb-bad.csv:2: column deletion_time: "Inf"`},
		run{[]string{"import", f("trace-overflow.csv")}, exitUsage, "trace-overflow.csv:2: job j: 1099511627776 pods of 1099511627776 GPUs"},
		run{[]string{"import", f("workload-binary.csv")}, exitUsage, "workload-binary.csv:1: unknown header"},
		run{[]string{"import", workFIFO}, exitUsage, "jobs.csv: not a regular file"},
		run{[]string{"plan", examples, "--simulate", f("workload-overflow.csv")}, exitUsage, "--simulate: " + f("workload-overflow.csv") + ":3: job j2"},
		run{[]string{"plan", examples, "--simulate", work, "--simulate-events", f("events-bad.csv")}, exitUsage, "events-bad.csv:3: time"},
		run{[]string{"plan", examples, "--observed", f("observed-hostile.yaml")}, exitUsage, "observed-hostile.yaml: items[0] (Pool gke-h100): nodes -5, readyNodes 9223372036854775807, healthyGPUs -1"},
		run{[]string{"plan", examples, "--observed", f("observed-malformed.yaml")}, exitUsage, "observed-malformed.yaml: not a list of Pools: error converting YAML to JSON: yaml: line 2"},
		run{[]string{"plan", examples, "--observed", workFIFO}, exitUsage, "jobs.csv: not a regular file"},
		run{[]string{"report", examples, "--usage", f("usage-hostile.yaml"), "-o", filepath.Join(tmp, "r.html")}, exitUsage, "usage-hostile.yaml: items[0] (Team robotics): metered[1]: 9223372036854775807 GPU-seconds"},
		run{[]string{"explain", "--sim", f("report-no-wait.json"), "j1"}, exitOK, "started at 5s after waiting 4s"},
		run{[]string{"explain", "--sim", f("report-truncated.json"), "j1"}, exitUsage, "report-truncated.json:1:36: not an 'allot sim -o json' report: unexpected end of JSON input"},
		run{[]string{"explain", "--sim", f("report-not-object.json"), "j1"}, exitUsage, "report-not-object.json:1:2: not an 'allot sim -o json' report"},
		run{[]string{"explain", "--sim", workFIFO, "j1"}, exitUsage, "jobs.csv: not a regular file"},
	)
	for _, r := range runs {
		name := strings.ReplaceAll(strings.Join(r.args, " "), tmp, "TMP")
		name = strings.ReplaceAll(strings.ReplaceAll(name, h, "hostile"), examples, "examples")
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], r.args...)
			cmd.Env = append(os.Environ(), asAllotEnv+"=1", "GITHUB_ACTIONS=")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("did not end within 2 minutes:\n%s", out.String())
			}
			code := cmd.ProcessState.ExitCode()
			if err != nil && code < 0 {
				t.Fatalf("%v:\n%s", err, out.String())
			}
			got := out.String()
			if code != r.wantCode {
				t.Errorf("exit %d, want %d", code, r.wantCode)
			}
			if !strings.Contains(got, r.want) {
				t.Errorf("output lacks %q", r.want)
			}
			if m := stackTrace.FindString(got); m != "" {
				t.Errorf("a Go stack trace (%q) reaches the user", m)
			}
			if t.Failed() {
				t.Logf("output:\n%.3000s", got)
			}
		})
	}
}
