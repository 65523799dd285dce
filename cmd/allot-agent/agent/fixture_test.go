package agent

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/fleet/health"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	waitMillis = 20 // stop watchers quickly
	flag.Parse()
	code := m.Run()
	stopAPIServer()
	os.Exit(code)
}

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder is a Publisher that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	facts   Facts
	loadErr error
	pubErr  error
	reports []health.Report
	states  []health.State
	// published is signalled on every report.
	published chan struct{}
}

func newRecorder() *recorder {
	return &recorder{facts: Facts{BootID: "boot-1", GPUs: nvmltest.GPUs}, published: make(chan struct{}, 64)}
}

func (r *recorder) Load(context.Context) (Facts, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.facts, r.loadErr
}

func (r *recorder) Publish(_ context.Context, rep health.Report, st health.State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pubErr != nil {
		return r.pubErr
	}
	r.reports = append(r.reports, rep)
	r.states = append(r.states, st)
	select {
	case r.published <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) setFacts(edit func(*Facts)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	edit(&r.facts)
}

func (r *recorder) last(t *testing.T) (health.Report, health.State) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		t.Fatal("nothing published")
	}
	return r.reports[len(r.reports)-1], r.states[len(r.states)-1]
}

var errTest = errors.New("test failure")

// instant is the default policy without debounce: every failure counts at once.
func instant() health.Thresholds {
	p := health.DefaultThresholds()
	p.Debounce = nil
	return p
}

// rig is an agent on a simulated DGX A100 with a recording publisher.
type rig struct {
	srv   *nvmltest.Server
	pub   *recorder
	clock *clock
	agent *Agent
}

func newRig(t *testing.T, p health.Thresholds, opts Options) *rig {
	t.Helper()
	r := &rig{srv: nvmltest.New(), pub: newRecorder(), clock: &clock{t: t0}}
	closeLib, err := Open(r.srv, "mock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeLib)
	opts.Now = r.clock.Now
	r.agent = New(NewReader(r.srv), nil, p, r.pub, opts)
	return r
}

// poll polls once and fails the test on an error.
func (r *rig) poll(t *testing.T) health.Report {
	t.Helper()
	rep, err := r.agent.Poll(context.Background())
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	return rep
}

// watch runs an XID watcher of the rig's server into its agent until the test
// ends.
func (r *rig) watch(t *testing.T) *Watcher {
	t.Helper()
	w, err := NewWatcher(r.srv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, r.clock.Now, r.agent.AddXID, func(err error) { t.Errorf("watcher: %v", err) })
	}()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	return w
}

// xid delivers an XID through the event set and waits until the agent has it.
func (r *rig) xid(t *testing.T, gpu int, code uint64) {
	t.Helper()
	r.srv.XID(gpu, code)
	select {
	case <-r.agent.wake:
	case <-time.After(5 * time.Second):
		t.Fatalf("XID %d of GPU %d did not reach the agent", code, gpu)
	}
}

// failing is a failed check as tests expect it: who, which, fatal, and a part
// of its detail.
type failing struct {
	GPU    int
	Check  health.Check
	Fatal  bool
	Detail string
}

// failures returns the failed results of rep.
func failures(rep health.Report) []health.Result {
	var out []health.Result
	for _, r := range rep.Results {
		if r.Status == health.Fail {
			out = append(out, r)
		}
	}
	return out
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run go test -update to accept):\n--- want\n%s\n--- got\n%s", p, want, got)
	}
}
