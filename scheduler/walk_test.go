package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestWalkDepthBoundsTheWalkAfterARelease: after a release, a cycle stops once
// WalkDepth workloads in a row did not fit; what it did not reach is walked at
// the latest FullWalkEvery after the last whole walk, and the cycle's Wake says
// when. Without a bound the same release admits it at once.
func TestWalkDepthBoundsTheWalkAfterARelease(t *testing.T) {
	for _, depth := range []int{0, 3} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			f := newFx(t, Config{Teams: []Team{teamQ("x", "", 1000, nil, nil)}}, rack("n", "a", 3, 8, 0, 0),
				Options{ReserveAfter: -1, WalkDepth: depth, FullWalkEvery: time.Minute})
			f.submit(wl("r0", "x", "production", 1, 8, 0), wl("r1", "x", "production", 1, 8, 0), wl("r2", "x", "production", 1, 8, 0))
			if res := f.cycle(0); res.Walk != WalkWhole { // the nodes are new
				t.Fatalf("the first cycle walked %q", res.Walk)
			}
			// Ten gangs larger than the fleet, then a pod that fits once a node is free.
			for i := range 10 {
				f.submit(wl(fmt.Sprintf("g%d", i), "x", "production", 4, 8, 1+i))
			}
			f.submit(wl("small", "x", "production", 1, 4, 20))
			if res := f.cycle(20); res.Walk != WalkArrivals || res.Considered != 11 {
				t.Fatalf("with nothing released the cycle walked %q and considered %d, want arrivals and 11", res.Walk, res.Considered)
			}
			f.finish("r0")
			res := f.cycle(30)
			if depth == 0 {
				if !slices.Contains(admittedIDs(res), "small") || !res.Wake.IsZero() || res.Walk != WalkWhole {
					t.Fatalf("walk %q admitted %v (want whole, small), Wake %v (want none)", res.Walk, admittedIDs(res), res.Wake)
				}
				return
			}
			if res.Walk != WalkStopped || res.Considered != depth {
				t.Fatalf("the walk after the release: %q, %d considered; want stopped after %d", res.Walk, res.Considered, depth)
			}
			if len(res.Admitted) != 0 {
				t.Fatalf("a walk that is not whole admitted %v past %d workloads in a row that did not fit", admittedIDs(res), depth)
			}
			for _, id := range []WorkloadID{"g0", "g2", "g3", "small"} {
				seen := f.s.workloads[id].seen == f.s.cycles
				if want := id <= "g2"; seen != want {
					t.Fatalf("%s considered: %v, want %v", id, seen, want)
				}
			}
			if want := at(60); !res.Wake.Equal(want) {
				t.Fatalf("Wake %v, want %v (a minute after the last whole walk)", res.Wake, want)
			}
			f.submit(wl("late", "x", "production", 4, 8, 45))
			if res := f.cycle(45); len(res.Admitted) != 0 || res.Walk != WalkArrivals || !res.Wake.Equal(at(60)) {
				t.Fatalf("a cycle of arrivals before the Wake admitted %v, walked %q, Wake %v (want none, arrivals, the whole walk's)", admittedIDs(res), res.Walk, res.Wake)
			}
			if res := f.cycle(60); !slices.Contains(admittedIDs(res), "small") || res.Walk != WalkWhole {
				t.Fatalf("the whole walk at the Wake admitted %v, want small", admittedIDs(res))
			}
		})
	}
}
