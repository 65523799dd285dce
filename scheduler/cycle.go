package scheduler

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/allot-dev/allot/scheduler/internal/quota"
)

// clock is the time of the cycle running (or of the last), and the cuts a
// walk compares each workload's wait with.
type clock struct {
	now time.Time
	// nowN is now in unixNanos, for the walk's comparisons with its
	// queue entries' times.
	nowN int64
	// reserveCut and starveCut are now less Options.ReserveAfter and
	// Options.StarvationAfter (setNow): a workload waiting since no later
	// than one may reserve, or starves. A walk asks it of every workload it
	// considers, so they are unixNanos, as a workload's since is: comparing
	// two integers costs a fraction of comparing two times.
	// resayCut is now less resayEvery: a reason said no later than it is
	// said again when its workload is passed over (reexplain).
	reserveCut, starveCut int64
	resayCut              time.Time
	// wakeN is the earliest wake the walk's waiting workloads asked for
	// (wakeAt), in unixNanos (math.MaxInt64: none): a walk asks it of
	// every workload it passes over, and Cycle makes it a time once.
	wakeN int64
}

// walk is what the cycles keep of their walks.
type walk struct {
	// dirty is set when capacity or quota was released since the last cycle:
	// only then may a waiting workload have become admissible.
	dirty bool
	// wake is the earliest end of a backoff seen by the last full cycle.
	wake time.Time
	// wholeDue is when a walk after a release goes the whole queue again
	// (Options.WalkDepth).
	wholeDue time.Time
	// cycles counts the cycles; epoch changes when something in the middle
	// of one may let in what did not fit before it: a preemption, or a
	// gang's reserved nodes back in the index.
	cycles uint64
	epoch  int
	// admittedNow indexes the admissions of the running cycle in its Results.
	admittedNow map[*workload]int
	// borrowFirst is, per cohort tree (by its root), the gang the tree's
	// borrowable quota goes to first (Options.BorrowFirstAfter).
	borrowFirst map[*quota.Node]*workload
	// head is the entry of the workload a whole walk considers, in its
	// team's queue: admitted, it leaves the queue there without a search.
	head *entry
	// cursors (by team, in team order) and heap are the cycle's walk of
	// the teams' queues, kept for the next.
	cursors []cursor
	heap    teamHeap
	// lastPending is how many pending statuses the last walk of the
	// arrivals [0] and the last whole walk [1] reported (a buffer a busy
	// cycle would otherwise grow anew: garbage to collect).
	lastPending [2]int
}

// Cycle decides at time now: it takes back gangs that did not start in time, then
// walks the pending workloads in order (tier, then the teams' weighted fair share,
// then submission), admitting each that fits, preempting by the rules where that
// makes one fit, and reserving nodes for a gang that waited long enough. The
// decisions are applied to the scheduler's state and returned for the runner.
// Only what changed is walked: the workloads submitted since the last cycle,
// or, when something could now go otherwise for the waiting work (GPUs or
// quota released, work admitted by the last cycle's walk of its arrivals, a
// wake: see wakeBy), the queue in that order until Options.WalkDepth
// workloads in a row did not fit (all of it when a whole walk is due).
func (s *Scheduler) Cycle(now time.Time) Results {
	s.setNow(now)
	s.wakeN = math.MaxInt64
	var res Results
	s.expire(&res)
	full := s.dirty || (!s.wake.IsZero() && !now.Before(s.wake))
	kind := 0 // the walk's: of the arrivals, or whole
	if full {
		kind = 1
	}
	if n := s.lastPending[kind]; n > 0 && !s.opts.NoStatuses {
		// The statuses of about as many workloads as the last walk of
		// its kind reported.
		res.Pending = make([]PendingStatus, 0, n)
	}
	defer func() { s.lastPending[kind] = len(res.Pending) }()
	whole := full && (s.opts.WalkDepth <= 0 || !now.Before(s.wholeDue))
	if whole {
		s.wholeDue = now.Add(s.opts.FullWalkEvery)
	}
	s.dirty = false
	s.cycles++
	clear(s.admittedNow)
	s.epoch = 0
	for _, f := range s.flavorList {
		f.eachView(func(v *view) {
			v.start = v.start[:0]
			for k := range v.All.Buckets() {
				v.start = append(v.start, int32(len(v.All.Bucket(k))))
			}
		})
	}
	// A cycle's cursors and heap are the walk's, reused: a replay runs a
	// cycle per event, and a cursor per team per cycle was a fifth of what
	// it allocated. No pass (skip.go) outlives the cycle it was entered in.
	s.pass.c = nil
	if len(s.cursors) < len(s.teamList) {
		s.cursors = make([]cursor, len(s.teamList))
	}
	h := s.heap[:0]
	defer func() {
		clear(s.cursors)
		clear(h[:cap(h)])
		s.heap = h[:0]
	}()
	var walked []*team
	for i, t := range s.teamList {
		q := &t.queue
		var list []entry
		if full {
			q.merge()
			q.tidy()
			list = q.items
		} else {
			if len(q.incoming) == 0 {
				continue
			}
			slices.SortFunc(q.incoming, byEntry)
			list = slices.Clone(q.incoming)
			walked = append(walked, t)
		}
		c := &s.cursors[i]
		*c = cursor{t: t, list: list}
		if c.next(); c.cur != nil {
			h.push(c)
		}
	}
	// misses counts the workloads in a row that did not fit; a walk that is
	// not whole stops at WalkDepth of them.
	misses, cut := 0, false
walk:
	for len(h) > 0 {
		// A team keeps the walk while its next workload still comes first:
		// within a tier that is the team of the smallest share's whole run.
		for c, popped := h.pop(), true; c.cur != nil; popped = false {
			s.doneEarly(c, &res) // the walk came to its work after that run
			if s.walkTo(c, popped, &h, &res) {
				h.init()
			}
			if full && !whole && misses >= s.opts.WalkDepth {
				cut = true
				break walk
			}
			skipped := 0
			if full && c.head.tier != c.tier {
				// A run of the team's work of a new tier (or the rest
				// of one): pass over it if none of it can start
				// (skip.go). What it passes over did not fit, as far as
				// WalkDepth is concerned.
				c.tier = c.head.tier
				s.leaveRun(c)
				if c.head.mustConsider() {
					c.recheck = true // what follows is looked at after it
				} else {
					// A walk that stops after WalkDepth misses
					// would have looked at only so many of them.
					looked := -1
					if !whole {
						looked = max(0, s.opts.WalkDepth-misses)
					}
					skipped = s.skipRun(c, h, looked, &res)
				}
			}
			if skipped == 0 && s.pass.c == c {
				skipped = s.passRun(c, &res)
			}
			switch {
			case skipped > 0:
				misses += skipped
				if full && !whole && misses > s.opts.WalkDepth {
					// The walk that considers each would have stopped
					// inside the run, at WalkDepth misses.
					cut = true
					break walk
				}
			case full && s.failsAsShape(c.head):
				// It fails as its shape did in this cycle and epoch:
				// passed over as in a run (skipRun), its workload
				// unread.
				s.wakeFor(c.t, c.head.tier, c.head.since, c.head.notBefore)
				if !s.opts.NoStatuses {
					s.reexplain(c.head.w, &res)
				}
				res.Skipped++
				misses++
				if c.recheck {
					c.tier, c.recheck = nil, false
				}
				c.next()
			case !c.head.live():
				// Cannot be (every entry that is not live is marked gone:
				// checkQueues); were it, its workload is not considered.
				c.next()
			default:
				if full {
					s.head = c.head // in the queue itself (not a copy)
				}
				e, epoch := c.head, s.epoch
				admitted := s.step(c.cur, &res)
				s.head = nil
				if !admitted && s.pass.c == c {
					s.considered(c, e)
				}
				if admitted {
					misses = 0
				} else {
					misses++
				}
				back := len(s.early) > 0 && s.cutEarly(s.epoch != epoch, &h, &res)
				if s.epoch != epoch || back {
					// A preemption lowered its victims' teams' shares
					// (or held nodes went back), or a run passed early
					// went back to the walk: the cursors waiting in
					// the heap take their places as they are now.
					h.init()
				}
				if c.recheck {
					c.tier, c.recheck = nil, false
				}
				c.next()
			}
			if c.cur != nil && len(h) > 0 && first(h[0], c) {
				h.push(c)
				break
			}
		}
	}
	s.endEarly(&res)
	res.Walk = WalkArrivals
	if full {
		res.Walk = WalkWhole
	} else if len(res.Admitted) > 0 && s.olderWaiting() {
		// What it admitted may be taken back: by a workload that reclaims,
		// starves or holds a reservation. The next cycle walks them.
		s.dirty = true
	}
	if cut {
		res.Walk = WalkStopped
		// A gang holding a reservation starts as soon as its nodes have
		// drained (docs/scheduling.md's guarantee), wherever it is in the walk.
		for _, f := range s.flavorList {
			if w := f.res; w != nil && w.seen != s.cycles && w.state == statePending {
				s.step(w, &res)
			}
		}
		wakeNoLater(&res, s.wholeDue)
	}
	for _, t := range walked {
		t.queue.merge()
	}
	for _, f := range s.flavorList {
		f.eachView(func(v *view) { v.start = v.start[:0] })
	}
	if len(s.admittedNow) > 0 || len(res.Admitted) > 0 {
		res.Admitted = slices.DeleteFunc(res.Admitted, func(a Admission) bool { return a.Workload == "" })
	}
	if s.wakeN < math.MaxInt64 {
		wakeNoLater(&res, s.at(s.wakeN))
	}
	if full || s.wake.IsZero() || (!res.Wake.IsZero() && res.Wake.Before(s.wake)) {
		s.wake = res.Wake
	}
	// A cycle that walked only the arrivals still reports what an earlier one
	// left due: the caller keeps one timer, the last cycle's.
	res.Wake = s.wake
	return res
}

// Due says whether the next Cycle walks the waiting work whatever happens
// before it: the last cycle released GPUs or quota (an eviction, a
// preemption's victims requeued), admitted work an older workload may take
// back, or left a wake due. A runner that cycles every second decides
// something at its next tick only when Due (or an event or Results.Wake came
// first); the simulator runs a cycle there for it.
func (s *Scheduler) Due() bool {
	return s.dirty || (!s.wake.IsZero() && !s.now.Before(s.wake))
}

// step considers w in the walk and reports what changed: a new reason, the
// end of its backoff. It says whether w is no longer pending.
func (s *Scheduler) step(w *workload, res *Results) bool {
	var old PendingReason
	if !s.opts.NoStatuses {
		old = w.reason
	}
	w.seen, w.said = s.cycles, s.now
	res.Considered++
	s.consider(w, res)
	s.failsNot = nil
	if w.state != statePending {
		return true
	}
	if !s.opts.NoStatuses && w.reason != old {
		res.Pending = append(res.Pending, PendingStatus{Workload: w.spec.ID, Reason: w.reason})
	}
	if w.notBefore.After(s.now) {
		wakeNoLater(res, w.notBefore)
	}
	s.wakeBy(w.team, w.tier, w.since)
	return false
}

// wakeFor brings the cycle's wake (wakeAt) forward to the next time a
// waiting workload of team t and tier p, waiting since then and backed off
// until notBefore, may do more than it could now: its backoff ends, or
// wakeBy's times.
func (s *Scheduler) wakeFor(t *team, p *tier, since, notBefore int64) {
	if notBefore > s.nowN {
		s.wakeAt(notBefore, 0)
	}
	s.wakeBy(t, p, since)
}

// consider tries to admit one pending workload.
func (s *Scheduler) consider(w *workload, res *Results) {
	if w.notBefore.After(s.now) {
		s.setReason(w, PendingReason{Code: ReasonBackoff, Requested: w.GPUs()})
		return
	}
	eligible := s.mayReserve(w.since)
	holder := w.reserved != nil
	if !holder && s.failsNot != w && s.failsLike(w, eligible) {
		return
	}
	prev, dirty := w.reserved, s.dirty
	var gen, grown uint64
	if prev != nil {
		gen, grown = prev[0].flavor.gen, prev[0].flavor.grown
	}
	s.unreserve(w)
	s.dirty = dirty // released says whether w let go of nodes
	// Set before it is admitted: the victim order reads it from then on.
	w.drained = prev != nil
	if s.tryAdmit(w, res) {
		s.released(prev, nil)
		return
	}
	s.noteBorrowFirst(w)
	if eligible && s.reserve(w, prev) {
		if prev != nil && slices.Equal(prev, w.reserved) {
			// It holds what it held: nothing changed (memo.go).
			prev[0].flavor.gen, prev[0].flavor.grown = gen, grown
		}
		s.released(prev, w.reserved)
		return
	}
	s.released(prev, nil)
	s.failed(w, eligible)
}

// released starts a new epoch when nodes a gang held (prev) went back to the
// index in the middle of the cycle (it holds now instead): what did not fit
// before may fit on them.
func (s *Scheduler) released(prev, now []*node) {
	if len(prev) > 0 && !slices.Equal(prev, now) {
		s.epoch++
		s.dirty = true
	}
}

// failsAsShape says, from w's queue entry e alone, whether failsLike would
// find that w fails as a workload of its own shape did: the first of its
// tests, where a reservation was sought for the shape or w may seek none
// (failsLike also asks whether w could hold one, which needs the workload).
// Not for a workload that holds a reservation or was never considered, nor
// one backing off (consider says so first), nor with
// Options.BorrowFirstAfter (its gang is chosen from the reasons the walk
// gives).
func (s *Scheduler) failsAsShape(e *entry) bool {
	f := &e.shape.fail
	if e.mustConsider() || s.opts.BorrowFirstAfter > 0 || (s.test != nil && s.test.noSkip) || e.notBefore > s.nowN {
		return false
	}
	return s.failsAs(f, e.since, e)
}

// failsAs says whether a workload of entry e's tier and submission, waiting
// since then, fails as f did: f is of this cycle and epoch; it sought a
// reservation, or the workload may seek none; the workload does not starve,
// or f starved and was submitted no later.
func (s *Scheduler) failsAs(f *failure, since int64, e *entry) bool {
	return f.cycle == s.cycles && f.epoch == s.epoch && (f.reserveTried || !s.mayReserve(since)) &&
		(!s.starving(e.tier, since) || (f.starving && !subBefore(e.sub, e.submitted, f.sub, f.submitted)))
}

// failsLike says whether w fails as a workload of its shape did in this cycle
// and epoch, or one of its class that it can do no better than, and then sets
// its reason. A workload of the same team, flavors, pod size, topology and
// rules with at least as many pods, of a tier no higher (and borrowOnly if
// that one was) fits no better: not within quota (the reclaim rule only
// narrows), not on nodes, not by preemption (it may take the same victims or
// fewer, tried in the same order), not in a reservation. Only when a
// reservation was sought too, or none could be for w, and only when w cannot
// reclaim: what other teams borrow grows as the cycle admits their work, and
// w might take back what was admitted after the one that failed (its own
// victims, of lower tiers, come later in the cycle). A class's failure is not
// used when a borrow-first gang is chosen: that rule holds back smaller
// workloads, not larger ones.
func (s *Scheduler) failsLike(w *workload, eligible bool) bool {
	f, shape := s.standing(w, eligible)
	switch {
	case f == nil:
		return false
	case shape:
		s.setReason(w, f.reason)
		return true
	}
	r, ok := s.firstReason(w)
	if !ok {
		return false // cannot be; then w is tried
	}
	s.setReason(w, r)
	w.shape.fail = failure{cycle: s.cycles, epoch: s.epoch, reason: r, pods: w.spec.Pods, reserveTried: f.reserveTried}
	if s.test != nil && s.test.classHit != nil {
		s.test.classHit(w, r)
	}
	return true
}

// standing returns the failure that stands for w in this cycle and epoch,
// eligible being whether w may seek a reservation: its shape's (shape is
// then true), else a weaker one of its class (weaker), else nil.
func (s *Scheduler) standing(w *workload, eligible bool) (f *failure, shape bool) {
	now := s.failNow(w, eligible)
	if f := &w.shape.fail; now(f) {
		return f, true
	}
	return s.weaker(w, now), false
}

// failNow says of a failure whether it stands for w in this cycle and
// epoch (failsLike), eligible being whether w may seek a reservation.
func (s *Scheduler) failNow(w *workload, eligible bool) func(*failure) bool {
	starving := s.starving(w.tier, w.since)
	return func(f *failure) bool {
		return f.cycle == s.cycles && f.epoch == s.epoch && (f.reserveTried || !eligible || !s.reservable(w)) &&
			(!starving || (f.starving && !w.spec.Submitted.Before(f.submitted)))
	}
}

// failsKnown says, without failsLike's side effects, whether failsLike
// would find e's workload failing (standing), where consider would ask it:
// its backoff is over, it holds no reservation, and no borrow-first gang is
// chosen (that rule reads the reasons failsLike sets).
func (s *Scheduler) failsKnown(e *entry) bool {
	w := e.w
	if e.notBefore > s.nowN || w.reserved != nil || s.opts.BorrowFirstAfter > 0 {
		return false
	}
	f, _ := s.standing(w, s.mayReserve(w.since))
	return f != nil
}

// weaker returns a failure of w's class in this cycle and epoch (now says
// which count) of a workload w can do no better than, if there is one.
func (s *Scheduler) weaker(w *workload, now func(*failure) bool) *failure {
	if s.opts.BorrowFirstAfter > 0 || s.mayReclaim(w) {
		return nil
	}
	for i := range w.class.fails {
		f := &w.class.fails[i]
		if !now(f) || f.tier.spec.Priority < w.tier.spec.Priority || (f.tier.spec.BorrowOnly && !w.tier.spec.BorrowOnly) {
			continue
		}
		if f.pods < w.spec.Pods || (f.pods == w.spec.Pods && f.tier != w.tier) {
			return f
		}
	}
	// A workload of its team with no placement constraint (no topology,
	// rules, cluster or flavor named) that did not fit stands for every one
	// asking at least as many pods of at least as many GPUs: those fit on
	// fewer nodes, flavors and victims, not more.
	for i := range w.team.floor {
		f := &w.team.floor[i]
		if now(f) && f.tier.spec.Priority >= w.tier.spec.Priority && (!f.tier.spec.BorrowOnly || w.tier.spec.BorrowOnly) && f.gpp <= w.spec.GPUsPerPod && f.pods <= w.spec.Pods {
			return f
		}
	}
	return nil
}

// unconstrained says whether w may run on any node of any flavor of its team.
func unconstrained(w *workload) bool {
	s := &w.spec
	return s.Require == "" && s.Prefer == "" && s.Cluster == "" && s.Rules == nil && len(s.Flavors) == 0
}

// failed records that w did not fit: for its shape, and for its class the
// fewest pods of its tier that did not fit.
func (s *Scheduler) failed(w *workload, eligible bool) {
	f := failure{cycle: s.cycles, epoch: s.epoch, tier: w.tier, reason: w.reason, gpp: w.spec.GPUsPerPod, pods: w.spec.Pods, reserveTried: eligible,
		starving: s.starving(w.tier, w.since), submitted: w.spec.Submitted, sub: unixNanos(w.spec.Submitted)}
	w.shape.fail = f
	w.class.fails = s.keepFewest(w.class.fails, f)
	if unconstrained(w) {
		w.team.floor = s.keepFewest(w.team.floor, f)
	}
}

// keepFewest records f among fails: per tier and pod size, the fewest pods
// that did not fit in this cycle and epoch.
func (s *Scheduler) keepFewest(fails []failure, f failure) []failure {
	for i := range fails {
		c := &fails[i]
		if c.tier != f.tier || c.gpp != f.gpp {
			continue
		}
		if c.cycle != s.cycles || c.epoch != s.epoch || f.pods < c.pods || (f.pods == c.pods && f.reserveTried) {
			*c = f
		}
		return fails
	}
	return append(fails, f)
}

// firstReason is why w waits when it does not fit: the reason of its first
// flavor, as tryAdmit finds it. ok is false if it fits there after all.
func (s *Scheduler) firstReason(w *workload) (PendingReason, bool) {
	if len(w.cands) == 0 {
		return PendingReason{Code: ReasonNoFlavor, Requested: w.GPUs()}, true
	}
	f := w.cands[0]
	if r, ok := s.quotaCheck(w, f); !ok {
		return r, true
	}
	_, _, r, fits := s.placeOn(w, f)
	return r, !fits
}

// setShape files w under its shape and class.
func (s *Scheduler) setShape(w *workload) {
	if w.shape != nil {
		s.unref(w.shape)
		s.unref(w.class)
	}
	spec := &w.spec
	k := shapeKey{team: w.team, gpp: spec.GPUsPerPod, require: spec.Require, prefer: spec.Prefer, cluster: spec.Cluster}
	for _, f := range spec.Flavors {
		k.flavors += string(f) + "|"
	}
	if spec.Rules != nil {
		k.rules = "\x00" + spec.Rules.Key()
	}
	w.class = s.ref(k)
	k.pods, k.tier = spec.Pods, w.tier
	w.shape = s.ref(k)
}

func (s *Scheduler) ref(k shapeKey) *shapeInfo {
	i := s.shapes[k]
	if i == nil {
		i = &shapeInfo{key: k}
		s.shapes[k] = i
	}
	i.refs++
	return i
}

func (s *Scheduler) unref(i *shapeInfo) {
	if i.refs--; i.refs == 0 {
		delete(s.shapes, i.key)
	}
}

func (s *Scheduler) reservable(w *workload) bool {
	for _, f := range w.cands {
		if f.res == nil {
			return true
		}
	}
	return false
}

// tryAdmit admits w on the first flavor where it fits, without preemption if it
// can, else with it; otherwise it records why w waits.
func (s *Scheduler) tryAdmit(w *workload, res *Results) bool {
	if len(w.cands) == 0 {
		s.setReason(w, PendingReason{Code: ReasonNoFlavor, Requested: w.GPUs()})
		return false
	}
	var first PendingReason
	for _, f := range w.cands {
		r, ok := s.quotaCheck(w, f)
		if ok {
			var pl []placement
			var dom *Domain
			if pl, dom, r, ok = s.placeOn(w, f); ok {
				s.admit(w, f, pl, dom, nil, res)
				return true
			}
		}
		if first.Code == "" {
			first = r
		}
	}
	for _, f := range w.cands {
		if !s.opts.NoPreemption && s.preempt(w, f, res) {
			return true
		}
	}
	s.setReason(w, first)
	return false
}

func (s *Scheduler) admit(w *workload, f *flavorState, pl []placement, dom *Domain, victims []WorkloadID, res *Results) {
	w.team.queue.leave(w, s.head) // it finds w's entry by w's order, ahead included
	w.domain, w.admittedAt, w.ahead, w.restored = dom, s.now, false, false
	s.bind(w, f, pl)
	w.reason = PendingReason{}
	if s.opts.GangTimeout > 0 {
		s.unstarted[w] = struct{}{}
	} else {
		w.started = true
	}
	a := Admission{Workload: w.spec.ID, Flavor: f.name, Domain: dom, Cluster: pl[0].node.spec.Cluster, Preempted: victims}
	a.Pods = make([]PodPlacement, 0, len(pl))
	for _, p := range pl {
		a.Pods = append(a.Pods, PodPlacement{Node: p.node.spec.Name, Pods: p.pods, GPUs: p.pods * w.spec.GPUsPerPod})
	}
	s.admittedNow[w] = len(res.Admitted)
	res.Admitted = append(res.Admitted, a)
}

// expire takes back admitted gangs not all running within the gang timeout.
func (s *Scheduler) expire(res *Results) {
	if s.opts.GangTimeout <= 0 || len(s.unstarted) == 0 {
		return
	}
	var late []*workload
	for w := range s.unstarted {
		if s.now.Sub(w.admittedAt) >= s.opts.GangTimeout {
			late = append(late, w)
		}
	}
	slices.SortFunc(late, func(a, b *workload) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range late {
		s.release(w)
		w.timeouts++
		w.notBefore = s.now.Add(s.opts.Backoff << (w.timeouts - 1))
		s.requeue(w)
		res.Evicted = append(res.Evicted, Eviction{Workload: w.spec.ID, Reason: "GangTimeout"})
	}
}

// wakeBy brings the cycle's wake (wakeAt) forward to the next time a
// workload of team t and tier p waiting since then may do more than it
// could: reserve nodes (Options.ReserveAfter) on a flavor none holds, or
// take back borrowed capacity as a starving one (Options.StarvationAfter).
// Nothing is released then, so only a wake makes the walk look again.
func (s *Scheduler) wakeBy(t *team, p *tier, since int64) {
	s.wakeIf(t, p, since, since > s.reserveCut && anyUnreserved(t))
}

// anyUnreserved says whether one of t's flavors holds no reservation.
func anyUnreserved(t *team) bool {
	return slices.ContainsFunc(t.flavors, func(f *flavorState) bool { return f.res == nil })
}

// wakeIf is wakeBy where free says whether one of t's flavors holds no
// reservation.
func (s *Scheduler) wakeIf(t *team, p *tier, since int64, free bool) {
	// since.Add(d).After(now), compared against the cut: a long queue's
	// workloads mostly passed both times long ago.
	if s.opts.ReserveAfter >= 0 && since > s.reserveCut && free {
		s.wakeAt(since, s.opts.ReserveAfter)
	}
	if s.opts.StarvationAfter > 0 && since > s.starveCut && !p.spec.BorrowOnly && t.q.Parent != nil {
		s.wakeAt(since, s.opts.StarvationAfter)
	}
}

// wakeAt brings the cycle's wake (wakeN) forward to since plus d, when that
// is earlier (and a time unixNanos can hold).
func (s *Scheduler) wakeAt(since int64, d time.Duration) {
	if int64(d) <= math.MaxInt64-since {
		s.wakeN = min(s.wakeN, since+int64(d))
	}
}

// setNow sets the scheduler's now and the cuts that go with it.
func (s *Scheduler) setNow(now time.Time) {
	s.now, s.nowN = now, unixNanos(now)
	s.reserveCut = unixNanos(now.Add(-max(s.opts.ReserveAfter, 0)))
	s.starveCut = unixNanos(now.Add(-max(s.opts.StarvationAfter, 0)))
	s.resayCut = now.Add(-resayEvery)
}

// at is the time of a wait's start (unixNanos), in now's location: a
// workload's since is at most a wake's length before now when a wake is made
// of it.
func (s *Scheduler) at(since int64) time.Time {
	return s.now.Add(time.Duration(since - s.nowN))
}

// mayReserve says whether a workload waiting since then may reserve nodes
// (Options.ReserveAfter).
func (s *Scheduler) mayReserve(since int64) bool {
	return s.opts.ReserveAfter >= 0 && since <= s.reserveCut
}

// olderWaiting says whether work submitted before this cycle's arrivals
// still waits: an entry of a queue's merged part that did not leave it (the
// gaps are compacted away once a quarter may be gaps, see tidy).
func (s *Scheduler) olderWaiting() bool {
	for _, t := range s.teamList {
		for i := range t.queue.items {
			if !t.queue.items[i].gone {
				return true
			}
		}
	}
	return false
}
