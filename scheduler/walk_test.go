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
			// g0 is considered; g1 and g2, of its shape, fail as it did and
			// are passed over (failsAsShape): misses all the same.
			if res.Walk != WalkStopped || res.Considered != 1 || res.Considered+res.Skipped != depth {
				t.Fatalf("the walk after the release: %q, %d considered, %d passed over; want stopped after %d, g0 considered", res.Walk, res.Considered, res.Skipped, depth)
			}
			if len(res.Admitted) != 0 {
				t.Fatalf("a walk that is not whole admitted %v past %d workloads in a row that did not fit", admittedIDs(res), depth)
			}
			for _, id := range []WorkloadID{"g0", "g1", "g3", "small"} {
				seen := f.s.workloads[id].seen == f.s.cycles
				if want := id == "g0"; seen != want {
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

// TestWholeWalkOnlyWhenSomethingChanged: a cycle walks the whole queue when
// something could now go otherwise for the waiting work, and only then. A
// gang that holds a reservation and keeps the same nodes changes nothing (a
// busy replay's every cycle was a whole walk while one was held); work a walk
// of arrivals admitted may be taken back, so the next cycle looks; and a
// workload's time to reserve, or to take back borrowed capacity as a starving
// one, is a wake, since nothing is released then.
func TestWholeWalkOnlyWhenSomethingChanged(t *testing.T) {
	t.Run("reservation", func(t *testing.T) {
		f := newFx(t, Config{Teams: []Team{teamQ("x", "", 1000, nil, nil)}}, rack("n", "a", 2, 8, 0, 0),
			Options{ReserveAfter: time.Minute})
		f.submit(wl("r0", "x", "production", 1, 8, 0), wl("r1", "x", "production", 1, 4, 0))
		f.cycle(0)
		f.submit(wl("g", "x", "production", 2, 8, 10))
		res := f.cycle(10)
		if res.Walk != WalkArrivals || len(res.Admitted) != 0 {
			t.Fatalf("the gang's arrival: walk %q, admitted %v", res.Walk, admittedIDs(res))
		}
		if want := at(70); !res.Wake.Equal(want) {
			t.Fatalf("Wake %v, want %v: when the gang may reserve", res.Wake, want)
		}
		if res := f.cycle(70); res.Walk != WalkWhole || f.reasonCode("g") != ReasonWaitingForReservation {
			t.Fatalf("at the wake: walk %q, the gang %s; want whole, %s", res.Walk, f.reasonCode("g"), ReasonWaitingForReservation)
		}
		reserved := slices.Clone(f.s.workloads["g"].reserved)
		f.finish("r1")
		if res := f.cycle(75); res.Walk != WalkWhole || !slices.Equal(f.s.workloads["g"].reserved, reserved) {
			t.Fatalf("after a release: walk %q, the gang holds %d nodes (want whole, the same %d)", res.Walk, len(f.s.workloads["g"].reserved), len(reserved))
		}
		f.submit(wl("small", "x", "production", 1, 2, 80))
		if res := f.cycle(80); res.Walk != WalkArrivals || res.Considered != 1 || len(res.Admitted) != 0 {
			t.Fatalf("the holder kept its nodes, then one arrival: walk %q, %d considered, admitted %v; want arrivals, 1, none", res.Walk, res.Considered, admittedIDs(res))
		}
	})
	t.Run("admitted", func(t *testing.T) {
		f := newFx(t, Config{Teams: []Team{teamQ("x", "", 1000, nil, nil)}}, rack("n", "a", 2, 8, 0, 0), noReserve())
		f.submit(wl("r0", "x", "production", 1, 8, 0))
		f.cycle(0)
		f.submit(wl("big", "x", "production", 2, 8, 5))
		f.cycle(5)
		if res := f.cycle(6); res.Walk != WalkArrivals || res.Considered != 0 {
			t.Fatalf("after arrivals that did not fit: walk %q, %d considered; want arrivals, 0", res.Walk, res.Considered)
		}
		f.submit(wl("small", "x", "production", 1, 4, 10))
		if res := f.cycle(10); res.Walk != WalkArrivals || !slices.Equal(admittedIDs(res), []WorkloadID{"small"}) {
			t.Fatalf("walk %q admitted %v, want arrivals, small", res.Walk, admittedIDs(res))
		}
		if res := f.cycle(11); res.Walk != WalkWhole || res.Considered+res.Skipped != 1 {
			t.Fatalf("after a walk of arrivals admitted work: walk %q, %d considered or passed over; want whole, 1 (big)", res.Walk, res.Considered+res.Skipped)
		}
	})
	t.Run("starving", func(t *testing.T) {
		lend := lim(0)
		f := newFx(t, Config{Cohorts: []Cohort{{Name: "c"}}, Teams: []Team{teamQ("x", "c", 8, nil, nil), teamQ("y", "c", 8, nil, lend)}}, rack("n", "a", 2, 8, 0, 0),
			Options{ReserveAfter: -1, StarvationAfter: time.Hour})
		f.submit(wl("x0", "x", "production", 1, 8, 0))
		f.cycle(0)
		f.submit(wl("x1", "x", "production", 1, 8, 10))
		res := f.cycle(10)
		if want := at(3610); !res.Wake.Equal(want) {
			t.Fatalf("Wake %v, want %v: when x1 starves", res.Wake, want)
		}
		if res := f.cycle(3610); res.Walk != WalkWhole {
			t.Fatalf("at the wake the cycle walked %q, want whole", res.Walk)
		}
	})
}

// TestShapeFailureLeavesAReservationToSeek: a workload that fails as one of
// its shape did earlier in the walk is passed over (failsAsShape) only when
// that one sought a reservation or it may seek none. A, restarted (ahead of
// its run), has waited too little to reserve; B, of A's shape, has waited
// long enough: B is considered and reserves after A failed.
func TestShapeFailureLeavesAReservationToSeek(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("x", "", 1000, nil, nil)}}, rack("n", "a", 3, 8, 0, 0), Options{ReserveAfter: time.Minute})
	f.submit(wl("long", "x", "production", 3, 8, 0))
	if res := f.cycle(0); len(res.Admitted) != 1 {
		t.Fatalf("long was not admitted: %+v", res)
	}
	f.submit(wl("B", "x", "production", 2, 8, 50))
	f.cycle(50)
	a := wl("A", "x", "production", 2, 8, 100)
	a.Restarts = 1
	f.submit(a)
	f.cycle(100)
	if f.s.workloads["B"].reserved != nil {
		t.Fatalf("B reserved at 100 s, having waited 50 s of the minute")
	}
	res := f.cycle(120)
	if res.Walk != WalkWhole || f.s.workloads["A"].seen != f.s.cycles {
		t.Fatalf("the walk at 120 s: %q, A considered %v; want a whole walk that considers A first", res.Walk, f.s.workloads["A"].seen == f.s.cycles)
	}
	if f.s.workloads["A"].reserved != nil || f.s.workloads["B"].reserved == nil {
		t.Fatalf("at 120 s A reserved %v, B %v: want B's reservation (it waited the minute, A did not)",
			f.s.workloads["A"].reserved != nil, f.s.workloads["B"].reserved != nil)
	}
}

// TestPreemptionMovesItsVictimsTeamUpTheWalk: a preemption lowers its
// victims' teams' shares in the middle of a walk, and the walk goes on in
// its documented order (tier, then share, then submission) with the shares
// as they are now. Team v's research gang is taken back by p; v, using
// nothing then, comes before x for the last two GPUs. Had the walk kept v
// at the place its share before the preemption gave it, x's workload would
// take them.
func TestPreemptionMovesItsVictimsTeamUpTheWalk(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "c"}}, Teams: []Team{teamQ("p", "c", 8, nil, nil), teamQ("v", "c", 4, nil, nil), teamQ("x", "c", 8, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 2, 8, 0, 0), noReserve())
	f.submit(wl("v-run", "v", "research", 1, 8, 0))
	f.cycle(0)
	f.submit(wl("x-run", "x", "production", 1, 6, 1))
	f.cycle(1)
	if got := f.running(); !slices.Equal(got, []WorkloadID{"v-run", "x-run"}) {
		t.Fatalf("running %v, want v-run and x-run", got)
	}
	// Before p's gang: v's share is 8/4 (borrowing), x's 6/8.
	f.submit(wl("p-high", "p", "production", 1, 8, 2), wl("v-next", "v", "research", 1, 2, 3), wl("x-next", "x", "research", 1, 2, 3))
	res := f.cycle(3)
	if len(res.Preempted) != 1 || res.Preempted[0].Victim != "v-run" {
		t.Fatalf("preempted %v, want v-run", res.Preempted)
	}
	if got := admittedIDs(res); !slices.Equal(got, []WorkloadID{"p-high", "v-next"}) {
		t.Fatalf("admitted %v, want p-high, then v-next (v's share is 0 after the preemption, x's 6/8)", got)
	}
}
