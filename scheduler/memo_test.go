package scheduler

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestSearchMemoDecidesAsNoMemo runs random histories (arrivals, ends, node
// faults and holds, the passing of time across the starving and reserve
// times) on two schedulers in lockstep, one remembering failed searches
// and one not (Options.NoSearchMemo), and requires the same decisions every
// cycle and the same usage at the end. Every search the memo would skip is
// run anyway (memoCheck) and must fail, and every search whose bounds another
// one's refusal would refuse (boundCheck) has them checked and refused.
func TestSearchMemoDecidesAsNoMemo(t *testing.T) {
	hits, refusals := 0, 0
	for seed := range 120 {
		rng := rand.New(rand.NewPCG(uint64(seed), 43))
		rules := seed%2 == 1
		cfg, nodes := evenWorld(rng, rules)
		opts := starvingOptions(rng)
		if rng.IntN(6) == 0 {
			opts.BorrowFirstAfter = 3 * time.Minute
		}
		off := opts
		off.NoSearchMemo = true
		a, b := newFx(t, cfg, nodes, opts), newFx(t, cfg, nodes, off)
		a.s.hooks().memoCheck = func(w *workload, ok bool) {
			hits++
			if ok {
				t.Fatalf("seed %d: %s's search failed before and nothing it read changed, yet it finds victims now", seed, w.spec.ID)
			}
		}
		b.s.hooks().memoCheck = func(w *workload, _ bool) {
			t.Fatalf("seed %d: the memo is off, yet %s's search was remembered", seed, w.spec.ID)
		}
		a.s.hooks().boundCheck = func(w *workload, refused bool) {
			refusals++
			if !refused {
				t.Fatalf("seed %d: %s's bounds were taken as refused by another search's, yet they pass", seed, w.spec.ID)
			}
		}
		b.s.hooks().boundCheck = func(w *workload, _ bool) {
			t.Fatalf("seed %d: the memo is off, yet %s's bounds were taken from another search", seed, w.spec.ID)
		}
		// Quiet stretches: time passes and nothing else happens, so that
		// what changes with time alone (starving, a drained gang's grace)
		// is what a remembered failure must notice.
		quiet := rng.IntN(4)
		next := 0
		for step := range 200 {
			sec := step * 30
			if step%20 >= 20-5*quiet {
				ra, rb := a.cycle(sec), b.cycle(sec)
				if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
					t.Fatalf("seed %d step %d (quiet): with the memo %v, without %v", seed, step, decisions(ra), decisions(rb))
				}
				continue
			}
			next = evenEvents(t, rng, cfg, rules, next, sec, a, b)
			n := nodes[rng.IntN(len(nodes))]
			switch rng.IntN(16) {
			case 0:
				setHealth(t, n.Name, rng.IntN(2) == 0, a, b)
			case 1:
				held := GPUs(rng.IntN(int(n.GPUs) + 1))
				for _, f := range []*fx{a, b} {
					if err := f.s.Hold(n.Name, held); err != nil {
						t.Fatal(err)
					}
				}
			}
			ra, rb := a.cycle(sec), b.cycle(sec)
			if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
				t.Fatalf("seed %d step %d: with the memo %v, without %v", seed, step, decisions(ra), decisions(rb))
			}
			if err := a.s.checkInvariants(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		if ua, ub := a.s.Usage(), b.s.Usage(); !reflect.DeepEqual(ua, ub) {
			t.Fatalf("seed %d: usage with the memo %+v, without %+v", seed, ua, ub)
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d searches remembered in all the worlds: the test does not exercise the memo", hits)
	}
	if refusals < 1000 {
		t.Fatalf("only %d bounds refused by another search's refusal: the test does not exercise them", refusals)
	}
	t.Logf("%d searches the memo would skip, each run and failed; %d refused by another's bounds, each checked", hits, refusals)
}

// TestRefusalsStandOnAStarvingFleet runs a fleet whose queue starves, a few
// teams borrowing most of it, with a borrowOnly tier and gangs held to racks
// and hosts, in lockstep with and without the memo, and checks every bound
// refused by another search's refusal (boundCheck). Refusals here outlive
// many admissions and releases (releasing, binding): a refusal kept where the
// room it read may have grown fails the check. One world in three has
// placement rules (views that list some nodes only, whose candidates run
// anywhere), one in three two clusters (gangs held to one, some pinned);
// nodes are held and fail and recover.
func TestRefusalsStandOnAStarvingFleet(t *testing.T) {
	var refusals [3]int // by world: plain, rules, clusters
	for seed := range 96 {
		rng := rand.New(rand.NewPCG(uint64(seed), 44))
		cfg := orgConfig()
		nodes := rack("n", "a", 12, 8, 2, 3)
		rules, clusters := seed%3 == 1, seed%3 == 2
		levels := []string{"", "rack", "block"}
		switch {
		case rules:
			nodes = classed(nodes, func(int) string { return ruleClasses[rng.IntN(len(ruleClasses))] })
		case clusters:
			nodes = append(clustered("east", 1, nodes[:6]), clustered("west", 2, nodes[6:])...)
			levels = append(levels, ClusterLevel)
		}
		opts := Options{ReserveAfter: -1, StarvationAfter: time.Duration(1+rng.IntN(3)) * time.Minute}
		if seed%4 >= 2 {
			// Gangs drain nodes and, admitted there, are taken last
			// until their grace ends: the victim order changes with time.
			opts.ReserveAfter = 3 * time.Minute
		}
		off := opts
		off.NoSearchMemo = true
		a, b := newFx(t, cfg, nodes, opts), newFx(t, cfg, nodes, off)
		// Searches by what-if evictions as well as by tallies: a
		// preemption's victims leave while the search runs.
		a.s.hooks().noTally, b.s.hooks().noTally = seed%2 == 1, seed%2 == 1
		a.s.hooks().boundCheck = func(w *workload, refused bool) {
			refusals[seed%3]++
			if !refused {
				t.Fatalf("seed %d: %s's bounds were taken as refused by another search's, yet they pass", seed, w.spec.ID)
			}
		}
		next, sec := 0, 0
		for range 300 {
			sec += 20
			if rng.IntN(30) == 0 {
				sec += 3 * 3600
			}
			for range rng.IntN(4) {
				w := orgArrival(rng, cfg, next, sec, levels, rules)
				if clusters && rng.IntN(4) == 0 {
					w.Cluster = []string{"east", "west"}[rng.IntN(2)]
				}
				a.submit(w)
				b.submit(w)
				next++
			}
			endOne(rng, a, b)
			n := nodes[rng.IntN(len(nodes))]
			switch rng.IntN(24) {
			case 0:
				setHealth(t, n.Name, rng.IntN(3) > 0, a, b)
			case 1:
				held := GPUs(rng.IntN(int(n.GPUs) + 1))
				for _, f := range []*fx{a, b} {
					if err := f.s.Hold(n.Name, held); err != nil {
						t.Fatal(err)
					}
				}
			}
			ra, rb := a.cycle(sec), b.cycle(sec)
			if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
				t.Fatalf("seed %d at %ds: with the memo %v, without %v", seed, sec, decisions(ra), decisions(rb))
			}
		}
	}
	for i, n := range refusals {
		if n < 1000 {
			t.Fatalf("only %d bounds refused by another search's refusal in the worlds of kind %d: the test does not exercise them", n, i)
		}
	}
	t.Logf("bounds refused by another search's refusal, each checked: %d plain, %d with rules, %d in two clusters", refusals[0], refusals[1], refusals[2])
}

// TestSearchMemoSeesTheStarvingTime: a search that failed before its
// workload starved is not taken as failed once it starves, though nothing
// else changed in between: a's gang fails to make room from its own lower
// tier alone, and once it has waited StarvationAfter it takes back b's later
// borrowed work (ReclaimForStarving), with the memo as without.
func TestSearchMemoSeesTheStarvingTime(t *testing.T) {
	for _, off := range []bool{false, true} {
		cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
			teamQ("a", "org", 8, nil, nil), teamQ("b", "org", 8, nil, nil), teamQ("c", "org", 8, nil, nil)}}
		f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: -1, StarvationAfter: 10 * time.Minute, NoSearchMemo: off})
		f.submit(wl("a1", "a", "research", 1, 8, 0))
		f.cycle(0)
		// b borrows c's idle quota with work submitted after the gang;
		// the fleet's last 8 GPUs are in no quota.
		f.submit(wl("b1", "b", "production", 1, 8, 2), wl("b2", "b", "production", 1, 8, 2))
		f.cycle(2)
		f.submit(wl("gang", "a", "production", 2, 8, 1))
		searched := 0
		f.s.hooks().searched = func(done bool) {
			if !done {
				searched++
			}
		}
		var by []Preemption
		for sec := 3; sec <= 20*60 && by == nil; sec += 60 {
			by = f.cycle(sec).Preempted
		}
		if searched == 0 {
			t.Fatalf("memo off %v: the gang never searched before it starved", off)
		}
		if len(by) != 2 || by[0].By != "gang" || !slices.ContainsFunc(by, func(p Preemption) bool { return p.Reason == PreemptStarving }) {
			t.Fatalf("memo off %v: preemptions %+v, want the starving gang to take back b's later work and a1", off, by)
		}
	}
}

// TestSearchMemoSeesAReservationEnd: a reservation ending is a change that
// the searches on its flavor read (their quota check keeps the holder's
// headroom, takesHeadroom), also where none of its nodes is listed again
// (each of them failed while it was held).
func TestSearchMemoSeesAReservationEnd(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{teamQ("a", "org", 32, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: -1, StarvationAfter: 10 * time.Minute})
	f.submit(wl("h", "a", "production", 2, 8, 0), wl("x", "a", "production", 1, 8, 1))
	s := f.s
	s.setNow(at(60))
	fl := s.flavors["a"]
	h, x := s.workloads["h"], s.workloads["x"]
	if !s.reserve(h, nil) || fl.res != h {
		t.Fatal("h reserved no nodes")
	}
	for _, n := range h.reserved {
		setHealth(t, n.spec.Name, false, f)
	}
	s.rememberFail(x, fl, fl.gen)
	if !s.failedBefore(x, fl) {
		t.Fatal("x's failed search was not remembered")
	}
	s.unreserve(h)
	if s.failedBefore(x, fl) {
		t.Fatal("h's reservation ended, yet x's search is taken as failed as before")
	}
}

// TestUnixNanosOrdersAsTime: a candidate's submission, as the starving
// search compares it, orders as the times do, out of an int64's range too.
func TestUnixNanosOrdersAsTime(t *testing.T) {
	times := []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(-1, 0), time.Unix(0, 0), time.Unix(0, 1), at(5), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i, a := range times {
		for _, b := range times[i+1:] {
			if !(unixNanos(a) < unixNanos(b)) && !(a.Before(minNanos) && b.Before(minNanos)) && !(a.After(maxNanos) && b.After(maxNanos)) {
				t.Errorf("%v before %v, yet %d >= %d", a, b, unixNanos(a), unixNanos(b))
			}
		}
	}
}

// TestBoundsReadTheSubmission: a starving search's bounds refused for a
// workload submitted after the borrowed work do not stand for one of its run
// submitted before it, which may take that work back, though nothing else
// differs (the same team, tier, view and state).
func TestBoundsReadTheSubmission(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
		teamQ("a", "org", 8, nil, nil), teamQ("b", "org", 8, nil, nil), teamQ("c", "org", 16, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: -1, StarvationAfter: 10 * time.Minute})
	f.submit(wl("a0", "a", "production", 1, 8, 0), wl("c1", "c", "production", 1, 8, 0))
	f.cycle(0)
	// b borrows c's idle quota with work submitted at second 2; a is at
	// its nominal, so its next workloads may only take back as starving.
	f.submit(wl("b1", "b", "production", 1, 8, 2), wl("b2", "b", "production", 1, 8, 2))
	f.cycle(2)
	f.submit(wl("early", "a", "production", 1, 8, 1), wl("late", "a", "production", 1, 8, 3))
	s := f.s
	s.setNow(at(20 * 60))
	fl := s.flavors["a"]
	early, late := s.workloads["early"], s.workloads["late"]
	if k := s.kindOf(late, fl, false); k != kindStarving {
		t.Fatalf("late's search is of kind %d, want a starving one", k)
	}
	if _, _, _, ok := s.findVictims(late, fl, s.viewOf(late, fl), false); ok {
		t.Fatal("late found victims: it may take back only work submitted after it")
	}
	if _, _, _, ok := s.findVictims(early, fl, s.viewOf(early, fl), false); !ok {
		t.Fatal("early found no victims after late's refusal: it may take back b's later borrowed work")
	}
}
