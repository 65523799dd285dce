package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSkippedRunsDecideAsTheWholeWalk drives two schedulers through the same
// random events, one passing over the runs skipRun shows cannot start and one
// considering every workload, and requires the same decisions from every
// cycle: admissions (nodes and pods), preemptions, evictions, and the same
// usage at the end. Random fleets and quota trees with an even-priority
// borrowOnly tier, with and without placement rules, reservations, a walk
// depth, starving workloads and preemption; the runs passed over must add up, or the test
// proves nothing. Every run bound taken from the cache must be the one a
// scan finds.
func TestSkippedRunsDecideAsTheWholeWalk(t *testing.T) {
	skipped, cacheHits, runs, early := 0, 0, 0, 0
	for seed := range 160 {
		rng := rand.New(rand.NewPCG(uint64(seed), 41))
		rules := seed%2 == 1
		cfg, nodes := evenWorld(rng, rules)
		opts := Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute, NoPreemption: rng.IntN(5) == 0}
		if rng.IntN(3) == 0 {
			opts.WalkDepth, opts.FullWalkEvery = 1+rng.IntN(4), time.Duration(rng.IntN(5))*time.Minute
		}
		if rng.IntN(4) == 0 {
			opts.GangTimeout, opts.Backoff = 2*time.Minute, time.Minute
		}
		// Starving workloads (on by default): a run's younger workloads
		// starve later than its oldest.
		opts.StarvationAfter = time.Duration(rng.IntN(3)) * 3 * time.Minute
		// Without statuses a run's wake comes from its cache (sortedWake).
		opts.NoStatuses = seed%4 < 2
		a, b := newFx(t, cfg, nodes, opts), newFx(t, cfg, nodes, opts)
		b.s.hooks().noSkip = true
		a.s.hooks().passedEarly = func() { early++ }
		a.s.hooks().runPassed = func(n int) { runs += n }
		a.s.hooks().checkRuns = func(cached, scanned runBound, ok bool) {
			cacheHits++
			if !ok || !sameBound(cached, scanned) {
				t.Fatalf("seed %d: a run's bound from the cache %+v, scanned now %+v (ok %v)", seed, cached, scanned, ok)
			}
		}
		next := 0
		for step := range 200 {
			sec := step * 30
			next = evenEvents(t, rng, cfg, rules, next, sec, a, b)
			if rng.IntN(12) == 0 {
				setHealth(t, nodes[rng.IntN(len(nodes))].Name, rng.IntN(2) == 0, a, b)
			}
			pending := a.pending()
			ra, rb := a.cycle(sec), b.cycle(sec)
			if ra.Walk == WalkWhole && ra.Skipped+ra.Considered != pending {
				t.Fatalf("seed %d step %d: a whole walk of %d pending workloads passed over %d and considered %d", seed, step, pending, ra.Skipped, ra.Considered)
			}
			if rb.Skipped != 0 {
				t.Fatalf("seed %d step %d: the scheduler without skips passed over %d", seed, step, rb.Skipped)
			}
			skipped += ra.Skipped
			if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
				t.Fatalf("seed %d step %d (%d passed over): with skips %v, walking every workload %v", seed, step, ra.Skipped, decisions(ra), decisions(rb))
			}
			if !ra.Wake.Equal(rb.Wake) {
				t.Fatalf("seed %d step %d (%d passed over): with skips the wake is %v, walking every workload %v", seed, step, ra.Skipped, ra.Wake, rb.Wake)
			}
			if err := a.s.checkInvariants(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
		}
		if ua, ub := a.s.Usage(), b.s.Usage(); !reflect.DeepEqual(ua, ub) {
			t.Fatalf("seed %d: usage with skips %+v, walking every workload %+v", seed, ua, ub)
		}
	}
	if skipped < 1000 || cacheHits < 1000 || runs < 1000 || early < 100 {
		t.Fatalf("only %d workloads passed over (%d by passRun), %d run bounds from the cache, %d runs passed early in all the worlds: the test does not exercise skipRun, passRun and passEarly", skipped, runs, cacheHits, early)
	}
	t.Logf("%d workloads passed over (%d by passRun), %d run bounds from the cache, %d runs passed early", skipped, runs, cacheHits, early)
}

// starvingOptions are random options of a lockstep test whose work starves
// and reserves (or not), with gang timeouts one time in four.
func starvingOptions(rng *rand.Rand) Options {
	opts := Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute, StarvationAfter: time.Duration(rng.IntN(4)) * 2 * time.Minute}
	if rng.IntN(4) == 0 {
		opts.GangTimeout, opts.Backoff = 2*time.Minute, time.Minute
	}
	return opts
}

// evenEvents submits up to four random workloads (numbered from next) to
// each fixture alike and ends one that runs, two times in three; it returns
// the next number.
func evenEvents(t *testing.T, rng *rand.Rand, cfg Config, rules bool, next, sec int, fxs ...*fx) int {
	t.Helper()
	for range rng.IntN(5) {
		w := evenWorkload(rng, cfg, next, sec, rules)
		for _, f := range fxs {
			f.submit(w)
		}
		next++
	}
	if ids := fxs[0].running(); len(ids) > 0 && rng.IntN(3) > 0 {
		id := ids[rng.IntN(len(ids))]
		for _, f := range fxs {
			f.finish(id)
		}
	}
	return next
}

// endOne ends, one time in two, a workload the first fixture runs, on each.
func endOne(rng *rand.Rand, fxs ...*fx) {
	if ids := fxs[0].running(); len(ids) > 0 && rng.IntN(2) == 0 {
		id := ids[rng.IntN(len(ids))]
		for _, f := range fxs {
			f.finish(id)
		}
	}
}

// setHealth marks node n healthy or not on each fixture.
func setHealth(t *testing.T, n NodeName, healthy bool, fxs ...*fx) {
	t.Helper()
	for _, f := range fxs {
		evicted, err := f.s.SetNodeHealth(n, healthy)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range evicted {
			delete(f.admitted, id)
		}
	}
}

// evenTiers, added to the random worlds of the skip and tally tests: a
// borrowOnly tier of the same priority as the lowest, and one above it.
var evenTiers = []Tier{{Name: "scavenger", Priority: 0, Preemptible: true, BorrowOnly: true}, {Name: "batch", Priority: 100}}

// ruleClasses are the node classes of those worlds.
var ruleClasses = []string{"x", "y", "z"}

// evenWorld is a random world with evenTiers, its nodes of random classes
// when rules.
func evenWorld(rng *rand.Rand, rules bool) (Config, []Node) {
	cfg, nodes := randomWorld(rng)
	cfg.Tiers = append(slices.Clone(cfg.Tiers), evenTiers...)
	if rules {
		nodes = classed(nodes, func(int) string { return ruleClasses[rng.IntN(3)] })
	}
	return cfg, nodes
}

// evenWorkload is a random workload of an evenWorld, with placement rules
// three times in four when rules.
func evenWorkload(rng *rand.Rand, cfg Config, id, sec int, rules bool) Workload {
	w := randomWorkloadOf(rng, cfg, id, sec, evenTiers)
	if rules && rng.IntN(4) > 0 {
		w.Rules = randomRules(rng, ruleClasses)
	}
	return w
}

func sameBound(a, b runBound) bool {
	as, bs := slices.Sorted(slices.Values(a.sinces)), slices.Sorted(slices.Values(b.sinces))
	return a.n == b.n && a.last == b.last && a.latest == b.latest && a.need == b.need && a.since == b.since && a.submitted.Equal(b.submitted) && a.rules == b.rules && a.wake.Equal(b.wake) &&
		slices.Equal(as, bs) && slices.Equal(a.shapes, b.shapes) && a.manyShapes == b.manyShapes && a.anyAhead == b.anyAhead &&
		slices.Equal(a.pods, b.pods) && slices.Equal(a.levels, b.levels)
}

// decisions is what a cycle decided, without its reasons and counts.
func decisions(r Results) string {
	var b strings.Builder
	for _, a := range r.Admitted {
		fmt.Fprintf(&b, "admit %s on %s %v %v preempting %v; ", a.Workload, a.Flavor, a.Pods, a.Domain, a.Preempted)
	}
	for _, p := range r.Preempted {
		fmt.Fprintf(&b, "preempt %s by %s (%s); ", p.Victim, p.By, p.Reason)
	}
	for _, e := range r.Evicted {
		fmt.Fprintf(&b, "evict %s (%s); ", e.Workload, e.Reason)
	}
	return b.String()
}

// TestSkipKeepsReasonsAndWakes: a run passed over keeps the reasons its
// workloads were given within resayEvery (Reason says them as they are
// now), a workload in it whose backoff ends later still wakes
// the scheduler then, and a run with one workload that can start is walked.
func TestSkipKeepsReasonsAndWakes(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 16, nil, nil), teamQ("b", "", 4, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 2, 8, 1, 0), Options{ReserveAfter: -1, NoPreemption: true})
	// Team b's work asks more than its quota: it cannot start, whatever ends.
	f.submit(wl("b1", "b", "production", 1, 8, 0), wl("b2", "b", "production", 1, 6, 0))
	if res := f.cycle(0); res.Skipped != 0 || res.Considered != 2 {
		t.Fatalf("arrivals are considered, not passed over: %+v", res)
	}
	for _, id := range []WorkloadID{"b1", "b2"} {
		if got := f.reasonCode(id); got != ReasonOverQuota {
			t.Fatalf("%s waits for %q, want %q", id, got, ReasonOverQuota)
		}
	}
	release := func(sec int) Results {
		t.Helper()
		id := fmt.Sprintf("a%d", sec)
		f.submit(wl(id, "a", "production", 1, 1, sec))
		if res := f.cycle(sec); len(res.Admitted) != 1 {
			t.Fatalf("%s not admitted: %+v", id, res)
		}
		f.finish(WorkloadID(id))
		return f.cycle(sec + 1)
	}
	// A release: the whole queue is walked, and team b's run passed over.
	b1 := f.s.workloads["b1"]
	b1.reason.Available = 123 // a reason the walk would correct
	if res := release(10); res.Skipped != 2 || res.Considered != 0 || res.Walk != WalkWhole {
		t.Fatalf("after the release: %s walk, %d considered, %d passed over; want team b's run of 2 passed over", res.Walk, res.Considered, res.Skipped)
	}
	// Said 11s ago: not worked out again in the walk before resayEvery,
	// but Reason works it out when asked.
	if b1.reason.Available != 123 {
		t.Fatalf("b1's reason was worked out again %s after the last time: %+v", at(11).Sub(b1.said), b1.reason)
	}
	if r, _ := f.s.Reason("b1"); r.Available != 4 {
		t.Fatalf("b1's reason, asked for: %+v; want 4 available", r)
	}
	// A backoff inside a run passed over still sets the wake.
	b1.notBefore = at(100)
	b1.team.queue.ver++ // as every path that sets a backoff does: it requeues
	b1.team.queue.note(b1)
	if res := release(20); res.Skipped != 2 || !res.Wake.Equal(at(100)) {
		t.Fatalf("skipped %d, wake %v; want 2 and the backoff's end %v", res.Skipped, res.Wake, at(100))
	}
	// One workload of the run fits its quota once b3 ends: the run is walked.
	f.submit(wl("b3", "b", "production", 1, 4, 29))
	f.cycle(29)
	f.submit(wl("b4", "b", "production", 1, 4, 30))
	if res := f.cycle(30); len(res.Admitted) != 0 {
		t.Fatalf("b4 admitted over team b's quota: %+v", res)
	}
	f.finish("b3")
	res := f.cycle(31)
	if res.Skipped != 0 || len(res.Admitted) != 1 || res.Admitted[0].Workload != "b4" {
		t.Fatalf("team b's run has b4, which fits its quota now: %d considered, %d passed over, admitted %v", res.Considered, res.Skipped, admittedIDs(res))
	}
}

// TestPassedOverSaysWhatIsAvailableNow: a workload passed over in a run that
// cannot start says why it waits as things are now, not as they were when it
// was last considered: in the cycle's statuses, and from Reason when the
// cycle reports none (a replay's report of the jobs that never started).
func TestPassedOverSaysWhatIsAvailableNow(t *testing.T) {
	for _, noStatuses := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoStatuses=%v", noStatuses), func(t *testing.T) {
			opts := noReserve()
			opts.NoStatuses = noStatuses
			f := newFx(t, Config{Teams: []Team{teamQ("ml", "", 64, nil, nil)}}, rack("n", "a", 2, 8, 0, 0), opts)
			// big asks 24 GPUs of a fleet of 16: it never starts.
			f.submit(wl("small", "ml", "research", 2, 8, 0), wl("big", "ml", "research", 3, 8, 1))
			f.cycle(10)
			if r, _ := f.s.Reason("big"); r.Code != ReasonInsufficientNodes || r.Available != 0 {
				t.Fatalf("big while small runs: %+v, want InsufficientNodes with 0 available", r)
			}
			f.finish("small")
			res := f.cycle(10 + int(resayEvery/time.Second))
			if res.Skipped == 0 {
				t.Fatalf("big was considered (%d), not passed over: the test proves nothing", res.Considered)
			}
			want := PendingReason{Code: ReasonInsufficientNodes, Flavor: "a", Requested: 24, Available: 16, Limit: 16}
			if r, _ := f.s.Reason("big"); r != want {
				t.Errorf("big after small ended: %+v (%s), want %+v", r, r, want)
			}
			var reported []PendingStatus
			if !noStatuses {
				reported = []PendingStatus{{Workload: "big", Reason: want}}
			}
			if !reflect.DeepEqual(res.Pending, reported) {
				t.Errorf("the cycle's statuses %+v, want %+v", res.Pending, reported)
			}
		})
	}
}

// TestStarvingRunWithRulesIsNotBoundByTheFlavorsView: a borrowing team's
// work is taken back only up to what it borrows, counted down its victims on
// the view searched, so a workload whose rules narrow its view may reach a
// victim the flavor's own view never counts. o borrows 2 GPUs, with c1 (2
// GPUs, on the class-a node, admitted last) and c2 (4, on the class-b node);
// t's starving run is w1 (2x4 GPUs, class b only) and w2 (2x4, no rules). On
// the flavor's view c1 uses up what o borrows (room 6 of 8), yet w1's own
// view takes back c2 and fits: the run must not be passed over.
func TestStarvingRunWithRulesIsNotBoundByTheFlavorsView(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "c"}}, Teams: []Team{teamQ("t", "c", 4, nil, nil), teamQ("o", "c", 4, nil, nil), teamQ("z", "c", 8, nil, nil)}}
	nodes := []Node{{Name: "A", Flavor: "a", GPUs: 2, Class: "a"}, {Name: "B", Flavor: "a", GPUs: 8, Class: "b"}}
	opts := Options{ReserveAfter: -1, StarvationAfter: time.Minute}
	var got [2]string
	for i, noSkip := range []bool{false, true} {
		f := newFx(t, cfg, nodes, opts)
		f.s.hooks().noSkip = noSkip
		f.submit(wl("c2", "o", "production", 1, 4, 100))
		f.cycle(0)
		f.submit(wl("c1", "o", "production", 1, 2, 101))
		f.cycle(1)
		if a, ok := f.admitted["c1"]; !ok || a.Pods[0].Node != "A" {
			t.Fatalf("c1 not admitted on A: %+v", f.admitted)
		}
		w1 := wl("w1", "t", "production", 2, 4, 0)
		w1.Rules = classRules("b")
		f.submit(w1, wl("w2", "t", "production", 2, 4, 1))
		f.cycle(10)
		got[i] = decisions(f.cycle(70))
	}
	if got[0] != got[1] {
		t.Fatalf("with skips %q, walking every workload %q", got[0], got[1])
	}
	if !strings.Contains(got[1], "admit w1") || !strings.Contains(got[1], "preempt c2 by w1") {
		t.Fatalf("walking every workload: %q, want w1 admitted taking back c2", got[1])
	}
}

// TestPassedRunsDecideAsTheWalk: long runs of few shapes, starving and
// reserving, in worlds whose work is taken back (epochs change within a
// walk): a walk that passes over the rest of a run by its shapes' failures
// (passRun) decides and wakes as one that considers each workload.
func TestPassedRunsDecideAsTheWalk(t *testing.T) {
	passed := 0
	for seed := range 120 {
		rng := rand.New(rand.NewPCG(uint64(seed), 59))
		cfg, nodes := evenWorld(rng, false)
		opts := Options{
			ReserveAfter:    time.Duration(rng.IntN(4)-1) * time.Minute,
			StarvationAfter: time.Duration(rng.IntN(3)) * time.Minute,
			NoStatuses:      true,
		}
		a, b := newFx(t, cfg, nodes, opts), newFx(t, cfg, nodes, opts)
		b.s.hooks().noSkip = true
		a.s.hooks().runPassed = func(n int) { passed += n }
		shapes := []struct {
			pods int64
			gpp  GPUs
		}{{1, 4}, {2, 4}, {1, 8}, {2, 8}}[:1+rng.IntN(4)]
		next := 0
		for step := range 150 {
			sec := step * 30
			for range rng.IntN(9) {
				team := cfg.Teams[rng.IntN(len(cfg.Teams))].Name
				tier := []string{"batch", "research", "production", "scavenger"}[rng.IntN(4)]
				sh := shapes[rng.IntN(len(shapes))]
				w := wl(fmt.Sprintf("w%d", next), string(team), tier, sh.pods, sh.gpp, sec)
				if rng.IntN(10) == 0 {
					w.Restarts = 1 // put ahead of its tier
				}
				a.submit(w)
				b.submit(w)
				next++
			}
			endOne(rng, a, b)
			if rng.IntN(15) == 0 {
				setHealth(t, nodes[rng.IntN(len(nodes))].Name, rng.IntN(2) == 0, a, b)
			}
			ra, rb := a.cycle(sec), b.cycle(sec)
			if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
				t.Fatalf("seed %d step %d: passing over runs %v, walking every workload %v", seed, step, decisions(ra), decisions(rb))
			}
			if !ra.Wake.Equal(rb.Wake) {
				t.Fatalf("seed %d step %d: passing over runs the wake is %v, walking every workload %v", seed, step, ra.Wake, rb.Wake)
			}
		}
	}
	if passed < 10000 {
		t.Fatalf("passRun passed over only %d workloads in all the worlds: the test does not exercise it", passed)
	}
	t.Logf("passRun passed over %d workloads", passed)
}

// TestMarkedShapesFailAsEachWould: a shape markShape marks for a run from
// an entry on is one whose every workload there failsAsShape would pass
// over, in random runs (in submission order) of random waits against
// random failures of the shape.
func TestMarkedShapesFailAsEachWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 61))
	marked, refused := 0, 0
	for range 20000 {
		s := &Scheduler{opts: Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute, StarvationAfter: time.Duration(rng.IntN(3)) * time.Minute}}
		s.cycles, s.epoch = 7, 3
		s.setNow(time.Unix(1000, 0))
		tr := &tier{spec: Tier{Name: "t", BorrowOnly: rng.IntN(4) == 0}}
		sh := &shapeInfo{}
		sec := func() int64 { return time.Unix(int64(800+rng.IntN(200)), 0).UnixNano() }
		f := failure{cycle: 7, epoch: 3, reserveTried: rng.IntN(2) == 0, starving: rng.IntN(2) == 0}
		if rng.IntN(8) == 0 {
			f.cycle = 6
		}
		if rng.IntN(8) == 0 {
			f.epoch = 2
		}
		f.sub = sec()
		f.submitted = time.Unix(0, f.sub)
		sh.fail = f
		run := make([]entry, 1+rng.IntN(6))
		for i := range run {
			sub := sec()
			run[i] = entry{seen: true, shape: sh, tier: tr, sub: sub, submitted: time.Unix(0, sub), since: sec()}
		}
		slices.SortFunc(run, func(a, b entry) int { return cmpSub(&a, &b) })
		sb := shapeBound{shape: sh, since: run[0].since}
		for _, e := range run {
			sb.since = min(sb.since, e.since)
		}
		s.passGen++
		s.markShape(&sb, &run[0])
		if sh.pass != s.passGen {
			refused++
			continue
		}
		marked++
		for i := range run {
			if !s.failsAsShape(&run[i]) {
				t.Fatalf("shape marked from %+v against %+v, yet entry %d (%+v) would be considered", run[0], f, i, run[i])
			}
		}
	}
	if marked < 2000 || refused < 2000 {
		t.Fatalf("%d marked, %d refused: the runs do not exercise markShape", marked, refused)
	}
}

// TestFollowedRunKeepsItsEntries merges random workloads into random queues
// (three tiers, two of one priority; some put back ahead), or compacts
// them, and requires of each run cache follow keeps that it holds the same
// entries as before, and no other among them, with its latest where that
// one went; and that follow kept some and gave up others, or the test
// proves nothing.
func TestFollowedRunKeepsItsEntries(t *testing.T) {
	tiers := []*tier{{spec: Tier{Name: "high", Priority: 1}}, {spec: Tier{Name: "a"}}, {spec: Tier{Name: "b"}}}
	kept, given := 0, 0
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		var q queue
		seq := int64(0)
		add := func(n int) {
			for range n {
				seq++
				q.incoming = append(q.incoming, entry{w: &workload{}, tier: tiers[rng.IntN(len(tiers))], seq: seq, sub: int64(rng.IntN(40)), ahead: rng.IntN(8) == 0})
			}
		}
		add(1 + rng.IntN(30))
		q.merge()
		start := rng.IntN(len(q.items))
		last := start + rng.IntN(len(q.items)-start)
		latest := start + rng.IntN(last-start+1)
		rc := &runCache{layout: q.layout, start: start, b: runBound{last: last, latest: latest}}
		var was []*workload
		for i := start; i <= last; i++ {
			was = append(was, q.items[i].w)
		}
		latestW := q.items[latest].w
		if rng.IntN(4) == 0 {
			// A compaction moves the entries too; follow reads merges alone.
			q.items[rng.IntN(len(q.items))].gone = true
			q.compact()
		} else {
			add(1 + rng.IntN(5))
			q.merge()
		}
		rc.follow(&q)
		if rc.layout != q.layout {
			given++
			continue
		}
		kept++
		var now []*workload
		for i := rc.start; i <= rc.b.last; i++ {
			now = append(now, q.items[i].w)
		}
		if !slices.Equal(was, now) || q.items[rc.b.latest].w != latestW {
			t.Fatalf("seed %d: the run held %p, after the merge %p (latest %v)", seed, was, now, q.items[rc.b.latest].w == latestW)
		}
	}
	if kept < 50 || given < 50 {
		t.Fatalf("follow kept %d runs and gave up %d: the test does not exercise both", kept, given)
	}
	t.Logf("follow kept %d runs, gave up %d", kept, given)
}

// TestARunIsLearntAgainOncePerCycle: a team's long run that the walk comes
// to in parts, one workload each between another team's of equal share,
// whose bound shows that it may start (its last, of placement rules, asks
// one GPU, and the flavor has two free, not on its class) while each part
// cannot. Learning the run again at each part would scan the rest of it at
// each: a whole walk learns no more than a few times the run's length. What
// it learnt from the run's start and from a later part both serve the next
// whole walk, the queue unchanged: it learns none of the run again.
func TestARunIsLearntAgainOncePerCycle(t *testing.T) {
	const n = 200
	nodes := classed(rack("n", "a", 2, 8, 0, 0), func(i int) string { return []string{"x", "y"}[i] })
	nodes = append(nodes, Node{Name: "z-0", Flavor: "z", GPUs: 8})
	cfg := Config{Cohorts: []Cohort{{Name: "org"}}, Teams: []Team{
		teamQ("a", "org", 8, nil, nil), teamQ("b", "org", 8, nil, nil), teamQ("c", "org", 16, nil, nil),
		{Name: "d", Quota: map[Flavor]Quota{"z": {Nominal: 8}}},
	}}
	f := newFx(t, cfg, nodes, Options{ReserveAfter: -1, NoStatuses: true})
	f.submit(withRules(wl("c-y", "c", "production", 1, 8, 0), "y"), withRules(wl("c-x", "c", "production", 1, 6, 0), "x"),
		withFlavors(wl("d-z", "d", "production", 1, 8, 0), "z"))
	if got := admittedIDs(f.cycle(0)); len(got) != 3 {
		t.Fatalf("admitted %v, want c-y, c-x and d-z", got)
	}
	for i := range n {
		f.submit(wl(fmt.Sprintf("a-%d", i), "a", "production", 1, 4, 10+2*i), wl(fmt.Sprintf("b-%d", i), "b", "production", 1, 4, 11+2*i))
	}
	f.submit(withRules(wl("a-last", "a", "production", 1, 1, 10+2*n), "y"))
	if got := admittedIDs(f.cycle(10 + 2*n)); len(got) != 0 {
		t.Fatalf("admitted %v, want none", got)
	}
	learnt := 0
	f.s.hooks().learnt = func(k int) { learnt += k }
	f.finish("d-z") // a release: the next cycle walks the whole queue
	res := f.cycle(20 + 2*n)
	if len(res.Admitted) != 0 || res.Walk != WalkWhole {
		t.Fatalf("admitted %v in a %v walk, want none in a whole one", admittedIDs(res), res.Walk)
	}
	skipped := res.Skipped
	if skipped < n {
		t.Fatalf("the walk passed over %d workloads: the runs were not passed over in parts", skipped)
	}
	if learnt > 4*(2*n+1) {
		t.Fatalf("the whole walk learnt runs of %d workloads in all, for queues of %d", learnt, 2*n+1)
	}
	t.Logf("passed over %d, learnt %d", skipped, learnt)
	// Another release, nothing of a's or b's changed: what the walk learnt
	// of a's run from its start and from its second part both stand; it
	// learns the rest once more from a later part (once a cycle, as above),
	// not the whole run again as well (401 workloads with one cache a run).
	f.submit(withFlavors(wl("d-z2", "d", "production", 1, 8, 30+2*n), "z"))
	if got := admittedIDs(f.cycle(30 + 2*n)); !slices.Equal(got, []WorkloadID{"d-z2"}) {
		t.Fatalf("admitted %v, want d-z2", got)
	}
	learnt = 0
	f.finish("d-z2")
	if res := f.cycle(40 + 2*n); len(res.Admitted) != 0 || res.Walk != WalkWhole || res.Skipped != skipped {
		t.Fatalf("admitted %v in a %v walk passing over %d, want none in a whole one passing over %d", admittedIDs(res), res.Walk, res.Skipped, skipped)
	}
	if learnt > n {
		t.Fatalf("the next whole walk learnt runs of %d workloads again, the queues unchanged", learnt)
	}
}
