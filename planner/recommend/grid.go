package recommend

import (
	"fmt"
	"math"

	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
)

// gridShare is the auto grid's share of the smallest target: a fifteenth (two
// minutes for a 30-minute target), so moving a job onto it changes its wait
// by a small part of what the target allows.
const gridShare = 15

// onGrid moves jobs (in place) and events onto a grid of g seconds: an
// arrival or a node event to the next multiple of g, a run time to the nearest
// multiple (at least one, unless it is zero). Every end then falls on the grid
// too, so a replay has at most one scheduling cycle per grid step instead of
// one per arrival and end.
func onGrid(jobs []workload.Spec, events []sim.Event, g float64) []sim.Event {
	for i := range jobs {
		jobs[i].Submit, jobs[i].Duration = gridTimes(jobs[i].Submit, jobs[i].Duration, g)
	}
	out := make([]sim.Event, len(events))
	for i, e := range events {
		e.Time = math.Ceil(e.Time/g) * g
		out[i] = e
	}
	return out
}

// gridTimes is a job's arrival and run time on a grid of g seconds.
func gridTimes(submit, duration, g float64) (float64, float64) {
	if duration > 0 {
		duration = max(1, math.Round(duration/g)) * g
	}
	return math.Ceil(submit/g) * g, duration
}

// grid returns the grid of the coarse search in seconds, 0 for none: gridS
// when set (> 0); none when negative; else a fifteenth of the smallest target,
// whole seconds, when the history moved onto it has at most a quarter of its
// event times (else the coarse replays would cost about as much as exact ones).
func (w *world) grid(gridS float64) float64 {
	switch {
	case gridS > 0:
		return gridS
	case gridS < 0:
		return 0
	}
	least := math.Inf(1)
	for _, cs := range w.cons {
		for _, c := range cs {
			least = min(least, c.waitS)
		}
	}
	g := math.Floor(least / gridShare)
	if math.IsInf(least, 1) || g < 1 {
		return 0
	}
	exact, coarse := map[float64]bool{}, map[float64]bool{}
	for _, j := range w.jobs {
		exact[j.Submit], exact[j.Submit+j.Duration] = true, true
		s, d := gridTimes(j.Submit, j.Duration, g)
		coarse[s], coarse[s+d] = true, true
	}
	if 4*len(coarse) > len(exact) {
		return 0
	}
	return g
}

// gridNote names the grid of a coarse world's replay in an error.
func (w *world) gridNote() string {
	if w.gridS == 0 {
		return ""
	}
	return fmt.Sprintf(" (the history on a grid of %gs)", w.gridS)
}
