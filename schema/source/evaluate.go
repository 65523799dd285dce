package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/allot-dev/allot/schema"
)

// Limits bound the evaluation of one capacity repository.
type Limits struct {
	// Memory is the address space the evaluation may add to the child
	// process's own at start, in bytes.
	Memory int64
	// Time is how long the evaluation may take, wall clock.
	Time time.Duration
}

// DefaultLimits are generous for any real repository (the examples evaluate in
// well under a second and 100 MiB) and small enough for the process that runs
// beside allot's manager and scheduler.
var DefaultLimits = Limits{Memory: 1 << 30, Time: time.Minute}

// MaxConfigBytes bounds the evaluated configuration the child returns (as
// JSON, with its findings): a real one holds kilobytes, and this process
// decodes it.
const MaxConfigBytes = 64 << 20

// RuleLimit is the rule of the finding that a repository exceeded a Limit.
const RuleLimit = "limit"

// childEnv and childArg mark a process started by Evaluator (its only
// argument is childArg): childEnv's value is the memory limit in bytes.
const (
	childEnv = "ALLOT_EVALUATE_CHILD_MEMORY"
	childArg = "__allot_evaluate_child"
)

// Evaluator returns a schema.Evaluator that evaluates in a child process, so
// that a hostile revision (a huge list.Range, a doubling chain of fields) can
// exhaust only that process's memory and time: the child is this same
// executable (any binary that links this package: allot, or a test binary),
// its address space is capped by setrlimit, and it is killed when ctx ends or
// l.Time passes. The files go to the child on stdin and the result comes back
// on stdout, both gob-encoded. A child that runs out of memory or time is a
// finding of rule RuleLimit; the child's own exit status and output (a Go
// fatal error and its stack) are never shown.
func Evaluator(ctx context.Context, l Limits) schema.Evaluator {
	return func(files map[string][]byte) ([]byte, schema.Findings) {
		out, err := evaluateInChild(ctx, l, files)
		if err != nil {
			return nil, schema.Findings{{Severity: schema.SeverityError, Rule: RuleLimit, Message: err.Error()}}
		}
		return out.Config, out.Findings
	}
}

// childResult is what the child writes on stdout.
type childResult struct {
	Config   []byte
	Findings schema.Findings
}

func evaluateInChild(ctx context.Context, l Limits, files map[string][]byte) (childResult, error) {
	var res childResult
	self, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("evaluating the repository: cannot start the evaluator: %w", err)
	}
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(files); err != nil {
		return res, fmt.Errorf("evaluating the repository: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.Time)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, childArg)
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.FormatInt(l.Memory, 10))
	cmd.Stdin = &in
	stdout := &headBuffer{max: MaxConfigBytes + 1}
	stderr := &headBuffer{max: 64 << 10}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return res, fmt.Errorf("evaluating the repository took longer than %s: simplify it (a large list.Range, or fields that double at every step)", l.Time)
	case ctx.Err() != nil:
		return res, fmt.Errorf("evaluating the repository: %w", ctx.Err())
	case runErr != nil && (stderr.outOfMemory() || killed(runErr)):
		return res, fmt.Errorf("evaluating the repository needed more than %d MiB of memory: simplify it (a large list.Range, or fields that double at every step)", l.Memory>>20)
	case runErr != nil:
		return res, fmt.Errorf("evaluating the repository failed (%v): %s", runErr, stderr.firstLine())
	case len(stdout.b) > MaxConfigBytes:
		return res, fmt.Errorf("the evaluated repository holds more than %d MiB", MaxConfigBytes>>20)
	}
	if err := gob.NewDecoder(bytes.NewReader(stdout.b)).Decode(&res); err != nil {
		return res, fmt.Errorf("evaluating the repository: reading the result: %w", err)
	}
	return res, nil
}

// killed reports whether the child died of SIGKILL, which only the kernel's
// out-of-memory killer sends it (the time limit is told apart before).
func killed(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return ws.Signaled() && ws.Signal() == syscall.SIGKILL
		}
	}
	return false
}

// init turns a process started by Evaluator into the evaluator: it caps its own
// address space, evaluates the files on stdin and exits. It runs before main
// (and before a test binary's TestMain), so every binary that links this
// package can serve.
func init() {
	v, ok := os.LookupEnv(childEnv)
	if !ok || len(os.Args) != 2 || os.Args[1] != childArg {
		return
	}
	os.Exit(runChild(v, os.Stdin, os.Stdout, os.Stderr))
}

func runChild(limit string, stdin io.Reader, stdout, stderr io.Writer) int {
	n, err := strconv.ParseInt(limit, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(stderr, "bad %s %q\n", childEnv, limit)
		return 3
	}
	// The garbage collector works hard near the limit before the kernel's cap
	// makes an allocation fail.
	debug.SetMemoryLimit(n)
	// Should the container's memory run out first, the kernel kills the
	// evaluator, not the manager beside it.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	lim := uint64(n) + addressSpace()
	var cur syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &cur) == nil {
		lim = min(lim, cur.Max) // only root may raise the hard limit
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		fmt.Fprintf(stderr, "setrlimit: %v\n", err)
		return 3
	}
	var files map[string][]byte
	if err := gob.NewDecoder(bufio.NewReader(stdin)).Decode(&files); err != nil {
		fmt.Fprintf(stderr, "reading the files: %v\n", err)
		return 3
	}
	config, findings := schema.Evaluate(files)
	if err := gob.NewEncoder(stdout).Encode(childResult{Config: config, Findings: findings}); err != nil {
		fmt.Fprintf(stderr, "writing the result: %v\n", err)
		return 3
	}
	return 0
}

// addressSpace is the process's virtual memory size now (VmSize), in bytes:
// the Go runtime reserves address space it has not used yet.
func addressSpace() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// headBuffer keeps the first max bytes written to it: a Go fatal error says
// what it is on its first line.
type headBuffer struct {
	max int
	b   []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (t *headBuffer) outOfMemory() bool {
	s := string(t.b)
	return strings.Contains(s, "out of memory") || strings.Contains(s, "cannot allocate memory")
}

func (t *headBuffer) firstLine() string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(t.b)), "\n")
	return line
}
