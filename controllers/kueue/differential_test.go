package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
	allotschema "github.com/allot-dev/allot/schema"
)

// A differential scenario is one cohort of teams sharing the GPUs of one
// flavor: the jobs of running are admitted one by one (each must be, on both
// sides), then those of incoming arrive one by one, and the test compares
// what allot's core and the real Kueue then run and what they evicted.
type diffScenario struct {
	name string
	// kueue names the case of Kueue's own preemption tests
	// (pkg/scheduler/preemption/preemption_test.go, v0.15.0) the scenario
	// follows.
	kueue string
	// tiers defaults to diffTiers.
	tiers []diffTier
	teams []diffTeam
	// running are admitted in this order before incoming arrive.
	running  []diffJob
	incoming []diffJob
	// want is what both run at the end, and which of them were evicted.
	want diffOutcome
	// allot, when set, is what allot does instead: a difference
	// docs/kueue.md states and rule, the finding `allot validate --target
	// kueue` reports at the line it concerns, names.
	allot *diffOutcome
	rule  string
	// issue names the report a row comes from, where allot's core once
	// decided otherwise.
	issue string
}

type diffTier struct {
	name        string
	priority    int64
	preemptible bool
}

type diffTeam struct {
	name    string
	nominal int64
	// borrow and lend are the borrowing and lending limits; negative: none.
	borrow, lend int64
}

type diffJob struct {
	name, team, tier string
	pods, gpus       int64
}

// diffOutcome is the jobs running at the end and those evicted on the way
// (an evicted job pending again, or running again, is still evicted).
type diffOutcome struct {
	running, evicted []string
}

// diffTiers: a high tier above two preemptible ones.
var diffTiers = []diffTier{{"high", 1000, false}, {"mid", 100, true}, {"low", 10, true}}

func team(name string, nominal int64) diffTeam { return diffTeam{name, nominal, -1, -1} }

func j(name, team, tier string, gpus int64) diffJob { return diffJob{name, team, tier, 1, gpus} }

// diffScenarios follow the preemption cases of Kueue's own tests, one per
// rule docs/kueue.md maps onto Kueue's: reclaim, own-tier preemption, both
// at once, borrowing and lending limits, gangs, equal priority, and
// reclaim that stops at the borrower's nominal; and the differences
// docs/kueue.md states.
var diffScenarios = []diffScenario{{
	name:  "reclaim",
	kueue: "reclaim quota from borrower",
	teams: []diffTeam{team("alpha", 4), team("beta", 4)},
	running: []diffJob{j("a0", "alpha", "low", 2),
		j("b1", "beta", "mid", 4), j("b2", "beta", "low", 2)},
	// alpha is under its nominal: it takes back what beta borrows, the
	// lowest tier of it first.
	incoming: []diffJob{j("a1", "alpha", "low", 2)},
	want:     diffOutcome{running: []string{"a0", "a1", "b1"}, evicted: []string{"b2"}},
}, {
	name:  "own-lower-tier",
	kueue: "preempt lowest priority",
	teams: []diffTeam{team("alpha", 4), team("beta", 4)},
	running: []diffJob{j("a0", "alpha", "low", 2), j("a1", "alpha", "mid", 2),
		j("b0", "beta", "low", 4)},
	// The cohort is full and alpha at its nominal: its high tier takes its
	// lowest tier's place; beta, within its nominal, keeps its own.
	incoming: []diffJob{j("a2", "alpha", "high", 2)},
	want:     diffOutcome{running: []string{"a1", "a2", "b0"}, evicted: []string{"a0"}},
}, {
	name:  "own-tier-and-reclaim",
	kueue: "preempting locally and borrowing same resource in cohort",
	issue: "issue 47",
	teams: []diffTeam{team("alpha", 2), team("beta", 1), team("gamma", 2)},
	running: []diffJob{j("a0", "alpha", "low", 1),
		j("b0", "beta", "low", 1), j("b1", "beta", "low", 1), j("b2", "beta", "low", 1), j("b3", "beta", "low", 1)},
	// beta borrows 3 and the cohort is full: alpha's 2 GPUs of high tier
	// take its own low job's place and one GPU back from beta, and alpha
	// runs exactly its nominal.
	incoming: []diffJob{j("a1", "alpha", "high", 2)},
	want:     diffOutcome{running: []string{"a1", "b0", "b1", "b2"}, evicted: []string{"a0", "b3"}},
}, {
	name:  "low-tier-in-every-team",
	kueue: "preempt from all ClusterQueues in cohort",
	issue: "issue 47",
	teams: []diffTeam{team("alpha", 3), team("beta", 1), team("gamma", 1)},
	running: []diffJob{j("a0", "alpha", "low", 1),
		j("b0", "beta", "low", 1), j("b1", "beta", "low", 1),
		j("c0", "gamma", "low", 1), j("c1", "gamma", "low", 1)},
	// beta and gamma borrow one each: alpha's high tier takes its low job's
	// place and one GPU from each.
	incoming: []diffJob{j("a1", "alpha", "high", 3)},
	want:     diffOutcome{running: []string{"a1", "b0", "c0"}, evicted: []string{"a0", "b1", "c1"}},
}, {
	name:    "borrowing-limit",
	kueue:   "not enough workloads borrowing",
	teams:   []diffTeam{{"alpha", 2, 1, -1}, team("beta", 4)},
	running: []diffJob{j("a0", "alpha", "low", 2)},
	// beta is idle: alpha borrows 1 and no more, and a job that would
	// borrow 2 does not hold back a smaller one behind it.
	incoming: []diffJob{j("a1", "alpha", "low", 2), j("a2", "alpha", "low", 1)},
	want:     diffOutcome{running: []string{"a0", "a2"}},
}, {
	name:    "lending-limit",
	kueue:   "reclaim quota from lender",
	teams:   []diffTeam{{"alpha", 4, -1, 1}, team("beta", 4)},
	running: []diffJob{j("b0", "beta", "mid", 4), j("b1", "beta", "low", 1)},
	// alpha lends 1 of its 4 however idle it is: beta's next GPU waits;
	// alpha's whole nominal then takes back the one it lent, from beta's
	// lowest tier (between jobs of one tier admitted in one second,
	// Kueue's choice is its own).
	incoming: []diffJob{j("b2", "beta", "low", 1), j("a0", "alpha", "low", 4)},
	want:     diffOutcome{running: []string{"a0", "b0"}, evicted: []string{"b1"}},
}, {
	name:  "gang-preempts",
	kueue: "preempt multiple",
	teams: []diffTeam{team("alpha", 8), team("beta", 8)},
	running: []diffJob{j("a0", "alpha", "low", 4), j("a1", "alpha", "low", 2),
		j("b0", "beta", "low", 8)},
	// A gang of 4 pods of 2 GPUs needs alpha's whole nominal: both low jobs
	// go, all its pods are admitted together.
	incoming: []diffJob{{"g", "alpha", "high", 4, 2}},
	want:     diffOutcome{running: []string{"b0", "g"}, evicted: []string{"a0", "a1"}},
}, {
	name:  "gang-too-big",
	kueue: "not enough low priority workloads",
	teams: []diffTeam{team("alpha", 8), team("beta", 8)},
	running: []diffJob{j("a0", "alpha", "low", 4),
		j("b0", "beta", "low", 8)},
	// 5 pods of 2 GPUs are more than alpha's nominal and beta lends none:
	// nothing is evicted for a gang that could not run anyway.
	incoming: []diffJob{{"g", "alpha", "high", 5, 2}},
	want:     diffOutcome{running: []string{"a0", "b0"}},
}, {
	name:  "equal-priority",
	kueue: "no preemption for low priority",
	teams: []diffTeam{team("alpha", 4), team("beta", 4)},
	running: []diffJob{j("a0", "alpha", "mid", 4),
		j("b0", "beta", "mid", 4)},
	// Within a tier nothing is preempted, whoever came first.
	incoming: []diffJob{j("a1", "alpha", "mid", 2)},
	want:     diffOutcome{running: []string{"a0", "b0"}},
}, {
	name:  "reclaim-stops-at-nominal",
	kueue: "not enough workloads borrowing",
	teams: []diffTeam{team("alpha", 3), team("beta", 3)},
	running: []diffJob{j("a0", "alpha", "high", 1),
		j("b0", "beta", "low", 1), j("b1", "beta", "low", 1), j("b2", "beta", "low", 1), j("b3", "beta", "low", 1), j("b4", "beta", "low", 1)},
	// alpha takes back the 2 GPUs beta borrows and not one more: beta,
	// back at its nominal, is no longer a borrower, and alpha's next job
	// would borrow.
	incoming: []diffJob{j("a1", "alpha", "high", 2), j("a2", "alpha", "high", 1)},
	want:     diffOutcome{running: []string{"a0", "a1", "b0", "b1", "b2"}, evicted: []string{"b3", "b4"}},
}, {
	name:  "non-preemptible-tier-between",
	kueue: "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
	tiers: []diffTier{{"critical", 1000, false}, {"production", 100, false}, {"batch", 10, true}},
	teams: []diffTeam{team("alpha", 4), team("beta", 4)},
	running: []diffJob{j("a0", "alpha", "batch", 4),
		j("b0", "beta", "batch", 4)},
	// allot's critical tier preempts alpha's batch job; Kueue's queue,
	// which cannot spare production alone, preempts nothing within it.
	incoming: []diffJob{j("a1", "alpha", "critical", 2)},
	want:     diffOutcome{running: []string{"a0", "b0"}},
	allot:    &diffOutcome{running: []string{"a1", "b0"}, evicted: []string{"a0"}},
	rule:     rkueue.RuleTierPreemption,
}}

// TestKueueDifferential runs each scenario through allot's scheduler core
// (as allot sim and the runner do) and through the real Kueue v0.15.0, one
// Kueue for all, each scenario in its own cohort, namespaces and priority
// classes, from the same repository (rendered for Kueue as `allot render
// --target kueue` does), and compares who runs and who was evicted.
func TestKueueDifferential(t *testing.T) {
	env := testenv.Start(t)
	testenv.StartKueue(t, env)
	started := time.Now()
	t.Run("scenarios", func(t *testing.T) {
		for i, s := range diffScenarios {
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				testDifferential(t, env.Client, fmt.Sprintf("d%d", i), s)
			})
		}
	})
	t.Logf("%d scenarios in %s", len(diffScenarios), time.Since(started).Round(100*time.Millisecond))
}

// TestDifferentialAllot holds allot's side of the scenarios alone, without
// an API server: what TestKueueDifferential finds Kueue doing, allot's core
// does (or, for a stated difference, exactly what docs/kueue.md says).
func TestDifferentialAllot(t *testing.T) {
	for i, s := range diffScenarios {
		t.Run(s.name, func(t *testing.T) {
			loadScenario(t, t.TempDir(), fmt.Sprintf("d%d", i), s)
		})
	}
}

func testDifferential(t *testing.T, c client.Client, prefix string, s diffScenario) {
	dir := t.TempDir()
	loadScenario(t, dir, prefix, s)
	got := runKueue(t, c, dir, prefix, s)
	checkOutcome(t, "Kueue", s, got, s.want)
}

// loadScenario writes the scenario's repository into dir, checks the
// findings of its Kueue rendering (the rule of a stated difference and no
// other) and runs it through allot's core.
func loadScenario(t *testing.T, dir, prefix string, s diffScenario) {
	t.Helper()
	src := diffRepository(prefix, s)
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, findings := allotschema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading the scenario's repository: %v\n%s", findings, src)
	}
	var rules []string
	for _, f := range rkueue.Findings(cfg) {
		rules = append(rules, f.Rule)
	}
	slices.Sort(rules)
	if rules = slices.Compact(rules); s.rule == "" && len(rules) > 0 || s.rule != "" && !slices.Equal(rules, []string{s.rule}) {
		t.Errorf("findings %v, want %q", rules, s.rule)
	}
	want := s.want
	if s.allot != nil {
		want = *s.allot
	}
	checkOutcome(t, "allot", s, runAllot(t, cfg, prefix, s), want)
}

func checkOutcome(t *testing.T, side string, s diffScenario, got, want diffOutcome) {
	t.Helper()
	if !sameJobs(s, got.running, want.running) || !sameJobs(s, got.evicted, want.evicted) {
		t.Errorf("%s runs %v and evicted %v; want %v running, %v evicted%s", side,
			got.running, got.evicted, want.running, want.evicted, issueNote(s))
	}
}

func issueNote(s diffScenario) string {
	if s.issue == "" {
		return ""
	}
	return " (" + s.issue + ": own-tier preemption and reclaim decide as one move, scheduler 66f7b87)"
}

// sameJobs says whether got and want hold the same jobs, counting jobs of
// one team, tier and size as one kind: which of two such jobs a scheduler
// picks is its own business.
func sameJobs(s diffScenario, got, want []string) bool {
	kind := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = n
			for _, jb := range slices.Concat(s.running, s.incoming) {
				if jb.name == n {
					out[i] = fmt.Sprintf("%s/%s/%dx%d", jb.team, jb.tier, jb.pods, jb.gpus)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(kind(got), kind(want))
}

// diffRepository is the scenario's capacity repository: one cluster whose
// pool has room for twice the cohort's quota (placement never decides:
// Kueue admits by quota alone), the scenario's tiers, one cohort, its teams.
// Every name is prefixed, so that scenarios share one Kueue.
func diffRepository(prefix string, s diffScenario) string {
	var b strings.Builder
	var total int64
	for _, tm := range s.teams {
		total += tm.nominal
	}
	fmt.Fprintf(&b, "package capacity\n\nclusters: diff: {provider: \"kwok\"}\n")
	fmt.Fprintf(&b, "pools: gpu: {cluster: \"diff\", flavor: \"gpu\", gpusPerNode: 8, nodes: {min: %[1]d, max: %[1]d}, price: onDemandPerNodeHour: 1}\n", (2*total+7)/8)
	tiers := s.tiers
	if tiers == nil {
		tiers = diffTiers
	}
	for _, tr := range tiers {
		fmt.Fprintf(&b, "tiers: %q: {priority: %d, preemptible: %v}\n", prefix+"-"+tr.name, tr.priority, tr.preemptible)
	}
	fmt.Fprintf(&b, "cohorts: %q: {}\n", prefix)
	for _, tm := range s.teams {
		q := fmt.Sprintf("nominal: %d", tm.nominal)
		if tm.borrow >= 0 {
			q += fmt.Sprintf(", borrowingLimit: %d", tm.borrow)
		}
		if tm.lend >= 0 {
			q += fmt.Sprintf(", lendingLimit: %d", tm.lend)
		}
		fmt.Fprintf(&b, "teams: %q: {costCenter: \"CC-1\", owners: [\"@%s\"], cohort: %q, quota: gpu: {%s}}\n",
			prefix+"-"+tm.name, tm.name, prefix, q)
	}
	return b.String()
}

// runAllot replays the scenario through allot's scheduler core: the
// running jobs each admitted in its own cycle, then each incoming job
// submitted a second after the last and the core cycled until nothing
// changes (well before a workload could count as starving).
func runAllot(t *testing.T, cfg *allotschema.Config, prefix string, s diffScenario) diffOutcome {
	t.Helper()
	plan := planner.Build(cfg)
	core, err := sim.NewCore(sim.QuotaFromSchema(cfg), sim.FleetFromSchema(cfg, plan.NodesTargets()), scheduler.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	now := sim.Epoch
	running := map[string]bool{}
	evicted := map[string]bool{}
	cycle := func() scheduler.Results {
		res := core.Cycle(now)
		for _, p := range res.Preempted {
			running[string(p.Victim)] = false
			evicted[string(p.Victim)] = true
		}
		for _, e := range res.Evicted {
			running[string(e.Workload)] = false
			evicted[string(e.Workload)] = true
		}
		for _, a := range res.Admitted {
			running[string(a.Workload)] = true
			if err := core.Started(a.Workload); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	submit := func(jb diffJob) {
		now = now.Add(time.Second)
		w := scheduler.Workload{ID: scheduler.WorkloadID(jb.name), Team: scheduler.TeamName(prefix + "-" + jb.team),
			Tier: scheduler.TierName(prefix + "-" + jb.tier), Pods: jb.pods, GPUsPerPod: jb.gpus, Submitted: now}
		if err := core.Submit(w); err != nil {
			t.Fatal(err)
		}
	}
	for _, jb := range s.running {
		submit(jb)
		cycle()
		if !running[jb.name] {
			t.Fatalf("allot: %s not admitted while the scenario is set up", jb.name)
		}
	}
	for _, jb := range s.incoming {
		submit(jb)
		for range 10 {
			res := cycle()
			now = now.Add(time.Second)
			if len(res.Admitted)+len(res.Preempted)+len(res.Evicted) == 0 {
				break
			}
		}
	}
	return outcome(running, evicted)
}

func outcome(running, evicted map[string]bool) diffOutcome {
	var o diffOutcome
	for n, ok := range running {
		if ok {
			o.running = append(o.running, n)
		}
	}
	for n := range evicted {
		o.evicted = append(o.evicted, n)
	}
	slices.Sort(o.running)
	slices.Sort(o.evicted)
	return o
}

// runKueue applies the scenario's repository, rendered, to Kueue, creates
// the running jobs one by one (each admitted before the next), then each
// incoming job once the last has settled, and reads who runs and who was
// evicted once nothing has changed for settleFor.
func runKueue(t *testing.T, c client.Client, dir, prefix string, s diffScenario) diffOutcome {
	t.Helper()
	o := render(t, dir)[0]
	apply(t, c, o)
	active(t, c, o)
	for _, jb := range s.running {
		gangJob(t, c, prefix, jb)
		ns := prefix + "-" + jb.team
		waitRunning(t, c, ns, jb.name)
	}
	evicted := map[string]bool{}
	var last diffOutcome
	for _, jb := range s.incoming {
		gangJob(t, c, prefix, jb)
		last = settle(t, c, prefix, s, jb, evicted)
	}
	return last
}

// settleFor is how long Kueue's decisions must stay the same to count as
// final: its scheduler decides a head in milliseconds; requeueing an evicted
// Workload takes a few reconciles.
const settleFor = 3 * time.Second

// settle waits until the incoming job jb is admitted or pending for want of
// quota and what runs has not changed for settleFor, recording every job
// seen evicted.
func settle(t *testing.T, c client.Client, prefix string, s diffScenario, jb diffJob, evicted map[string]bool) diffOutcome {
	t.Helper()
	observe := func() (diffOutcome, bool, error) {
		run := map[string]bool{}
		decided := false
		for _, x := range slices.Concat(s.running, s.incoming) {
			ns := prefix + "-" + x.team
			wl, err := workload(c, ns, x.name)
			if err != nil {
				continue // not created yet
			}
			ok, err := running(c, ns, x.name)
			if err != nil {
				return diffOutcome{}, false, err
			}
			if wasEvicted(wl) {
				evicted[x.name] = true
			}
			run[x.name] = ok && admitted(wl)
			if x.name == jb.name {
				decided = run[x.name] || pending(wl)
			}
		}
		return outcome(run, evicted), decided, nil
	}
	deadline := time.Now().Add(60 * time.Second)
	var last diffOutcome
	since := time.Now()
	for {
		o, decided, err := observe()
		if err != nil {
			t.Fatal(err)
		}
		if !decided || !slices.Equal(o.running, last.running) || !slices.Equal(o.evicted, last.evicted) {
			last, since = o, time.Now()
		} else if time.Since(since) >= settleFor {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kueue: %s not settled within 60s (runs %v, evicted %v)", jb.name, o.running, o.evicted)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func conditionTrue(wl *unstructured.Unstructured, typ string) (map[string]any, bool) {
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == typ {
			return m, m["status"] == "True"
		}
	}
	return nil, false
}

// admitted: the Workload holds quota (not evicted since).
func admitted(wl *unstructured.Unstructured) bool {
	_, ok := conditionTrue(wl, "QuotaReserved")
	return ok
}

// pending: the Workload waits for quota.
func pending(wl *unstructured.Unstructured) bool {
	m, _ := conditionTrue(wl, "QuotaReserved")
	return m != nil && m["status"] == "False" && m["reason"] == "Pending"
}

// wasEvicted: the Workload was preempted at least once (the count in its
// scheduling stats stays when it is requeued).
func wasEvicted(wl *unstructured.Unstructured) bool {
	if _, ok := conditionTrue(wl, "Preempted"); ok {
		return true
	}
	if _, ok := conditionTrue(wl, "Evicted"); ok {
		return true
	}
	evictions, _, _ := unstructured.NestedSlice(wl.Object, "status", "schedulingStats", "evictions")
	return len(evictions) > 0
}

// gangJob creates the scenario's Job jb.
func gangJob(t *testing.T, c client.Client, prefix string, jb diffJob) {
	t.Helper()
	ns := prefix + "-" + jb.team
	if err := c.Create(context.Background(), suspendedJob(ns, jb.name, ns, prefix+"-"+jb.tier, jb.pods, jb.gpus)); err != nil {
		t.Fatal(err)
	}
}
