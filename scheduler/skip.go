package scheduler

import (
	"math"
	"slices"
	"time"
)

// runScratch is what the walks keep to pass over runs: skipRun's buffers,
// and the run passRun walks, numbered.
type runScratch struct {
	runPods   []podBound
	runLevels []levelBound
	runSinces []int64
	runShapes []shapeBound
	passGen   uint64
	pass      runPass
	// scans numbers the runs scanRun reads (shapeInfo.scan).
	scans uint64
	// failsNot is the workload at the head of the run passRun walks when
	// it found that it does not fail as one of its shape or class did: the
	// step that follows at once (consider) need not ask again. Every step
	// clears it.
	failsNot *workload
	// early are the cursors whose run was passed early and is not yet
	// counted (passEarly); walked is the workload the walk came to last;
	// noEarly: none is passed early now (walkTo).
	early   []*cursor
	walked  walked
	noEarly bool
}

// A walk after a release goes through the pending queue in order, but most of
// a busy queue still does not fit: a cycle re-learns, workload by workload,
// what it learnt in the last one. skipRun bounds a whole run at once: the
// pending workloads of one team and tier, which the walk takes one after
// another while that team's share is the smallest and nothing of the run
// starts. When a bound on what the run asks of each flavor (the fewest GPUs;
// per pod size, and per required level and pod size, the fewest pods) shows
// that none of them can be admitted, preempt or reserve, the walk passes over
// the run (a starving run too, bounded by the search of its first submitted:
// searchRoom); their reasons are what a consideration finds first, worked
// out again every resayEvery (reexplain; Scheduler.Reason works it out when
// asked). The decisions are those of the walk that tries each workload: the
// bounds are ones the admission, preemption and reservation paths check
// before anything else, taken over the run
// (TestSkippedRunsDecideAsTheWholeWalk).
//
// A run's bound is learnt once and kept (runCache) while the team's queue
// holds the run's entries where they were: a bound of more workloads bounds
// any part of them, so one learnt from the run's first workload serves each
// part the walk comes to between other teams' parts (teams of equal share
// take turns by submission), and still serves once some of the run left,
// took a reservation or a merge put workloads before or after it (follow).
// Where the bound of the whole shows that some of it may start, the run is
// learnt again from the walk's place (once a cycle; kept as the run's part,
// beside the cache from its start), then the part bounded from its own
// entries.

// runBound is what a run of pending workloads asks, at the least.
type runBound struct {
	n    int
	last int // index of its last workload in the cursor's list
	// latest is the index of its workload submitted last: the one another
	// team's work comes before first (comesBefore), which is not the last
	// when some of the run went back to the front of the queue (ahead).
	latest int
	need   GPUs
	// submitted is the first submission of the run's workloads: a starving
	// one takes back only what was submitted after it.
	submitted time.Time
	sub       int64
	// rules: some workload of the run has placement rules.
	rules bool
	// pods: per pod size, the fewest pods asked by a workload that requires
	// no topology level; levels: the same per level and pod size for those
	// that require one.
	pods   []podBound
	levels []levelBound
	since  int64
	wake   time.Time
	// sinces are the run's workloads' since; in a run's cache (runCache)
	// sorted ascending when first the run's wake is found from them
	// (sortedWake).
	sinces []int64
	// shapes are the run's workloads' shapes (passRun), unless there are
	// more than maxRunShapes (manyShapes); anyAhead: some workload of the
	// run was put ahead (so the run is not in submission order).
	shapes     []shapeBound
	manyShapes bool
	anyAhead   bool
}

// shapeBound is a shape of a run's workloads, with the earliest since of
// its workloads there.
type shapeBound struct {
	shape *shapeInfo
	since int64
}

// maxRunShapes is the most shapes a run's bound keeps.
const maxRunShapes = 64

// addShape adds e's shape to the shapes of the run scan reads.
func addShape(bs []shapeBound, many bool, e *entry, scan uint64) ([]shapeBound, bool) {
	if sh := e.shape; sh.scan == scan {
		b := &bs[sh.at]
		b.since = min(b.since, e.since)
		return bs, many
	}
	if many || len(bs) == maxRunShapes {
		return bs, true
	}
	e.shape.scan, e.shape.at = scan, len(bs)
	return append(bs, shapeBound{shape: e.shape, since: e.since}), false
}

type podBound struct {
	gpp  GPUs
	pods int64
}

type levelBound struct {
	level string
	gpp   GPUs
	pods  int64
}

// skipRun passes over c's run (the workloads of c's team and of c.cur's tier
// still to walk), or the part of it up to the first workload the walk must
// consider or another team's work comes before, when none of that can start.
// It returns how many workloads it passed over; c then stands after them.
// When it stops short of the run's end, c.tier is cleared so that the rest
// is looked at in its turn.
//
// The times the run's workloads may first reserve or starve are the cycle's
// wake, as the walk that considers each would make them (wakeBy), for the
// first looked of them (all, when looked < 0): a walk stopping at WalkDepth
// looks at no more.
func (s *Scheduler) skipRun(c *cursor, h teamHeap, looked int, res *Results) int {
	if s.test != nil && s.test.noSkip || s.opts.BorrowFirstAfter > 0 {
		return 0 // the borrow-first gang is chosen as the walk fails
	}
	tier := c.head.tier
	if rc := s.learnRun(c); rc != nil {
		if n, ok := s.skipLearnt(c, h, rc, looked, res); ok {
			return n
		}
		if first := c.t.run(tier); (rc.start != c.i-1 || rc.ver != c.t.queue.ver) && first.relearnt != s.cycles {
			// Its bound is of more than c's run from here: learnt again
			// (as the run's part), it may show that this much cannot
			// start. Once a cycle: a run that may start learnt again at
			// each of its parts would cost a scan of the rest of it at
			// each.
			first.relearnt = s.cycles
			if rc.start == c.i-1 {
				rc = s.learn(c, rc) // some of it left or reserved since
			} else {
				rc = s.learnPart(c, first)
			}
			if rc != nil {
				if n, ok := s.skipLearnt(c, h, rc, looked, res); ok {
					return n
				}
			}
		}
	}
	b, whole := s.scanRun(c, h)
	if b.n == 0 {
		return 0
	}
	if !s.runStuck(c.t, tier, b) {
		if looked < 0 {
			s.enterRun(c, &b)
		}
		return 0
	}
	s.wakeEach(c, b.last, looked, res)
	c.i = b.last + 1
	c.next()
	if !whole {
		c.tier = nil
	}
	res.Skipped += b.n
	return b.n
}

// wakeEach makes the wake of the run's workloads from c's head to entry
// last, as the walk that considers each would (wakeFor), and says their
// reasons again (reexplain), for the first looked of them (all, when
// looked < 0).
func (s *Scheduler) wakeEach(c *cursor, last, looked int, res *Results) {
	for i := c.i - 1; i <= last && looked != 0; i++ {
		if e := &c.list[i]; !e.gone {
			s.wakeFor(c.t, c.head.tier, e.since, e.notBefore)
			if !s.opts.NoStatuses {
				s.reexplain(e.w, res)
			}
			looked--
		}
	}
}

// skipLearnt passes over c's run, or the part of it before another team's
// work (h's top) or a workload that took a reservation since, using what
// the run's cache learnt of the whole run: its bound, from the workload it
// was learnt at (rc.start) to the run's last, holds for every part of it and
// for what stays of it, for it asks no more than any workload there. ok is false
// when the cache cannot tell (the bound of the whole run shows that some of
// it may start: the part's own bound may not); c's run is then bounded from
// its entries.
func (s *Scheduler) skipLearnt(c *cursor, h teamHeap, rc *runCache, looked int, res *Results) (int, bool) {
	b := &rc.b
	var top *cursor
	if len(h) > 0 && comesBefore(h[0].t, h[0].head, c.t, &c.list[b.latest]) {
		top = h[0]
		if comesBefore(top.t, top.head, c.t, c.head) {
			return 0, true // not one of the run comes first
		}
	}
	exact := rc.ver == c.t.queue.ver // else some left or hold a reservation
	if exact && s.test != nil && s.test.checkRuns != nil {
		at := cursor{t: c.t, list: c.list[:rc.b.last+1], i: rc.start}
		at.next()
		scanned, whole := s.scanRun(&at, nil)
		s.test.checkRuns(rc.b, scanned, whole)
	}
	whole := top == nil && rc.firstLive(c)
	if !rc.stillStuck(c.t, s.cycles) {
		if !s.runStuck(c.t, c.head.tier, *b) {
			if !exact {
				return 0, false // passRun's walk must end before one held
			}
			if whole && looked < 0 {
				s.enterRun(c, b)
			}
			return 0, whole
		}
		rc.stuckIn(c.t, s.cycles)
	}
	if whole && exact {
		// The whole run.
		if looked < 0 && s.opts.NoStatuses {
			s.wakePassed(c.t, c.head.tier, rc.wake(s))
		} else {
			s.wakeEach(c, b.last, looked, res)
		}
		rc.passTo(c, b.last+1)
		res.Skipped += b.n
		return b.n, true
	}
	if looked < 0 && s.opts.NoStatuses && !s.noEarly && !b.anyAhead {
		return s.passEarly(c, rc), true
	}
	// From c's head up to the first workload h's top comes before.
	end, n := c.i-1, 0
	wake := noPassedWake()
	for ; end <= b.last; end++ {
		e := &c.list[end]
		if e.gone {
			continue
		}
		if e.mustConsider() || (top != nil && comesBefore(top.t, top.head, c.t, e)) {
			break
		}
		wake.add(s, e.since)
		n++
	}
	if looked < 0 && s.opts.NoStatuses {
		s.wakePassed(c.t, c.head.tier, wake)
	} else {
		s.wakeEach(c, end-1, looked, res)
	}
	rc.passTo(c, end)
	res.Skipped += n
	return n, true
}

// passedWake is, of the workloads passed over in one go, the earliest wait
// after each cut (reserveCut, starveCut): wakeBy of those two brings the
// cycle's wake forward as wakeBy of each would (wakePassed).
type passedWake struct{ reserve, starve int64 }

func noPassedWake() passedWake { return passedWake{math.MaxInt64, math.MaxInt64} }

func (w *passedWake) add(s *Scheduler, since int64) {
	if since > s.reserveCut {
		w.reserve = min(w.reserve, since)
	}
	if since > s.starveCut {
		w.starve = min(w.starve, since)
	}
}

func (s *Scheduler) wakePassed(t *team, p *tier, w passedWake) {
	s.wakePassedIf(t, p, w, w.reserve < math.MaxInt64 && anyUnreserved(t))
}

// wakePassedIf is wakePassed where free says whether one of t's flavors
// holds no reservation (wakeIf).
func (s *Scheduler) wakePassedIf(t *team, p *tier, w passedWake, free bool) {
	for _, since := range [2]int64{w.reserve, w.starve} {
		if since < math.MaxInt64 {
			s.wakeIf(t, p, since, free)
		}
	}
}

// passTo moves c past the run's workloads before entry end. When that is not
// past the end of the run (as far as the cache knows it: more of the tier
// may follow a workload the walk had to consider), c.tier is cleared so that
// the rest is looked at in its turn.
func (rc *runCache) passTo(c *cursor, end int) {
	tier := c.head.tier
	c.i = end
	c.next()
	if end <= rc.b.last || (end < len(c.list) && c.list[end].tier == tier) {
		c.tier = nil
	}
}

// resayEvery is how often the reason of a workload passed over in run after
// run is worked out again: its status's numbers lag what is available by
// no more, and a walk of a long queue that cannot start stays a pass over
// it (working every reason out again costs about as much as the walk).
const resayEvery = 30 * time.Second

// reexplain gives w, passed over in a run, the reason it waits now (explain)
// when the one it has was worked out resayEvery ago or more, and reports it
// when it changed, as step would: its status says what is available now,
// not what was when it was last considered. It decides nothing (a reason's
// code is read by a decision only with Options.BorrowFirstAfter, when no
// run is passed over).
func (s *Scheduler) reexplain(w *workload, res *Results) {
	if w.said.After(s.resayCut) {
		return
	}
	w.said = s.now
	if r, ok := s.explain(w); ok && r != w.reason {
		s.setReason(w, r)
		res.Pending = append(res.Pending, PendingStatus{Workload: w.spec.ID, Reason: r})
	}
}

// explain is why pending w, not considered in this cycle, would wait if it
// were: what its consideration finds first when nothing starts (tryAdmit:
// its first flavor's quota or nodes; a backoff). ok is false when there is
// nothing new to say: it was never considered (Queued), it holds a
// reservation (its reason is the reservation's), or it fits now.
func (s *Scheduler) explain(w *workload) (PendingReason, bool) {
	switch {
	case w.reason.Code == ReasonQueued || w.reserved != nil:
		return PendingReason{}, false
	case w.notBefore.After(s.now):
		return PendingReason{Code: ReasonBackoff, Requested: w.GPUs()}, true
	}
	return s.firstReason(w)
}

// mustConsider says whether a walk must consider the entry's workload,
// whatever its run: it holds a reservation, or it was never considered (it
// has no reason yet).
func (e *entry) mustConsider() bool { return e.held || !e.seen }

// runCache is what learnRun learnt of a team's run of one tier, from the
// workload it was learnt at (start) to its last, while the team's queue stays as it
// was (queue.ver): which workloads the run holds, where it ends and when
// they joined do not change until one joins or leaves, or takes or gives
// back a reservation. Once some left (queue.layout unchanged), its bound
// still bounds what stays (each asks no less; skipLearnt counts the rest),
// and so once some take or give back a reservation (held; skipLearnt stops
// before one held).
type runCache struct {
	ver, layout uint64
	// left and reserves are the queue's when learnt: while they stay,
	// none of the run left or holds a reservation (arrivals change ver,
	// not the run: unchanged).
	left     int
	reserves uint64
	start    int
	b        runBound
	// checks space out searchRoom's checks of the run, per search kind
	// (kindReclaim, kindStarving).
	checks [kindOwn]roomChecks
	// sorted: b.sinces are sorted.
	sorted bool
	// stuckCycle and stuckGens are the cycle and the generations of the
	// team's flavors (what runStuck reads of each) when it last found the
	// run stuck: a walk that passes over a team's run in parts, between
	// other teams' parts, finds it stuck again until one of them changes.
	stuckCycle uint64
	stuckGens  []uint64
	// relearnt is the cycle skipRun last learnt a part of the run because
	// its bound showed that some of it may start.
	relearnt uint64
	// part is what was learnt of the run from a workload after start (the
	// rest of it, where the walk came to it in parts) or after its last (a
	// run that went on past a workload the walk had to consider): kept
	// beside the run's first cache, which the walk needs again at the start
	// of the next cycle. Nil in a part.
	part *runCache
}

// stillStuck says whether runStuck found the run stuck in this cycle on
// the flavors of team t as they are.
func (rc *runCache) stillStuck(t *team, cycle uint64) bool {
	if rc.stuckCycle != cycle || len(rc.stuckGens) != len(t.flavors) {
		return false
	}
	for i, f := range t.flavors {
		if rc.stuckGens[i] != f.gen {
			return false
		}
	}
	return true
}

// stuckIn notes that runStuck found the run stuck now.
func (rc *runCache) stuckIn(t *team, cycle uint64) {
	rc.stuckCycle, rc.stuckGens = cycle, rc.stuckGens[:0]
	for _, f := range t.flavors {
		rc.stuckGens = append(rc.stuckGens, f.gen)
	}
}

// run is what skipRun learnt of t's run of tier p, or nil.
func (t *team) run(p *tier) *runCache {
	if p.id < len(t.runs) {
		return t.runs[p.id]
	}
	return nil
}

// learnRun returns the cache of the run c stands in (up to a workload the
// walk must consider): its part's when that holds c's place, else the one
// from its start. It learns the run from its entries when neither holds:
// into the part from c's place when the cache from the start ends before
// it, else into that cache, which is then of another run or of the team's
// queue changed since other than by workloads that left or reserve
// (queue.layout) or by a merge (follow). Nil when the run cannot be
// cached: one of it is backed off (a backoff ends with time, not with the
// queue).
func (s *Scheduler) learnRun(c *cursor) *runCache {
	rc, q, at := c.t.run(c.head.tier), &c.t.queue, c.i-1
	if rc == nil {
		rc = s.learn(c, nil)
		if rc != nil {
			if c.t.runs == nil {
				c.t.runs = make([]*runCache, len(s.tiers))
			}
			c.t.runs[c.head.tier.id] = rc
		}
		return rc
	}
	if p := rc.part; p != nil {
		if p.follow(q); p.holds(q, at) {
			return p
		}
	}
	rc.follow(q)
	switch {
	case rc.holds(q, at):
		return rc
	case rc.layout == q.layout && at > rc.start:
		return s.learnPart(c, rc)
	}
	return s.learn(c, rc)
}

// unchanged says whether the run's entries are as rc learnt them: none
// left, took or gave back a reservation since (rc holds q's layout).
func (rc *runCache) unchanged(q *queue) bool {
	return rc.left == q.left && rc.reserves == q.reserves
}

// holds says whether the cache is of q as it is and bounds the run's
// entries from at on.
func (rc *runCache) holds(q *queue, at int) bool {
	return rc.layout == q.layout && rc.start <= at && at <= rc.b.last
}

// learnPart learns c's run from c's head into first's part.
func (s *Scheduler) learnPart(c *cursor, first *runCache) *runCache {
	p := s.learn(c, first.part)
	if p != nil {
		first.part = p
	}
	return p
}

// learn learns c's run from its entries, from c's head, into rc (made
// when nil) and returns it; nil when the run cannot be cached.
func (s *Scheduler) learn(c *cursor, rc *runCache) *runCache {
	b, _ := s.scanRun(c, nil) // to the run's end or one the walk must consider
	if s.test != nil && s.test.learnt != nil {
		s.test.learnt(b.n)
	}
	if !b.wake.IsZero() || b.n == 0 {
		return nil
	}
	if rc == nil {
		rc = &runCache{}
	}
	q := &c.t.queue
	rc.ver, rc.layout, rc.left, rc.reserves, rc.start = q.ver, q.layout, q.left, q.reserves, c.i-1
	pods, levels, sinces := append(rc.b.pods[:0], b.pods...), append(rc.b.levels[:0], b.levels...), append(rc.b.sinces[:0], b.sinces...)
	shapes := append(rc.b.shapes[:0], b.shapes...)
	rc.b = b
	rc.b.pods, rc.b.levels, rc.b.sinces, rc.b.shapes = pods, levels, sinces, shapes
	rc.sorted, rc.stuckCycle = false, 0
	return rc
}

// follow moves the run rc learnt to where q's last merge put its entries,
// when that merge is all that changed the queue's layout since and it put
// none among them (arrivals join the end of their tier; a workload put back
// may land inside a run, which is then learnt again).
func (rc *runCache) follow(q *queue) {
	if rc.layout+1 != q.layout || q.mergedAt != q.layout {
		return
	}
	// before(i) is how many the merge put before item i.
	before := func(i int) int {
		n, _ := slices.BinarySearch(q.merged, i+1)
		return n
	}
	if n := before(rc.start); n == before(rc.b.last) {
		rc.start, rc.b.last, rc.b.latest = rc.start+n, rc.b.last+n, rc.b.latest+n
		rc.layout = q.layout
	}
}

// firstLive says whether c's head is the first workload of the run rc
// caches still in the queue.
func (rc *runCache) firstLive(c *cursor) bool {
	for i := rc.start; i < c.i-1; i++ {
		if !c.list[i].gone {
			return false
		}
	}
	return true
}

// wake is the passedWake of the run's workloads, from their sinces sorted
// once.
func (rc *runCache) wake(s *Scheduler) passedWake {
	if !rc.sorted {
		slices.Sort(rc.b.sinces)
		rc.sorted = true
	}
	return s.sortedWake(rc.b.sinces)
}

// sortedWake is the passedWake of a run's workloads from their sinces,
// ascending: for each cut, the first since after it.
func (s *Scheduler) sortedWake(sinces []int64) passedWake {
	after := func(cut int64) int64 {
		if cut != math.MaxInt64 {
			if i, _ := slices.BinarySearch(sinces, cut+1); i < len(sinces) {
				return sinces[i]
			}
		}
		return math.MaxInt64 // no since is after it
	}
	return passedWake{after(s.reserveCut), after(s.starveCut)}
}

// scanRun sums up c's run from its entries, stopping before the first the
// walk must consider (one that holds a reservation, or one never considered:
// it has no reason yet) and before the first that another team's work (h's
// top) comes before. whole says it went to the run's end. It reads the
// queue's entries alone, not the workloads (entry).
func (s *Scheduler) scanRun(c *cursor, h teamHeap) (runBound, bool) {
	b := runBound{pods: s.runPods[:0], levels: s.runLevels[:0], sinces: s.runSinces[:0], shapes: s.runShapes[:0]}
	defer func() { s.runPods, s.runLevels, s.runSinces, s.runShapes = b.pods, b.levels, b.sinces, b.shapes }()
	s.scans++
	tier := c.head.tier
	// Whether h's top comes before a workload of the run (comesBefore): by tier
	// and share alike for all of them, else (shares equal) one by one.
	var top *cursor
	ahead, bySubmission := false, false
	if len(h) > 0 {
		top = h[0]
		switch {
		case top.head.tier.spec.Priority != tier.spec.Priority:
			ahead = top.head.tier.spec.Priority > tier.spec.Priority
		case top.t.share != c.t.share:
			ahead = top.t.share < c.t.share
		default:
			bySubmission = true
		}
	}
	for i := c.i - 1; i < len(c.list); i++ {
		e := &c.list[i]
		if e.gone {
			continue
		}
		if e.tier != tier {
			break
		}
		if ahead || e.mustConsider() || (bySubmission && comesBefore(top.t, top.head, c.t, e)) {
			return b, false
		}
		b.add(c.list, i, s.scans)
		b.last = i
		if e.notBefore > s.nowN && (b.wake.IsZero() || e.notBefore < unixNanos(b.wake)) {
			b.wake = s.at(e.notBefore)
		}
	}
	return b, true
}

// add bounds list[i] with the run's workloads (of the run scan reads).
func (b *runBound) add(list []entry, i int, scan uint64) {
	e := &list[i]
	need := e.pods * e.gpp
	if b.n == 0 || need < b.need {
		b.need = need
	}
	if b.n == 0 || e.since < b.since {
		b.since = e.since
	}
	if b.n == 0 || cmpSub(e, &list[b.latest]) > 0 {
		b.latest = i
	}
	if b.n == 0 || subBefore(e.sub, e.submitted, b.sub, b.submitted) {
		b.submitted, b.sub = e.submitted, e.sub
	}
	b.rules = b.rules || e.rules
	b.sinces = append(b.sinces, e.since)
	b.shapes, b.manyShapes = addShape(b.shapes, b.manyShapes, e, scan)
	b.anyAhead = b.anyAhead || e.ahead
	b.n++
	if e.require != "" {
		b.levels = lowerLevel(b.levels, e.require, e.gpp, e.pods)
	} else {
		b.pods = lowerPods(b.pods, e.gpp, e.pods)
	}
}

func lowerPods(bs []podBound, gpp GPUs, pods int64) []podBound {
	for i := range bs {
		if bs[i].gpp == gpp {
			bs[i].pods = min(bs[i].pods, pods)
			return bs
		}
	}
	return append(bs, podBound{gpp, pods})
}

func lowerLevel(bs []levelBound, level string, gpp GPUs, pods int64) []levelBound {
	for i := range bs {
		if bs[i].level == level && bs[i].gpp == gpp {
			bs[i].pods = min(bs[i].pods, pods)
			return bs
		}
	}
	return append(bs, levelBound{level, gpp, pods})
}

// runStuck says whether no workload of team t and tier p asking at least b
// can be admitted, preempt or reserve on any of t's flavors now. Each test
// is one the path itself makes first, on a view that holds at least the
// nodes any workload's own view does: a workload of placement rules, a
// cluster or a required level is placed on a part of the flavor's nodes.
func (s *Scheduler) runStuck(t *team, p *tier, b runBound) bool {
	eligible := s.mayReserve(b.since)
	for _, f := range t.flavors {
		v, avail := f.view, t.q.Available(f.id)
		if eligible && f.res == nil && avail >= b.need {
			// One of them may reserve (reserve: where its quotaCheck
			// passes, which needs the team's available GPUs).
			return false
		}
		// quotaCheck, then placeOn, for the least of each pod size.
		for _, pb := range b.pods {
			if avail >= pb.gpp*pb.pods && v.All.Fits(pb.gpp, pb.pods) {
				return false
			}
		}
		for _, lb := range b.levels {
			if li := v.Levels[lb.level]; avail >= lb.gpp*lb.pods && li != nil && li.BestFit(lb.gpp, lb.pods, nil) != nil {
				return false
			}
		}
		if s.opts.NoPreemption {
			continue
		}
		// worthSearching, for the least of the run, then the room its own
		// lower tiers could make.
		if (reclaimsFor(t, p, f, b.need) && s.searchRoom(t, p, f, b, kindReclaim)) || (s.takesBack(t, p, f, b.since) && s.searchRoom(t, p, f, b, kindStarving)) ||
			(ownMayMakeRoom(t, p, f, v, b.need) && s.ownRoom(t, p, f, b)) {
			return false
		}
	}
	return true
}

// searchRunMin is the fewest workloads of a run whose preemption searches
// are bounded as one (searchRoom): a single workload's search is bounded by
// the search itself (its failure remembered, memo.go).
const searchRunMin = 2

// roomChecks spaces out a run's checks of one kind of search's room
// (searchRoom) while they find room: a fleet whose waiting work may take
// back plenty finds room check after check, and each costs a search's
// streams. After a check that found room, the next skip checks are passed
// over (room assumed), backoff doubling to maxRoomBackoff.
type roomChecks struct{ skip, backoff int }

// maxRoomBackoff is the most checks of a run a roomChecks passes over after
// one found room.
const maxRoomBackoff = 32

// searchRoom says whether a workload of the run b bounds whose search is of
// kind (kindReclaim or kindStarving) could fit on f were every candidate of
// that search evicted: the search of the run's tier on the flavor's own
// view, from the run's first submission (a starving one submitted later
// takes back no more: only what was submitted after it), has the GPUs of
// the least of the run, the pods of the least of each pod size (podRoom) and
// the GPUs in one domain of each required level (domainRoom). Each is a
// bound a search checks, or one its fit test needs (a single pod's search
// evicts its candidates one by one before it gives up; passing over it
// changes nothing: a failed search leaves the index as it was). Every
// workload of the run that searches of this kind reads the same candidates
// (one team, one tier) or fewer; one that searches of another kind is
// bounded by that kind's test in runStuck. Not for a run with placement
// rules: a borrowing team's work is taken back only up to what it borrows,
// counted down its victims on the view searched, so a narrower view may
// reach a victim the flavor's own never counts
// (TestStarvingRunWithRulesIsNotBoundByTheFlavorsView).
func (s *Scheduler) searchRoom(t *team, p *tier, f *flavorState, b runBound, kind searchKind) bool {
	rc := t.run(p)
	if b.n < searchRunMin || b.rules || rc == nil {
		return true
	}
	c := &rc.checks[kind]
	if c.skip > 0 {
		c.skip--
		return true
	}
	search, room := s.candidatesFor(t, p.spec.Priority, b.submitted, f, f.view, kind, b.need)
	if room >= b.need && s.runRoom(f, b, search) {
		c.backoff = min(max(1, 2*c.backoff), maxRoomBackoff)
		c.skip = c.backoff
		return true
	}
	c.backoff = 0
	return false
}

// ownRoom says whether evicting all of team t's preemptible work below tier
// p on f could make room for some workload of the run b bounds: the pods of
// a pod size on the flavor's nodes (podRoom), the GPUs in one domain of a
// required level (domainRoom). A search for one of them yields no more
// candidates, on no more nodes. (A single pod's search has no such bound
// first: it evicts its candidates one by one before it gives up; passing
// over it changes nothing because a failed search leaves the index and the
// nodes exactly as they were: journal.go.)
func (s *Scheduler) ownRoom(t *team, p *tier, f *flavorState, b runBound) bool {
	search, _ := s.candidatesFor(t, p.spec.Priority, time.Time{}, f, f.view, kindOwn, 0)
	return s.runRoom(f, b, search)
}

// runRoom says whether, were every candidate of the search evicted, the
// flavor's nodes could take the pods of the least of some pod size of the
// run b bounds (podRoom), or one domain of some required level its GPUs
// (domainRoom).
func (s *Scheduler) runRoom(f *flavorState, b runBound, search *victimSearch) bool {
	for _, pb := range b.pods {
		if s.podRoom(f, f.view, pb.gpp, pb.pods, search) {
			return true
		}
	}
	for _, lb := range b.levels {
		if s.domainRoom(f, f.view, lb.level, lb.gpp*lb.pods, search) {
			return true
		}
	}
	return false
}

// A run that may start is walked workload by workload, but in a long one
// most fail as a workload of their shape did earlier in the walk
// (failsAsShape), with nothing changed in between. passRun passes over them
// in one go: while the walk is in a run (to where another team's work comes
// first: runBound.last), each shape of the run whose workloads there all
// fail as it did is marked (shapeInfo.pass), and the workloads of marked
// shapes up to the next one of a shape not marked are passed over reading
// only their entries. A shape is marked as the walk enters the run and
// again each time one of its workloads was considered (markShape). Only in
// a whole walk without statuses (every workload passed over is a miss, and
// its reason is not said again), and while nothing of the team's queue
// joined or left.

// runPass is the run passRun walks: cursor c's, to its entry last, with the
// run's shapes, while the team's queue is at version ver.
type runPass struct {
	c      *cursor
	ver    uint64
	last   int
	shapes []shapeBound
}

// enterRun starts passRun's walk of c's run, which b bounds, if it may.
func (s *Scheduler) enterRun(c *cursor, b *runBound) {
	s.pass.c = nil
	if !s.opts.NoStatuses || b.manyShapes || b.anyAhead || s.opts.BorrowFirstAfter > 0 || (s.test != nil && s.test.noSkip) {
		return
	}
	s.pass = runPass{c: c, ver: c.t.queue.ver, last: b.last, shapes: append(s.pass.shapes[:0], b.shapes...)}
	s.passGen++
	for i := range s.pass.shapes {
		s.markShape(&s.pass.shapes[i], c.head)
	}
}

// leaveRun ends passRun's walk of c's run, if it is in one.
func (s *Scheduler) leaveRun(c *cursor) {
	if s.pass.c == c {
		s.pass.c = nil
	}
}

// markShape marks shape sb of the run when its workloads from entry e on
// (in submission order: no workload of the run was put ahead) all fail as
// the shape's failure did, as failsAsShape would say of each: the failure
// is of this cycle and epoch; it sought a reservation, or none of them may
// seek one; none of them starves, or the failure starved and was submitted
// no later than e.
func (s *Scheduler) markShape(sb *shapeBound, e *entry) {
	// The shape's earliest wait there is the one most likely to reserve
	// or starve; e's submission is the earliest from e on.
	if s.failsAs(&sb.shape.fail, sb.since, e) {
		sb.shape.pass = s.passGen
	} else {
		sb.shape.pass = 0
	}
}

// considered marks again the shape of entry e of c's run after the walk
// considered e and it did not start.
func (s *Scheduler) considered(c *cursor, e *entry) {
	if s.pass.ver != c.t.queue.ver {
		s.pass.c = nil
		return
	}
	for i := range s.pass.shapes {
		if sb := &s.pass.shapes[i]; sb.shape == e.shape {
			s.markShape(sb, e)
			return
		}
	}
}

// passRun passes over the workloads of c's run from its head up to the
// next one whose shape is not marked and that failsLike would not find
// failing as one of its shape or class did (failsKnown: a run of many
// sizes has its sizes marked one by one, each once considered), and
// reports how many.
func (s *Scheduler) passRun(c *cursor, res *Results) int {
	p := &s.pass
	if p.ver != c.t.queue.ver || c.head.tier != c.tier || c.i-1 > p.last {
		p.c = nil
		return 0
	}
	n, i := 0, c.i-1
	wake := noPassedWake()
	for ; i <= p.last; i++ {
		e := &c.list[i]
		if e.gone {
			continue
		}
		if e.shape.pass != s.passGen && !s.failsKnown(e) {
			if i == c.i-1 {
				s.failsNot = e.w
			}
			break
		}
		wake.add(s, e.since)
		n++
	}
	if n == 0 {
		return 0
	}
	s.wakePassed(c.t, c.tier, wake)
	c.i = i
	c.next()
	if c.cur == nil || c.i-1 > p.last {
		p.c = nil
	}
	res.Skipped += n
	if s.test != nil && s.test.runPassed != nil {
		s.test.runPassed(n)
	}
	return n
}
