package recommend

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

// burstFixture is one pool of 8-GPU nodes planned one spare node above team
// a's 16 GPUs (3 nodes, $10 a node-hour on demand) that may burst one node,
// given back after 10 minutes idle.
func burstFixture(t *testing.T) *schema.Config {
	t.Helper()
	src := `package capacity
clusters: c: {provider: "kwok"}
pools: p: {cluster: "c", flavor: "h100", gpusPerNode: 8, nodes: {min: 0, max: 6}, spareNodes: 1, price: {onDemandPerNodeHour: 10}, burst: {maxNodes: 1, idleAfter: "10m"}}
tiers: production: {priority: 500}
teams: a: {quota: h100: {nominal: 16}}
`
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil {
		t.Fatalf("fixture does not load: %v", findings)
	}
	return cfg
}

// burstyDay is a day of a's demand: a gang of two 6-GPU pods all day (one
// per node, 2 GPUs left on each) and, when steady, a 4-GPU job beside it all
// day too (four 6-hour jobs, each arriving as the last ends); else one
// 4-GPU job for half an hour. The 4-GPU jobs fit a's quota (16) but no
// node the gang holds: they take a third node.
func burstyDay(steady bool) []workload.Spec {
	job := func(id string, at, d float64, pods, gpus int64) workload.Spec {
		return workload.Spec{ID: id, Submit: at, Duration: d, Team: "a", Tier: "production", Pods: pods, GPUsPerPod: gpus, Flavors: []string{"h100"}}
	}
	jobs := []workload.Spec{job("gang", 0, 86400, 2, 6)}
	if !steady {
		return append(jobs, job("peak", 36000, 1800, 1, 4))
	}
	for i := range 4 {
		jobs = append(jobs, job(fmt.Sprintf("small%d", i), float64(i)*21600, 21600, 1, 4))
	}
	return jobs
}

// TestBurstInsteadOfFixedNodes: the search settles a's quota at 16 (the
// gang needs 12, whole nodes); the pool's spare node is weighed against its
// burst in one replay (3 in all). For the half-hour peak, burst holds a
// node 0.77 hours (about $233 a month) against $7,300 a month for the spare
// node, and the peak starts within the target: burst is chosen ($14,833
// against $21,900). When the 4-GPU work is steady, the burst node is held
// from the first decision to 10 minutes past the last end (24.17 hours):
// $21,920 against $21,900, so the fixed node stays.
func TestBurstInsteadOfFixedNodes(t *testing.T) {
	for name, tc := range map[string]struct {
		steady     bool
		wantChosen bool
	}{
		"bursty": {steady: false, wantChosen: true},
		"steady": {steady: true, wantChosen: false},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Run(Input{Workload: name, Config: burstFixture(t), Jobs: burstyDay(tc.steady), Targets: []Target{{WaitP95S: 900}}, CurveSteps: -1, GridS: -1})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Teams) != 1 || res.Teams[0].NominalAfter != 16 || len(res.Pools) != 1 || res.Pools[0].NodesAfter != 3 {
				t.Fatalf("teams %+v, pools %+v: want a at 16 GPUs on 3 nodes", res.Teams, res.Pools)
			}
			o := res.Pools[0].BurstOption
			if o == nil {
				t.Fatalf("pool %+v: want a burst option", res.Pools[0])
			}
			if o.FewerNodes != 1 || o.Nodes != 2 || !o.MeetsTargets || o.BurstNodeHours <= 0 || o.Chosen != tc.wantChosen {
				t.Errorf("option %+v, want 1 node fewer, the target met, burst used, chosen %v", o, tc.wantChosen)
			}
			if cheaper := o.ExpectedMonthlyUSD.Cmp(o.ExpectedMonthlyUSDPlanned) < 0; cheaper != tc.wantChosen {
				t.Errorf("expected monthly %s with the option against %s planned, want cheaper %v", o.ExpectedMonthlyUSD, o.ExpectedMonthlyUSDPlanned, tc.wantChosen)
			}
			if res.Replays != 3 {
				t.Errorf("%d replays, want the search's 2 and the option's 1", res.Replays)
			}
			var text, md strings.Builder
			if err := Text(&text, res); err != nil {
				t.Fatal(err)
			}
			if err := Markdown(&md, res); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{text.String(), md.String()} {
				if !strings.Contains(s, "Burst instead of fixed nodes") || !strings.Contains(s, "2 (1 fewer)") || !strings.Contains(s, "← chosen") {
					t.Errorf("no burst weighing in the output:\n%s", s)
				}
			}
			if got := strings.Contains(text.String(), "Pool p: burst instead of 1 fixed node(s)"); got != tc.wantChosen {
				t.Errorf("the text says burst is chosen: %v, want %v:\n%s", got, tc.wantChosen, text.String())
			}
			t.Logf("%s: %d replays, planned %s, option %s (%.2f burst node-hours)", name, res.Replays, o.ExpectedMonthlyUSDPlanned, o.ExpectedMonthlyUSD, o.BurstNodeHours)
		})
	}
}

// TestNoBurstOptionWithoutABuffer: a pool planned at exactly its quotas
// leaves burst no fixed node to stand in for, so no option is replayed.
func TestNoBurstOptionWithoutABuffer(t *testing.T) {
	cfg := burstFixture(t)
	p := *cfg.Pools["p"]
	p.SpareNodes = 0
	cfg.Pools["p"] = &p
	res, err := Run(Input{Workload: "bursty", Config: cfg, Jobs: burstyDay(false), Targets: []Target{{WaitP95S: 900}}, CurveSteps: -1, GridS: -1})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Pools[0].BurstOption; o != nil {
		t.Errorf("option %+v, want none", o)
	}
}

// TestWaitsOnBurstNodesCount: a job that names no flavor and runs on a
// burst node (not in the planned layout: the pool's burst added it) is
// judged as its pool's flavor's, like a job on a fixed node; its wait is
// not lost to a flavor named by no node.
func TestWaitsOnBurstNodesCount(t *testing.T) {
	jobs := burstyDay(false)
	for i := range jobs {
		jobs[i].Flavors = nil
	}
	w, err := newWorld(Input{Config: burstFixture(t), Jobs: jobs, Targets: []Target{{WaitP95S: 900}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.replayFewer(vector{16}, "p", 1)
	if err != nil {
		t.Fatal(err)
	}
	if out.burst == nil || out.burst.Pools[0].NodeHours <= 0 {
		t.Fatalf("burst %+v: want the peak on a burst node", out.burst)
	}
	if got := out.flavorJobs["h100"]; got != len(jobs) {
		t.Errorf("%d jobs judged as h100's, want all %d (by flavor: %v)", got, len(jobs), out.flavorJobs)
	}
	if p95 := out.p95[pair{"a", "h100"}]; p95 > 900 {
		t.Errorf("a's p95 on h100 %gs, want the target met", p95)
	}
}
