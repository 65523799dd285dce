package whatif

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/internal/markdown"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// sharedPool is a fixed pool of 4 nodes x 8 GPUs shared by teams a and b of one
// cohort; a's nominal quota is the parameter.
func sharedPool(t *testing.T, aNominal int) *schema.Config {
	t.Helper()
	src := `package capacity
clusters: c: {provider: "kwok"}
pools: p: {cluster: "c", flavor: "h100", gpusPerNode: 8, nodes: {min: 4, max: 4}, price: onDemandPerNodeHour: 10}
tiers: production: {priority: 500}
cohorts: ml: {}
teams: a: {cohort: "ml", quota: h100: {nominal: ` + itoa(aNominal) + `}}
teams: b: {cohort: "ml", quota: h100: {nominal: 24}}
`
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil {
		t.Fatalf("fixture does not load: %v", findings)
	}
	return cfg
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// jobs: a fills the fleet at t=0 (3 jobs of 8 GPUs), b asks for 3 jobs of 8 GPUs at t=10.
func jobs() []workload.Spec {
	var out []workload.Spec
	for i, team := range []string{"a", "a", "a", "b", "b", "b"} {
		submit := 0.0
		if team == "b" {
			submit = 10
		}
		out = append(out, workload.Spec{ID: team + itoa(i), Submit: submit, Duration: 1000, Team: team, Tier: "production", Pods: 1, GPUsPerPod: 8})
	}
	return out
}

// TestOvercommittedRaiseMakesAnotherTeamWait: raising a's quota from 8 to 24 on a
// fleet fixed at 32 GPUs takes away b's guarantee. Before, b reclaims what a
// borrowed (a's two borrowed jobs are preempted, b waits 0s); after, a runs inside
// its nominal quota, b's second and third jobs wait for a's jobs to end at
// t=1000, i.e. 990s. The what-if says b would wait longer, with those numbers.
func TestOvercommittedRaiseMakesAnotherTeamWait(t *testing.T) {
	res, err := Run(Input{Workload: "w.csv", Jobs: jobs(), Base: sharedPool(t, 8), Head: sharedPool(t, 24)})
	if err != nil {
		t.Fatal(err)
	}
	byTeam := map[string]Team{}
	for _, tm := range res.Teams {
		byTeam[tm.Team] = tm
	}
	a, b := byTeam["a"], byTeam["b"]
	if !a.QuotaChanged || b.QuotaChanged {
		t.Fatalf("quota changed: a %v, b %v", a.QuotaChanged, b.QuotaChanged)
	}
	if a.Before.Preemptions != 2 || a.After.Preemptions != 0 {
		t.Errorf("a preempted %d -> %d times, want 2 -> 0", a.Before.Preemptions, a.After.Preemptions)
	}
	if b.Before.WaitP95S != 0 || b.After.WaitP50S != 990 || b.After.WaitP95S != 990 {
		t.Errorf("b waits p95 %v -> p50 %v p95 %v, want 0 -> 990, 990", b.Before.WaitP95S, b.After.WaitP50S, b.After.WaitP95S)
	}
	want := []LongerWait{
		{Team: "b", Metric: "wait_p50_s", Before: 0, After: 990},
		{Team: "b", Metric: "wait_p95_s", Before: 0, After: 990},
	}
	if diff := cmp.Diff(want, res.Longer); diff != "" {
		t.Errorf("longer waits (-want +got):\n%s", diff)
	}
	var md bytes.Buffer
	if err := Markdown(&md, res); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"**b would wait longer**: p95 queue wait 0s → 16m 30s (+16m 30s)", "| a ✎ |", "| 2 → 0 |"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}

// TestSameConfigurationChangesNothing: replaying against identical configurations
// gives identical figures and no longer waits; the inputs are left as they were.
func TestSameConfigurationChangesNothing(t *testing.T) {
	in := jobs()
	in[0].Flavors = []string{"h100"}
	before := cloneJobs(in)
	res, err := Run(Input{Workload: "w.csv", Jobs: in, Base: sharedPool(t, 8), Head: sharedPool(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Longer) != 0 {
		t.Errorf("longer waits for an unchanged configuration: %+v", res.Longer)
	}
	for _, tm := range res.Teams {
		if tm.QuotaChanged || !cmp.Equal(*tm.Before, tm.After) {
			t.Errorf("team %s differs: %+v -> %+v", tm.Team, *tm.Before, tm.After)
		}
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Run changed its input jobs:\n%s", diff)
	}
}

func cloneJobs(js []workload.Spec) []workload.Spec {
	b, _ := json.Marshal(js)
	var out []workload.Spec
	_ = json.Unmarshal(b, &out)
	return out
}

// TestHeadOnly: without a base, the figures of the proposed configuration alone.
func TestHeadOnly(t *testing.T) {
	res, err := Run(Input{Workload: "w.csv", Jobs: jobs(), Head: sharedPool(t, 8)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != nil || len(res.Teams) != 2 || res.Teams[0].Before != nil {
		t.Fatalf("head-only result has a before: %+v", res)
	}
	// a uses 8 GPUs for 1000s inside its nominal quota, plus 16 borrowed for 10s
	// before b reclaims them, then runs those two jobs later: 3 x 8 x 1000 GPU-seconds.
	if got := res.Teams[0].After.GPUSeconds; got != 24000+2*8*10 {
		t.Errorf("a used %v GPU-seconds, want %v", got, 24000+2*8*10)
	}
	var txt bytes.Buffer
	if err := Text(&txt, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(txt.String(), "→") || !strings.Contains(txt.String(), "6 jobs of w.csv") {
		t.Errorf("text:\n%s", txt.String())
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[float64]string{0: "0s", 59.4: "59s", 60: "1m", 754: "12m 34s", 3599: "59m 59s", 3600: "1h 00m", 7170: "2h 00m", 90061: "25h 01m"} {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestBurstCaused: on a pool that bursts, a's two 6-GPU gangs take a node
// each and b's 4-GPU gang waits for a burst node: the replay bills its
// GPU-hours and cost to b, and the fleet's are the same.
func TestBurstCaused(t *testing.T) {
	src := `package capacity
clusters: c: {provider: "kwok"}
pools: p: {cluster: "c", flavor: "h100", gpusPerNode: 8, nodes: {min: 0, max: 4}, price: onDemandPerNodeHour: 10, burst: {maxNodes: 2, idleAfter: "10m"}}
tiers: production: {priority: 500}
teams: a: quota: h100: nominal: 12
teams: b: quota: h100: nominal: 4
`
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil {
		t.Fatalf("fixture does not load: %v", findings)
	}
	js := []workload.Spec{
		{ID: "a1", Duration: 3600, Team: "a", Tier: "production", Pods: 1, GPUsPerPod: 6},
		{ID: "a2", Duration: 3600, Team: "a", Tier: "production", Pods: 1, GPUsPerPod: 6},
		{ID: "b1", Submit: 10, Duration: 1800, Team: "b", Tier: "production", Pods: 1, GPUsPerPod: 4},
	}
	res, err := Run(Input{Workload: "jobs", Jobs: js, Head: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var b Figures
	for _, tm := range res.Teams {
		switch tm.Team {
		case "a":
			if tm.After.BurstUSD != nil {
				t.Errorf("a caused burst: %+v", tm.After)
			}
		case "b":
			b = tm.After
		}
	}
	f := res.After
	if b.BurstUSD == nil || b.BurstGPUHours <= 0 || f.BurstUSD == nil || f.BurstUSD.Cmp(*b.BurstUSD) != 0 || f.BurstGPUHours != b.BurstGPUHours {
		t.Errorf("b %+v, fleet %+v: want b's burst to be the fleet's", b, f)
	}
	if ps := f.BurstPools; len(ps) != 1 || ps[0].Pool != "p" || ps[0].NodeHours <= 0 || ps[0].USD.Cmp(*f.BurstUSD) != 0 {
		t.Errorf("burst pools %+v, want p's node-hours at the fleet's cost", ps)
	}
}

// TestBurstRendered: the text and the Markdown of a what-if whose pool
// bursts show the pool's burst node-hours and cost and the team that caused
// them; in Markdown, a team name from the repository is escaped like every
// other cell (here one that would split the row and notify a team).
func TestBurstRendered(t *testing.T) {
	pool := BurstPool{Pool: "p", NodeHours: 0.75, USD: quantity.MustParse("7.5")}
	usd := quantity.MustParse("7.5")
	r := &Result{Workload: "jobs", Jobs: 3, After: Figures{BurstUSD: &usd, BurstPools: []BurstPool{pool}},
		Teams: []Team{{Team: "a"}, {Team: "b|@org/x", After: Figures{BurstUSD: &usd}}}}
	var text, md strings.Builder
	if err := Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BURST POOL", "p  ", "0.8", "$7.50", "Caused by: b|@org/x $7.50"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text has no %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"| burst pool | node-hours | cost |", "| p | 0.8 | $7.50 |", "Caused by: " + markdown.Text("b|@org/x") + " $7.50"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown has no %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "b|@org") {
		t.Errorf("markdown has the team's name unescaped:\n%s", md.String())
	}
	r.After = Figures{}
	text.Reset()
	if err := Text(&text, r); err != nil || strings.Contains(text.String(), "BURST") {
		t.Errorf("no burst, yet:\n%s", text.String())
	}
}
