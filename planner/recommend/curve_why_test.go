package recommend

import (
	"strings"
	"testing"
)

// TestCurveExplainsARise: a size whose p95 wait is longer than the next
// smaller size's of its flavor says why (its preemptions against the smaller
// size's, the rank of the job that is the p95); no other point does.
func TestCurveExplainsARise(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	ps := []CurvePoint{
		{Flavor: "a", GPUs: 8, WaitP95S: nil},
		{Flavor: "a", GPUs: 16, WaitP95S: f(600), Preemptions: 1, jobs: 124},
		{Flavor: "a", GPUs: 24, WaitP95S: f(900), Preemptions: 5, jobs: 124},
		{Flavor: "a", GPUs: 32, WaitP95S: nil, jobs: 124},
		{Flavor: "b", GPUs: 8, WaitP95S: f(1000)},
		{Flavor: "b", GPUs: 16, WaitP95S: f(10)},
	}
	explainRises(ps)
	for i, p := range ps {
		rise := i == 2 || i == 3
		if (p.Why != "") != rise {
			t.Errorf("point %d (%s at %d GPUs): why %q, want one: %v", i, p.Flavor, p.GPUs, p.Why, rise)
		}
	}
	if w := ps[2].Why; !strings.Contains(w, "longer than at 16 GPUs (10m)") || !strings.Contains(w, "5 preemptions of the flavor's jobs here, 1 there") || !strings.Contains(w, "the p95 of 124 jobs is its 7th longest wait") {
		t.Errorf("why = %q", w)
	}
}
