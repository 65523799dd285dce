package recommend

import (
	"fmt"
	"strings"
	"testing"

	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

func TestOnGrid(t *testing.T) {
	jobs := []workload.Spec{
		{ID: "on", Submit: 120, Duration: 240},
		{ID: "after", Submit: 121, Duration: 179},    // arrives at the next step; 1.49 steps round to 1
		{ID: "short", Submit: 0.5, Duration: 3},      // at least one step
		{ID: "zero", Submit: 59, Duration: 0},        // stays zero
		{ID: "half", Submit: -30, Duration: 180},     // 1.5 steps round to 2
		{ID: "long", Submit: 7199.9, Duration: 3599}, // 29.99 steps round to 30
	}
	events := []sim.Event{{Time: 1, Node: "n", Kind: sim.Fail}, {Time: 240, Node: "n", Kind: sim.Recover}}
	got := onGrid(jobs, events, 120)
	want := []struct{ submit, duration float64 }{{120, 240}, {240, 120}, {120, 120}, {120, 0}, {0, 240}, {7200, 3600}}
	for i, w := range want {
		if jobs[i].Submit != w.submit || jobs[i].Duration != w.duration {
			t.Errorf("%s: submit %g, duration %g; want %g, %g", jobs[i].ID, jobs[i].Submit, jobs[i].Duration, w.submit, w.duration)
		}
	}
	if got[0].Time != 120 || got[1].Time != 240 || events[0].Time != 1 {
		t.Errorf("events %v (from %v): want at 120 and 240, the input untouched", got, events)
	}
}

// TestGridChoice: auto is a fifteenth of the smallest target, whole seconds,
// only when it cuts the history's event times at least fourfold.
func TestGridChoice(t *testing.T) {
	dense := make([]workload.Spec, 400)  // an event every 7-ish seconds
	sparse := make([]workload.Spec, 400) // already on a 10-minute clock
	for i := range dense {
		dense[i] = workload.Spec{ID: fmt.Sprint("d", i), Submit: float64(i) * 7.3, Duration: 100 + float64(i%13), Team: "a", Pods: 1, GPUsPerPod: 1}
		sparse[i] = workload.Spec{ID: fmt.Sprint("s", i), Submit: float64(i/4) * 600, Duration: 1200, Team: "a", Pods: 1, GPUsPerPod: 1}
	}
	cfg := fixture(t)
	for _, tc := range []struct {
		name  string
		jobs  []workload.Spec
		ts    []Target
		gridS float64
		want  float64
	}{
		{"auto", dense, []Target{{WaitP95S: 1800}}, 0, 120},
		{"auto, the smallest target", dense, []Target{{WaitP95S: 1800}, {Name: "b", WaitP95S: 900}}, 0, 60},
		{"auto, whole seconds", dense, []Target{{WaitP95S: 1000}}, 0, 66},
		{"auto, too small a target", dense, []Target{{WaitP95S: 10}}, 0, 0},
		{"auto, no fewer event times", sparse, []Target{{WaitP95S: 1800}}, 0, 0},
		{"set", sparse, []Target{{WaitP95S: 1800}}, 300, 300},
		{"off", dense, []Target{{WaitP95S: 1800}}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := newWorld(Input{Config: cfg, Jobs: tc.jobs, Targets: tc.ts}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.grid(tc.gridS); got != tc.want {
				t.Errorf("grid %g; want %g", got, tc.want)
			}
		})
	}
}

// TestGridAnswerMeetsTheTargetExactly: with the search on a grid, what the
// recommendation promises is still about exact replays: every team meets its
// target when the configuration is changed to the quotas and replayed as allot
// sim does, and the waits it reports are that replay's.
func TestGridAnswerMeetsTheTargetExactly(t *testing.T) {
	cfg, jobs := fixture(t), history(300)
	const target = 600.0
	res, err := Run(Input{Workload: "history", Config: cfg, Jobs: jobs, Targets: []Target{{WaitP95S: target}}, GridS: 300, CurveSteps: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The curve is replayed on the grid, and says so.
	var text strings.Builder
	if err := Text(&text, res); err != nil {
		t.Fatal(err)
	}
	if res.CurveGridS != 300 || len(res.Curve) == 0 || !strings.Contains(text.String(), "Replayed on the search's 5m0s grid") ||
		!strings.Contains(text.String(), "on a 5m0s grid)") {
		t.Errorf("curve grid %gs, %d points; want the curve on the 300s grid, and the text to say so and how many replays were on it:\n%s", res.CurveGridS, len(res.Curve), text.String())
	}
	if !res.Converged || res.GridS != 300 || res.CoarseReplays == 0 || res.CoarseReplays >= res.Replays {
		t.Fatalf("converged %v, grid %gs, %d of %d replays on it: want a converged search on the 300s grid, then exact replays",
			res.Converged, res.GridS, res.CoarseReplays, res.Replays)
	}
	after := map[schema.TeamName]int64{}
	bounded := 0
	for _, tr := range res.Teams {
		after[tr.Team] = tr.NominalAfter
		if tr.Bound == BoundTarget {
			bounded++
		}
	}
	if bounded < 2 {
		t.Fatalf("only %d teams bounded by the target: %+v", bounded, res.Teams)
	}
	checkMeets(t, res, replayWaits(t, withNominal(cfg, after), jobs), target)
}
