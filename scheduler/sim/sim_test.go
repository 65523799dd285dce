package sim

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/internal/testfiles"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

// contractRepo is the contract check's tiny repository (a copy in testdata/).
var contractRepo = testfiles.Local("contract/repo")

// trace is a trace of ../shared/traces, or its slice in testdata/.
func trace(name string) (string, bool) { return testfiles.Path("traces/" + name) }

func loadRepo(t *testing.T, dir string) *schema.Config {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading %s: %v", dir, findings)
	}
	return cfg
}

func readJobs(t testing.TB, file string, limit int) []workload.Spec {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, _, err := workload.Read(f, file)
	if err != nil {
		t.Fatal(err)
	}
	if limit > 0 && len(jobs) > limit {
		jobs = jobs[:limit]
	}
	return jobs
}

func runCore(t *testing.T, in Input, opts scheduler.Options) *Report {
	t.Helper()
	core, err := NewCore(in.Quota, in.Nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(core, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func noViolations(t *testing.T, rep *Report) {
	t.Helper()
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations != 0 {
		t.Errorf("violations: gang %d, quota %d, topology %d", s.GangViolations, s.QuotaViolations, s.TopologyViolations)
	}
}

func TestContractRepository(t *testing.T) {
	cfg := loadRepo(t, contractRepo)
	in := Input{Quota: QuotaFromSchema(cfg), Nodes: FleetFromSchema(cfg, planner.Build(cfg).NodesTargets()), Jobs: readJobs(t, contractRepo+"/workload.csv", 0)}
	rep := runCore(t, in, scheduler.DefaultOptions())
	noViolations(t, rep)
	got := map[string]JobReport{}
	for _, j := range rep.Jobs {
		got[j.ID] = j
	}
	// j1 requires a rack: both pods in one rack of 2 hosts.
	if j1 := got["j1"]; j1.Domain["rack"] == "" || len(j1.Nodes) != 2 || !strings.HasPrefix(j1.Nodes[0], "a100-") {
		t.Errorf("j1 = %+v, want two a100-<i> nodes in one rack", j1)
	}
	if rep.Summary.Completed != 3 || rep.Summary.Unschedulable != 0 {
		t.Errorf("summary = %+v, want 3 completed", rep.Summary)
	}
}

func TestNodeFailureRequeuesTheGangWhole(t *testing.T) {
	nodes := []scheduler.Node{{Name: "n-0", Flavor: "a", GPUs: 8}, {Name: "n-1", Flavor: "a", GPUs: 8}, {Name: "n-2", Flavor: "a", GPUs: 8}}
	q := scheduler.Config{Tiers: []scheduler.Tier{{Name: "p", Priority: 1}}, Teams: []scheduler.Team{{Name: "t", Quota: map[scheduler.Flavor]scheduler.Quota{"a": {Nominal: 24}}}}}
	in := Input{Nodes: nodes, Quota: q,
		Jobs:   []workload.Spec{{ID: "g", Submit: 0, Duration: 100, Team: "t", Tier: "p", Pods: 2, GPUsPerPod: 8}},
		Events: []Event{{Time: 50, Node: "n-0", Kind: Fail}, {Time: 60, Node: "n-1", Kind: Fail}, {Time: 500, Node: "n-0", Kind: Recover}},
	}
	rep := runCore(t, in, scheduler.DefaultOptions())
	noViolations(t, rep)
	j := rep.Jobs[0]
	// Runs on n-0,n-1 from 0; n-0 fails at 50: requeued whole and restarted on
	// n-1,n-2; n-1 fails at 60: only n-2 is left until n-0 recovers at 500.
	want := JobReport{ID: "g", Team: "t", Tier: "p", GPUs: 16, Submit: 0, Start: ptr(0), End: ptr(600), WaitS: ptr(0), Preempted: 2,
		Nodes: []string{"n-0", "n-2"}, Domain: map[string]string{}}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
}

func ptr(v float64) *float64 { return &v }

// TestHistoryInAnyOrder: a history out of submission order replays as the
// same history sorted, and is left as it was given.
func TestHistoryInAnyOrder(t *testing.T) {
	cfg := loadRepo(t, contractRepo)
	sorted := readJobs(t, contractRepo+"/workload.csv", 0)
	for i := range sorted {
		sorted[i].Submit = float64(10 * i)
	}
	shuffled := slices.Clone(sorted)
	slices.Reverse(shuffled)
	given := slices.Clone(shuffled)
	run := func(jobs []workload.Spec) *Report {
		in := Input{Quota: QuotaFromSchema(cfg), Nodes: FleetFromSchema(cfg, planner.Build(cfg).NodesTargets()), Jobs: jobs}
		return runCore(t, in, scheduler.DefaultOptions())
	}
	want, got := run(sorted), run(shuffled)
	if diff := cmp.Diff(want.Summary, got.Summary); diff != "" {
		t.Errorf("summary of the reversed history (-sorted +reversed):\n%s", diff)
	}
	byID := func(r *Report) map[string]JobReport {
		m := map[string]JobReport{}
		for _, j := range r.Jobs {
			m[j.ID] = j
		}
		return m
	}
	if diff := cmp.Diff(byID(want), byID(got)); diff != "" {
		t.Errorf("jobs of the reversed history (-sorted +reversed):\n%s", diff)
	}
	if !cmp.Equal(given, shuffled) {
		t.Error("the replay reordered the history it was given")
	}
}

// inert is the part of a test policy that ignores starts, ends and health
// and gives no reasons.
type inert struct{}

func (inert) Started(scheduler.WorkloadID) error { return nil }
func (inert) Finish(scheduler.WorkloadID) error  { return nil }
func (inert) Reason(scheduler.WorkloadID) (scheduler.PendingReason, bool) {
	return scheduler.PendingReason{}, false
}
func (inert) SetNodeHealth(scheduler.NodeName, bool) ([]scheduler.WorkloadID, error) {
	return nil, nil
}

// sloppy is a policy that breaks every rule the invariants check.
type sloppy struct {
	inert
	submitted []scheduler.Workload
}

func (p *sloppy) Submit(w scheduler.Workload) error { p.submitted = append(p.submitted, w); return nil }

// Cycle puts every pod of every gang on node n-0, one pod short.
func (p *sloppy) Cycle(time.Time) scheduler.Results {
	var res scheduler.Results
	for _, w := range p.submitted {
		res.Admitted = append(res.Admitted, scheduler.Admission{Workload: w.ID, Pods: []scheduler.PodPlacement{{Node: "n-0", Pods: w.Pods - 1}}})
	}
	p.submitted = nil
	return res
}

func TestInvariantsCatchABrokenPolicy(t *testing.T) {
	nodes := []scheduler.Node{
		{Name: "n-0", Flavor: "a", GPUs: 8, Domains: []scheduler.Domain{{Level: "rack", Name: "r0"}}},
		{Name: "n-1", Flavor: "a", GPUs: 8, Domains: []scheduler.Domain{{Level: "rack", Name: "r1"}}},
	}
	q := scheduler.Config{Teams: []scheduler.Team{{Name: "t", Quota: map[scheduler.Flavor]scheduler.Quota{"a": {Nominal: 8}}}}}
	in := Input{Nodes: nodes, Quota: q, Jobs: []workload.Spec{
		{ID: "g", Duration: 10, Team: "t", Tier: "p", Pods: 3, GPUsPerPod: 8, Require: "host"},
	}}
	rep, err := Run(&sloppy{}, in, Options{FullChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s.GangViolations == 0 || s.QuotaViolations == 0 || s.TopologyViolations == 0 {
		t.Errorf("violations: gang %d, quota %d, topology %d; want all > 0", s.GangViolations, s.QuotaViolations, s.TopologyViolations)
	}
}

func TestReadEvents(t *testing.T) {
	got, err := ReadEvents(strings.NewReader("time,node,event\n10,a-0,fail\n20.5,a-0,recover\n30,cluster/east,fail\n"), "ev.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{Time: 10, Node: "a-0", Kind: Fail}, {Time: 20.5, Node: "a-0", Kind: Recover}, {Time: 30, Node: "cluster/east", Kind: Fail}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A header alone is a history without node events.
	if got, err := ReadEvents(strings.NewReader("time,node,event\n"), "ev.csv"); err != nil || len(got) != 0 {
		t.Errorf("a header alone: %v, %v; want no events, no error", got, err)
	}
	for in, line := range map[string]string{
		"time,node,event\n10,a-0,explode\n":  "ev.csv:2:",
		"time,node,event\n-1,a-0,fail\n":     "ev.csv:2:",
		"t,n\n":                              "ev.csv:1:",
		"time,node,event\n1,cluster/,fail\n": "ev.csv:2:",
		"":                                   "ev.csv:1: empty file",
		"\n\n":                               "ev.csv:1: empty file",
	} {
		if _, err := ReadEvents(strings.NewReader(in), "ev.csv"); err == nil || !strings.HasPrefix(err.Error(), line) {
			t.Errorf("%q: err = %v, want %s", in, err, line)
		}
	}
}

func TestFleetFromSchemaNamesNodesByPoolAndIndex(t *testing.T) {
	cfg := loadRepo(t, contractRepo)
	nodes := FleetFromSchema(cfg, planner.Build(cfg).NodesTargets())
	if len(nodes) == 0 {
		t.Fatal("no nodes")
	}
	for i, n := range nodes {
		if want := scheduler.NodeName(fmt.Sprintf("a100-%d", i)); n.Name != want {
			t.Errorf("node %d = %s, want %s", i, n.Name, want)
		}
	}
	// PoolNodes knows every name the pool may have at its nodes.max, planned or not.
	may := PoolNodes(cfg)
	max := cfg.Pools["a100"].MaxNodes
	for name, want := range map[scheduler.NodeName]bool{
		"a100-0": true, scheduler.NodeName(fmt.Sprintf("a100-%d", max-1)): true, scheduler.NodeName(fmt.Sprintf("a100-%d", max)): false,
		"a100-01": false, "a100--1": false, "a100": false, "h100-0": false, "a100-x": false, "": false,
	} {
		if got := may(name); got != want {
			t.Errorf("PoolNodes(%q) = %v, want %v", name, got, want)
		}
	}
}

func readNodes(t *testing.T, file string) []workload.Node {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := workload.ReadNodes(f, file)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// greedy admits every workload as it comes, one pod a node from n-0 on:
// gangs whole, but no quota heeded.
type greedy struct {
	sloppy
	next int
}

func (p *greedy) Cycle(time.Time) scheduler.Results {
	var res scheduler.Results
	for _, w := range p.submitted {
		a := scheduler.Admission{Workload: w.ID}
		for range w.Pods {
			a.Pods = append(a.Pods, scheduler.PodPlacement{Node: scheduler.NodeName(fmt.Sprintf("n-%d", p.next)), Pods: 1, GPUs: w.GPUsPerPod})
			p.next++
		}
		res.Admitted = append(res.Admitted, a)
	}
	p.submitted = nil
	return res
}

// TestInvariantsCatchACohortOverItsQuota: teams of a cohort may borrow
// without limit from each other, not beyond what the cohort holds.
func TestInvariantsCatchACohortOverItsQuota(t *testing.T) {
	var nodes []scheduler.Node
	for i := range 4 {
		nodes = append(nodes, scheduler.Node{Name: scheduler.NodeName(fmt.Sprintf("n-%d", i)), Flavor: "a", GPUs: 8})
	}
	q := scheduler.Config{Cohorts: []scheduler.Cohort{{Name: "root"}, {Name: "c", Parent: "root"}}, Teams: []scheduler.Team{
		{Name: "a", Cohort: "c", Quota: map[scheduler.Flavor]scheduler.Quota{"a": {Nominal: 8}}},
		{Name: "b", Cohort: "root", Quota: map[scheduler.Flavor]scheduler.Quota{"a": {Nominal: 8}}},
	}}
	job := func(id string, sec float64) workload.Spec {
		return workload.Spec{ID: id, Submit: sec, Duration: 100, Team: "a", Tier: "p", Pods: 1, GPUsPerPod: 8}
	}
	for _, c := range []struct {
		jobs []workload.Spec
		over bool
	}{
		{[]workload.Spec{job("j0", 0), job("j1", 1)}, false},              // 16 of the cohort's 16
		{[]workload.Spec{job("j0", 0), job("j1", 1), job("j2", 2)}, true}, // 24 of 16
	} {
		rep, err := Run(&greedy{}, Input{Nodes: nodes, Quota: q, Jobs: c.jobs}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s := rep.Summary; (s.QuotaViolations > 0) != c.over || s.GangViolations+s.TopologyViolations > 0 {
			t.Errorf("%d jobs of 8 GPUs: violations quota %d, gang %d, topology %d; want quota ones: %v", len(c.jobs), s.QuotaViolations, s.GangViolations, s.TopologyViolations, c.over)
		}
	}
}
