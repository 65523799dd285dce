package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/allot-dev/allot/controllers/testenv"
)

var (
	allotBin   string
	allotErr   error
	allotOnce  sync.Once
	allotBuild string // the directory the test built allot into
)

func TestMain(m *testing.M) {
	code := m.Run()
	if allotBuild != "" {
		os.RemoveAll(allotBuild)
	}
	os.Exit(code)
}

// allotBinary is $ALLOT_BIN, else allot built from this checkout once for the
// package.
func allotBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("ALLOT_BIN"); b != "" {
		return b
	}
	allotOnce.Do(func() {
		dir, err := os.MkdirTemp("", "allot-demo-test-")
		if err != nil {
			allotErr = err
			return
		}
		allotBuild, allotBin = dir, filepath.Join(dir, "allot")
		cmd := exec.Command("go", "build", "-o", allotBin, "./cmd/allot")
		cmd.Dir = testenv.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			allotErr = errors.New("go build ./cmd/allot: " + err.Error() + "\n" + string(out))
		}
	})
	if allotErr != nil {
		t.Fatal(allotErr)
	}
	return allotBin
}

func demoOptions(t *testing.T, out *bytes.Buffer) options {
	return options{allot: allotBinary(t), examples: filepath.Join(testenv.Root(), "examples"), maxNodes: 4, out: out}
}

// The demo end to end: the quota change lets the gang that was over quota run,
// the revision advances, gangs are whole, quotas hold, and everything it
// started is gone when it returns.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	res, err := run(context.Background(), demoOptions(t, &out))
	defer func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	assertCleanedUp(t, res.dir)

	if !strings.HasPrefix(res.revisions[0], "main@sha1:") || !strings.HasPrefix(res.revisions[1], "main@sha1:") || res.revisions[0] == res.revisions[1] {
		t.Errorf("applied revisions %q then %q: want two different main@sha1: revisions", res.revisions[0], res.revisions[1])
	}

	eval := res.before.workload(change.workload)
	if eval == nil || eval.bound != 0 || !strings.Contains(eval.reason, "over quota on h100-80gb") || !strings.Contains(eval.reason, "limit 16") {
		t.Errorf("before the change, %s = %+v: want pending, over quota with limit 16", change.workload, eval)
	}
	if eval = res.after.workload(change.workload); eval == nil || !eval.running() || !strings.Contains(eval.where, "×") {
		t.Errorf("after the change, %s = %+v: want running", change.workload, eval)
	}
	// The lab's pool is Terraform's: the raise grew it from 2 to 4 nodes (the
	// kwok module's hooks made the Node objects) and the gang runs on them.
	if w := res.before.workload(labWorkload); w == nil || w.bound != 0 || !strings.Contains(w.reason, "over quota on l4") {
		t.Errorf("before the change, %s = %+v: want pending over quota", labWorkload, w)
	}
	if w := res.after.workload(labWorkload); w == nil || !w.running() || !strings.Contains(w.where, "lab-l4 ×4") {
		t.Errorf("after the change, %s = %+v: want running on the 4 lab-l4 nodes", labWorkload, w)
	}
	if w := res.after.workload("vision/video"); w == nil || w.bound != 0 || w.reason == "" {
		t.Errorf("vision/video = %+v: want still pending, with a reason", w)
	}
	for _, want := range []struct {
		s               *snapshot
		team, flavor    string
		nominal, used   int64
		borrowed, pends int64
	}{
		{res.before, "platform", "h100-80gb", 16, 0, 0, 1},
		{res.after, "platform", "h100-80gb", 32, 24, 0, 0},
		{res.after, "robotics", "h100-80gb", 128, 34, 2, 0},
	} {
		r := teamOf(want.s, want.team, want.flavor)
		if r == nil || r.nominal != want.nominal || r.used != want.used || r.borrowed != want.borrowed || r.pending != want.pends {
			t.Errorf("team %s %s = %+v, want quota %d used %d borrowed %d pending %d", want.team, want.flavor, r, want.nominal, want.used, want.borrowed, want.pends)
		}
	}
	for _, s := range []*snapshot{res.before, res.after} {
		for _, w := range s.workloads {
			if w.bound != 0 && w.bound != w.pods {
				t.Errorf("%s: %d of %d pods bound: a gang runs whole or not at all", w.id, w.bound, w.pods)
			}
		}
		for _, r := range s.teams {
			if r.used-r.borrowed > r.nominal {
				t.Errorf("team %s %s uses %d within a nominal of %d", r.team, r.flavor, r.used-r.borrowed, r.nominal)
			}
		}
		if w := s.workload("robotics/rl-policy"); w == nil || !w.running() || strings.Count(w.where, "rack ") != 1 {
			t.Errorf("robotics/rl-policy = %+v: want running in one rack", w)
		}
	}

	// A GPU fault under the lab's gang: one replacement node, the broken
	// node retired once the gang left it (issue 46).
	if !slices.Equal(res.repair, []string{"ReplacementAdded", "NodeRetired"}) || res.retired == "" {
		t.Errorf("the lab pool's repair: events %v, retired %q; want one replacement, then the broken node retired", res.repair, res.retired)
	}
	if !regexp.MustCompile(`(?m)^platform\s+h100-80gb\s+16\s+32\s+\+16$`).MatchString(res.plan) {
		t.Errorf("plan --base HEAD~1 lacks platform's quota 16 → 32:\n%s", res.plan)
	}
	text := out.String()
	for _, want := range []string{
		"Against HEAD~1:",
		"team platform h100-80gb: quota 16 → 32, used 0 → 24",
		"lab-l4    l4         2 of 2 by Terraform",
		"pool lab-l4: nodesTarget 2 → 4, nodes 2 → 4",
		change.workload + ": pending → running on ",
		"Cleaned up: stopped allot manager",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// An interrupt once the manager runs stops the manager and the control plane
// and removes the temporary directory.
func TestDemoInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	o := demoOptions(t, &out)
	o.out = &cancelOn{w: &out, marker: "Create a CapacitySource", cancel: cancel}
	res, err := run(ctx, o)
	if !errors.Is(err, errInterrupted) || res != nil {
		t.Fatalf("run = %v, %v; want errInterrupted\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "stopped allot manager") || !strings.Contains(out.String(), "stopped the control plane") {
		t.Errorf("output does not say the manager and control plane were stopped:\n%s", out.String())
	}
	m := regexp.MustCompile(`removed (\S+)\.`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output does not name the removed directory:\n%s", out.String())
	}
	assertCleanedUp(t, m[1])
}

// An invalid revision ends the demo at once with a one-line error that points
// at the finding, and cleans up.
func TestDemoStalled(t *testing.T) {
	examples := filepath.Join(t.TempDir(), "examples")
	if err := copyTree(filepath.Join(testenv.Root(), "examples"), examples); err != nil {
		t.Fatal(err)
	}
	ads := filepath.Join(examples, "teams", "ads.cue")
	b, err := os.ReadFile(ads)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ads, bytes.Replace(b, []byte("costCenter:"), []byte("costCentre:"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := demoOptions(t, &out)
	o.examples = examples
	_, err = run(context.Background(), o)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "CapacitySource stalled on ") || !strings.Contains(err.Error(), "teams/ads.cue:4:2: error: unknown-field") {
		t.Fatalf("run: %v; want a one-line stall at teams/ads.cue:4:2\n%s", err, out.String())
	}
	m := regexp.MustCompile(`removed (\S+)\.`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("output does not name the removed directory:\n%s", out.String())
	}
	assertCleanedUp(t, m[1])
}

// cancelOn calls cancel once marker has been written.
type cancelOn struct {
	w      *bytes.Buffer
	marker string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if strings.Contains(c.w.String(), c.marker) {
		c.cancel()
	}
	return n, err
}

// assertCleanedUp checks that dir is gone and that this process has no child
// left (the manager, kube-apiserver, etcd), not even an unreaped one.
func assertCleanedUp(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (err %v)", dir, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Logf("no /proc: child processes not checked")
		return
	}
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == me {
			t.Errorf("child process %s left running: %s", e.Name(), strings.TrimSpace(s))
		}
	}
}

func teamOf(s *snapshot, team, flavor string) *teamRow {
	for i := range s.teams {
		if s.teams[i].team == team && s.teams[i].flavor == flavor {
			return &s.teams[i]
		}
	}
	return nil
}

// TestFleetDemo is 'make demo-fleet' end to end: the hub routes the Job to
// the cheaper worker, whose own manager binds its pods there; that worker's
// API server stops, and after its failoverAfter the job is routed again to
// the other, whose manager binds it; allot explain on the hub says so; and
// everything the demo started is gone when it returns.
func TestFleetDemo(t *testing.T) {
	var out bytes.Buffer
	res, err := runFleet(context.Background(), demoOptions(t, &out))
	defer func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()
	if err != nil {
		t.Fatalf("fleet demo: %v", err)
	}
	assertCleanedUp(t, res.dir)
	if res.first != "east" || res.moved != "west" {
		t.Errorf("routed to %q, then %q: want east (cheaper), then west (east lost)", res.first, res.moved)
	}
	for _, n := range res.firstNodes {
		if !strings.HasPrefix(n, "east-") {
			t.Errorf("first run's pods on %v: want east's nodes", res.firstNodes)
		}
	}
	for _, n := range res.movedNodes {
		if !strings.HasPrefix(n, "west-") {
			t.Errorf("moved run's pods on %v: want west's nodes", res.movedNodes)
		}
	}
	if len(res.firstNodes) != 2 || len(res.movedNodes) != 2 {
		t.Errorf("pods bound %v then %v: want the gang's 2 pods each time", res.firstNodes, res.movedNodes)
	}
	for _, want := range []string{"not west: $3.75 per GPU-hour, dearer"} {
		if !strings.Contains(res.firstWhy, want) {
			t.Errorf("first routing's why %q lacks %q", res.firstWhy, want)
		}
	}
	for _, want := range []string{"routed to cluster west (attempt 2)", "not east: lost"} {
		if !strings.Contains(res.explainOutput, want) {
			t.Errorf("allot explain lacks %q:\n%s", want, res.explainOutput)
		}
	}
}
