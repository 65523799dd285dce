package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBigGangStartsOnceReserved is the no-starvation guarantee
// (docs/scheduling.md): a gang that holds its flavor's reservation starts no
// later than when the work running on its reserved nodes, when it first held
// them, has ended, whatever stream of smaller work arrives meanwhile. Small jobs
// of three teams arrive every cycle and run 1 to maxRun cycles; a gang of most
// of the fleet's nodes arrives among them. It holds as well when the walks after
// a release stop at the first workload that does not fit and the whole queue
// is walked only once an hour (Options.WalkDepth): the gang is considered anyway.
func TestBigGangStartsOnceReserved(t *testing.T) {
	const maxRun = 6
	for seed := range 400 {
		opts := Options{ReserveAfter: 0}
		if seed%2 == 1 {
			opts.WalkDepth, opts.FullWalkEvery = 1, time.Hour
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 23))
		n := 3 + rng.IntN(6)
		var cfg Config
		for i := range 3 {
			cfg.Teams = append(cfg.Teams, teamQ(fmt.Sprintf("t%d", i), "", GPUs(n*8), nil, nil))
		}
		f := newFx(t, cfg, rack("n", "a", n, 8, 0, 0), opts)
		ends := map[int][]WorkloadID{}
		gang := wl("gang", "t0", "production", int64(n-1-rng.IntN(2)), 8, 3)
		held, deadline := -1, -1
		for c := range 60 {
			for _, id := range ends[c] {
				f.finish(id)
			}
			for i := range 1 + rng.IntN(3) {
				f.submit(wl(fmt.Sprintf("s%d-%d", c, i), fmt.Sprintf("t%d", rng.IntN(3)), "production", 1, GPUs(1+rng.IntN(8)), c))
			}
			if c == 3 {
				f.submit(gang)
			}
			res := f.cycle(c)
			for _, a := range res.Admitted {
				if a.Workload != "gang" {
					e := c + 1 + rng.IntN(maxRun)
					ends[e] = append(ends[e], a.Workload)
				}
			}
			if err := f.s.checkInvariants(); err != nil {
				t.Fatalf("seed %d cycle %d: %v", seed, c, err)
			}
			if _, ok := f.admitted["gang"]; ok {
				break
			}
			if w := f.s.workloads["gang"]; held < 0 && w != nil && w.reserved != nil {
				// The work on its nodes now ends within maxRun cycles.
				held, deadline = c, c+maxRun
			}
			if deadline >= 0 && c >= deadline {
				t.Fatalf("seed %d: the gang held its reservation from cycle %d and has not started by cycle %d", seed, held, c)
			}
		}
		if _, ok := f.admitted["gang"]; !ok {
			t.Fatalf("seed %d: the gang never started (held a reservation from cycle %d)", seed, held)
		}
	}
}

// TestReservedNodesAreSticky: a gang keeps the nodes reserved for it while they
// can still hold it, even when other nodes become as free: nodes half drained
// are not handed back to new work.
func TestReservedNodesAreSticky(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: 0})
	for i := range 4 {
		f.submit(wl(fmt.Sprintf("s%d", i), "a", "production", 1, 8, 0))
	}
	f.cycle(0)
	f.submit(wl("gang", "a", "production", 2, 8, 1))
	f.cycle(1)
	first := slices.Clone(f.s.workloads["gang"].reserved)
	if len(first) != 2 {
		t.Fatalf("reserved %d nodes, want 2", len(first))
	}
	// A node the gang does not hold frees up; the gang keeps its nodes.
	for id := range f.admitted {
		if nodes := f.nodesOf(id); id != "gang" && !slices.ContainsFunc(first, func(n *node) bool { return n.spec.Name == nodes[0] }) {
			f.finish(id)
			break
		}
	}
	f.submit(wl("late", "a", "production", 1, 8, 2))
	f.cycle(2)
	if got := f.s.workloads["gang"].reserved; !slices.Equal(got, first) {
		t.Errorf("reserved %v after another node freed, want %v kept", names(got), names(first))
	}
	if _, ok := f.admitted["late"]; !ok {
		t.Errorf("late work did not take the node freed outside the reservation")
	}
}

func names(ns []*node) []NodeName {
	var out []NodeName
	for _, n := range ns {
		out = append(out, n.spec.Name)
	}
	return out
}

// TestDrainedQuotaHeldAgainstBorrowing: the GPUs drained on a gang's reserved
// nodes hold its quota too: work that would borrow from the cohort may not
// take it (it waits BlockedByReservation), while a team within its nominal is
// never held back.
func TestDrainedQuotaHeldAgainstBorrowing(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
		teamQ("a", "org", 16, nil, nil), teamQ("b", "org", 16, nil, nil), teamQ("c", "org", 0, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 6, 8, 0, 0), Options{ReserveAfter: 0})
	for i := range 4 {
		id := fmt.Sprintf("b%d", i)
		if err := f.s.Restore(wl(id, "b", "production", 1, 4, 0), []PodPlacement{{Node: NodeName(fmt.Sprintf("n-%d", i)), Pods: 1}}); err != nil {
			t.Fatal(err)
		}
		f.admitted[WorkloadID(id)] = Admission{Workload: WorkloadID(id), Pods: []PodPlacement{{Node: NodeName(fmt.Sprintf("n-%d", i)), Pods: 1}}}
	}
	for _, n := range []NodeName{"n-4", "n-5"} {
		if err := f.s.Hold(n, 4); err != nil {
			t.Fatal(err)
		}
	}
	f.submit(wl("gang", "a", "production", 2, 8, 0))
	f.cycle(0)
	res := f.s.workloads["gang"].reserved
	if len(res) != 2 {
		t.Fatalf("gang reserved %v, want 2 nodes", names(res))
	}
	// The work on one reserved node ends: 8 GPUs drained toward the gang.
	f.finish(WorkloadID("b" + string(res[0].spec.Name[len("n-"):])))
	var cs []Workload
	for i := range 4 {
		cs = append(cs, wl(fmt.Sprintf("c%d", i), "c", "production", 1, 4, 1))
	}
	f.submit(cs...)
	f.submit(wl("b9", "b", "production", 1, 4, 1))
	f.cycle(1)
	if _, ok := f.admitted["b9"]; !ok {
		r, _ := f.s.Reason("b9")
		t.Errorf("team b, within its nominal, was held back: %s", r)
	}
	blocked := 0
	for _, c := range cs {
		if r, ok := f.s.Reason(c.ID); ok {
			if r.Code != ReasonReserved || r.Holder != "gang" {
				t.Errorf("%s waits %s, want %s for gang", c.ID, r, ReasonReserved)
			}
			blocked++
		}
	}
	if blocked == 0 {
		t.Errorf("every borrowing job of team c was admitted, taking the quota drained toward the gang")
	}
	if avail := f.s.teams["a"].q.Available(f.s.flavors["a"].id); avail < 8 {
		t.Errorf("the gang's team has %d GPUs of quota left, want at least the 8 drained for it", avail)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestDrainedGangReclaimedLast: among the borrowed work a team under its
// nominal reclaims, a gang just admitted on the nodes drained for it goes
// after the rest of its tier, though it started last.
func TestDrainedGangReclaimedLast(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{teamQ("a", "org", 0, nil, nil), teamQ("b", "org", 32, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: 0})
	for _, r := range []struct {
		id, team string
		node     NodeName
	}{{"a1", "a", "n-0"}, {"a2", "a", "n-0"}, {"b1", "b", "n-1"}, {"b2", "b", "n-2"}} {
		if err := f.s.Restore(wl(r.id, r.team, "production", 1, 4, 0), []PodPlacement{{Node: r.node, Pods: 1}}); err != nil {
			t.Fatal(err)
		}
		f.admitted[WorkloadID(r.id)] = Admission{Workload: WorkloadID(r.id), Pods: []PodPlacement{{Node: r.node, Pods: 1}}}
	}
	f.submit(wl("gang", "a", "production", 2, 8, 1))
	f.cycle(1)
	res := f.s.workloads["gang"].reserved
	if len(res) != 2 {
		t.Fatalf("gang has no reservation: %s", f.reasonCode("gang"))
	}
	for _, n := range res {
		switch n.spec.Name {
		case "n-1":
			f.finish("b1")
		case "n-2":
			f.finish("b2")
		}
	}
	f.cycle(2)
	if _, ok := f.admitted["gang"]; !ok {
		t.Fatalf("gang not admitted on its drained nodes: %s", f.reasonCode("gang"))
	}
	f.submit(wl("b3", "b", "production", 1, 8, 3))
	out := f.cycle(3)
	var victims []WorkloadID
	for _, p := range out.Preempted {
		victims = append(victims, p.Victim)
	}
	slices.Sort(victims)
	if !slices.Equal(victims, []WorkloadID{"a1", "a2"}) {
		t.Errorf("reclaimed %v, want [a1 a2] before the gang just admitted on its drained nodes", victims)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestBorrowFirst: with Options.BorrowFirstAfter, a gang that waited that long
// for the cohort's idle quota gets the quota freed in small pieces before
// another team's later, smaller borrowing work takes it; a team within its
// nominal still takes its own at once. Without the option the small work
// borrows each piece as it frees and the gang waits on.
func TestBorrowFirst(t *testing.T) {
	for _, after := range []time.Duration{0, 100 * time.Second} {
		cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
			teamQ("a", "org", 8, nil, nil), teamQ("b", "org", 16, nil, nil), teamQ("c", "org", 8, nil, nil)}}
		f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: -1, BorrowFirstAfter: after})
		f.submit(wl("a0", "a", "production", 1, 8, 0), wl("b0", "b", "production", 1, 8, 0),
			wl("b1", "b", "production", 1, 8, 0), wl("c0", "c", "production", 1, 8, 0))
		f.cycle(0)
		f.submit(wl("gang", "a", "production", 2, 8, 10)) // a at its nominal: the gang borrows 8
		f.cycle(10)
		f.cycle(200)
		f.finish("b0")
		f.submit(wl("b2", "b", "production", 1, 8, 300), wl("c1", "c", "production", 1, 8, 300))
		if got := admittedIDs(f.cycle(300)); !slices.Equal(got, []WorkloadID{"b2"}) {
			t.Fatalf("after %v: cycle 300 admitted %v, want b2 (within its nominal)", after, got)
		}
		f.finish("b1")
		got400 := admittedIDs(f.cycle(400))
		r, _ := f.s.Reason("c1")
		f.finish("b2")
		got500 := admittedIDs(f.cycle(500))
		if after == 0 {
			if !slices.Equal(got400, []WorkloadID{"c1"}) || len(got500) != 0 {
				t.Fatalf("without the option: admitted %v at 400 and %v at 500, want c1 then nothing", got400, got500)
			}
			continue
		}
		if len(got400) != 0 || r.Code != ReasonReserved || r.Holder != "gang" {
			t.Fatalf("cycle 400 admitted %v; c1 waits for %v, want nothing admitted and c1 held back for the gang", got400, r)
		}
		if !slices.Equal(got500, []WorkloadID{"gang"}) {
			t.Fatalf("cycle 500 admitted %v, want the gang", got500)
		}
		if err := f.s.checkInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStarvingWorkloadTakesBackLaterBorrowing: a gang of a team at its
// nominal waits for the cohort's idle quota while another team's later work
// borrows every piece that frees. Once it has waited StarvationAfter it takes
// back that later borrowed work (ReclaimForStarving), and only that: not the
// borrowed work submitted before it, nor anything a team runs within its
// nominal (when that is all that would make room, it keeps waiting). Without
// the rule it keeps waiting.
func TestStarvingWorkloadTakesBackLaterBorrowing(t *testing.T) {
	for _, after := range []time.Duration{0, 100 * time.Second} {
		// lateTeam: who takes the GPUs freed at 40: c borrowing them (then
		// later borrowed work makes room), or b within its nominal (then only
		// borrowed work submitted before the gang would).
		for _, lateTeam := range []string{"c", "b"} {
			cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
				teamQ("a", "org", 8, nil, nil), teamQ("b", "org", 32, nil, nil), teamQ("c", "org", 8, nil, nil)}}
			f := newFx(t, cfg, rack("n", "a", 6, 8, 0, 0), Options{ReserveAfter: -1, StarvationAfter: after})
			f.submit(wl("a0", "a", "research", 1, 8, 0), wl("b0", "b", "research", 1, 8, 0), wl("c0", "c", "research", 1, 8, 0))
			f.cycle(0)
			f.submit(wl("early", "c", "research", 1, 8, 5))
			f.cycle(5)
			f.submit(wl("early2", "c", "research", 1, 8, 6))
			f.cycle(6)
			f.submit(wl("gang", "a", "research", 2, 8, 10)) // a at its nominal: the gang borrows 16, 8 are idle
			f.submit(wl("late", "c", "research", 1, 8, 20))
			if got := admittedIDs(f.cycle(20)); !slices.Equal(got, []WorkloadID{"late"}) {
				t.Fatalf("after %v: cycle 20 admitted %v, want late (it borrows the 8 idle GPUs)", after, got)
			}
			f.finish("early")
			f.submit(wl("late2", lateTeam, "research", 1, 8, 40))
			if got := admittedIDs(f.cycle(40)); !slices.Equal(got, []WorkloadID{"late2"}) {
				t.Fatalf("after %v: cycle 40 admitted %v, want late2", after, got)
			}
			if r := f.reasonCode("gang"); r != ReasonCohortExhausted {
				t.Fatalf("after %v: the gang waits for %v, want %v", after, r, ReasonCohortExhausted)
			}
			// The next walk (a starving workload is considered at the next
			// walk, as a reservation is): b's work ends and b, within its
			// nominal, takes its GPUs back at once.
			f.finish("b0")
			f.submit(wl("b1", "b", "research", 1, 8, 200))
			res := f.cycle(200)
			if after == 0 || lateTeam == "b" {
				if got := admittedIDs(res); !slices.Equal(got, []WorkloadID{"b1"}) || len(res.Preempted) != 0 {
					t.Fatalf("after %v, late2 %s's: cycle 200 admitted %v and preempted %v, want b1 and nothing preempted",
						after, lateTeam, got, res.Preempted)
				}
				continue
			}
			if got := admittedIDs(res); !slices.Equal(got, []WorkloadID{"b1", "gang"}) {
				t.Fatalf("cycle 200 admitted %v, want b1 then the starving gang", got)
			}
			var victims []WorkloadID
			for _, p := range res.Preempted {
				if p.By != "gang" || p.Reason != PreemptStarving {
					t.Errorf("preemption %+v, want by the gang for %s", p, PreemptStarving)
				}
				victims = append(victims, p.Victim)
			}
			slices.Sort(victims)
			if !slices.Equal(victims, []WorkloadID{"late", "late2"}) {
				t.Fatalf("the gang preempted %v, want late and late2 (borrowed, submitted after it)", victims)
			}
			if err := f.s.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
