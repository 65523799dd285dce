package scheduler

import (
	"slices"
	"time"
)

// A preemption search that failed fails again until something it read
// changes: what runs on its flavor and where (the nodes' used GPUs, which
// nodes are listed, the victim lists), the flavor's quotas, its reservation,
// and time where time decides (the workload's starving, a drained gang's
// grace). A flavor's generation counts the changes of the first kinds; a
// failure is remembered on the workload with the generation it read and
// stands until that moves, the workload starts or stops starving, or the
// victim order the search read changes with time. In a fleet whose queue
// starves, most searches repeat the same workload's earlier failure.
// Options.NoSearchMemo turns it off; TestSearchMemoDecidesAsNoMemo runs
// random histories with and without it in lockstep.

// searchFail is a failed search of a workload on a flavor.
type searchFail struct {
	f   *flavorState
	gen uint64
	// since and starving are the workload's when it failed; at is when,
	// until the first time after it that the victim order it read changes
	// (zero: none).
	since     int64
	starving  bool
	at, until time.Time
}

// changed counts a change of what searches on f read. Generations are
// numbered across flavors and never reused, so that one put back (after a
// failed search, which leaves everything as it was) stands only for the
// state it was read on.
func (s *Scheduler) changed(f *flavorState) {
	s.gens++
	f.gen = s.gens
}

// grew counts a change of what searches on f read that may let any bound
// find more room than before: the bounds refused on f are dropped (see
// bounds). A preemption search's what-if evictions are not counted: a
// failed search puts everything back, and preempt tells the refusals of a
// successful one's victims (freed).
func (s *Scheduler) grew(f *flavorState) {
	s.changed(f)
	if !s.searching {
		f.grown = f.gen
	}
}

// changedAll counts a change on every flavor: a node added, removed,
// held or marked healthy or not.
func (s *Scheduler) changedAll() {
	for _, f := range s.flavorList {
		s.grew(f)
	}
}

// memoOn says whether failed searches are remembered: not with
// Options.BorrowFirstAfter, whose gang (which a quota check reads) changes
// with time and with the walk.
func (s *Scheduler) memoOn() bool {
	return !s.opts.NoSearchMemo && s.opts.BorrowFirstAfter <= 0
}

// failedBefore says whether w's search on f failed before and nothing it
// read has changed since.
func (s *Scheduler) failedBefore(w *workload, f *flavorState) bool {
	if !s.memoOn() {
		return false
	}
	for i := range w.searchFails {
		m := &w.searchFails[i]
		if m.f != f {
			continue
		}
		return m.gen == f.gen && m.since == w.since && m.starving == s.starving(w.tier, w.since) &&
			!s.now.Before(m.at) && (m.until.IsZero() || s.now.Before(m.until))
	}
	return false
}

// rememberFail records that w's search on f failed on generation gen.
func (s *Scheduler) rememberFail(w *workload, f *flavorState, gen uint64) {
	if !s.memoOn() {
		return
	}
	m := searchFail{f: f, gen: gen, since: w.since, starving: s.starving(w.tier, w.since), at: s.now, until: s.flipSeen}
	for i := range w.searchFails {
		if w.searchFails[i].f == f {
			w.searchFails[i] = m
			return
		}
	}
	w.searchFails = append(w.searchFails, m)
}

// sawFlip notes the first time after now the order of a victim list a
// search reads changes.
func (s *Scheduler) sawFlip(l *teamVictims) {
	if !l.flipAt.IsZero() && (s.flipSeen.IsZero() || l.flipAt.Before(s.flipSeen)) {
		s.flipSeen = l.flipAt
	}
}

// A search's bounds (candidates' room, podShort, domainShort,
// domainPodShort) read
// what is free on its view and the candidates it may take: its team's lower
// tiers and, by its kind, what the others borrow, or of that what was
// submitted after it. The searches of one team, tier, view and kind read
// the same candidates, or for a starving one submitted later a part of
// them: a bound one refused refuses every one of them that asks for more
// than it found (more GPUs than the room; more pods than the nodes could
// take, of at least as many GPUs; more GPUs, or more pods of at least as
// many GPUs, than the best domain of the same level could take), where the
// search would read that bound itself. A starving queue's searches are
// mostly such repeats of one workload's refusal by the next ones in its
// run, of the same size or smaller.
//
// A refusal of pods or of a domain stands until the room its bound finds
// may grow; nodes' room is free GPUs and candidates' alike. Admitting a
// workload does not grow it: what it takes is no longer free, and at most
// comes back as a candidate on the same nodes; unless its team borrows
// past the victims that come before it, whose borrowed work others may then
// take more of (a stream's budget grows by its GPUs and reaches further
// down its victims: binding). Releasing a workload that was a candidate of
// the refused search does not grow it either; releasing another grows it by
// at most what that frees, which the refusal takes from what it lacked
// (releasing; freed for a preemption's victims, released while its search
// ran). A node listed, the nodes or the quotas changed may grow any (the
// flavor's grown generation); the order of a victim list changing with
// time (a drained gang's grace ending) too: until is the first such time
// any refusal read. A room refusal counts quota too and stands only on the
// state it was read on. TestSearchMemoDecidesAsNoMemo and
// TestRefusalsStandOnAStarvingFleet check every refusal taken from another
// search against its own bounds on random histories.

// boundKey names the candidates a search reads but for its submission.
type boundKey struct {
	v    *view
	t    *team
	prio int64
	kind searchKind
}

// refusal is a bound refused for a search submitted at after (unixNanos;
// 0 but for kindStarving): room, the GPUs its view had free and takeable,
// were fewer than it asked; or the nodes could not take pods pods of gpp
// GPUs; or no domain of level could take need GPUs, or (pods set) pods pods
// of gpp GPUs. A room refusal stands only on
// the state it was read on (gen, at): of the room, the free GPUs count only
// up to the team's available quota, which another team's work admitted
// need not lower while it adds to what may be taken.
type refusal struct {
	after int64
	// upto: it refuses searches submitted before it only.
	upto  int64
	gen   uint64
	at    time.Time
	room  GPUs
	gpp   GPUs
	pods  int64
	level string
	need  GPUs
	// short is what the refused bound lacked, or less: pods of gpp GPUs
	// (in one domain of level, where it names one), or GPUs in one domain
	// of level. A release that is not one of the
	// search's candidates takes from it what it could add (grownBy).
	short GPUs
}

// grownBy takes from r's shortfall what x, not a candidate of its search,
// may add released: its GPUs free on its nodes may make so many more pods
// of r's, or a domain so many more GPUs. A room refusal stands on its own
// state only: it is left as it is.
func (r *refusal) grownBy(x *workload) {
	switch {
	case r.pods > 0:
		for _, p := range x.placements {
			r.short -= (p.pods*x.gpp + r.gpp - 1) / r.gpp
		}
	case r.level != "":
		r.short -= x.GPUs()
	}
}

// maxRefusals bounds what one key keeps (the latest).
const maxRefusals = 8

// bounds are the refusals of the searches of one flavor since its grown
// generation was grown, from time now on, before until (zero: whenever).
type bounds struct {
	grown      uint64
	now, until time.Time
	byKey      map[boundKey][]refusal
	// spare are lists of refusals dropped, for keys refused next (a busy
	// fleet drops them all at every change that may grow a bound).
	spare [][]refusal
}

// boundsOf returns f's refusals that stand now, or nil when the memo is
// off.
func (s *Scheduler) boundsOf(f *flavorState) *bounds {
	if !s.memoOn() {
		return nil
	}
	b := &f.bounds
	if b.grown != f.grown || s.now.Before(b.now) || (!b.until.IsZero() && !s.now.Before(b.until)) {
		b.grown, b.now, b.until = f.grown, s.now, time.Time{}
		for _, l := range b.byKey {
			b.spare = append(b.spare, l[:0])
		}
		clear(b.byKey)
	}
	if b.byKey == nil {
		b.byKey = map[boundKey][]refusal{}
	}
	return b
}

// refuses says whether a refusal of k stands for w's search, submitted at
// after.
func (b *bounds) refuses(k boundKey, after int64, w *workload, gen uint64, now time.Time) bool {
	if b == nil {
		return false
	}
	need := w.GPUs()
	for _, r := range b.byKey[k] {
		if after < r.after || after >= r.upto {
			continue
		}
		// What the bound found (pods of r's size, or GPUs in one domain)
		// is what it asked less what it lacked: it refuses any ask of
		// more.
		switch {
		case r.level != "" && r.pods > 0:
			if w.spec.Require == r.level && w.spec.GPUsPerPod >= r.gpp && w.spec.Pods > r.pods-r.short {
				return true
			}
		case r.level != "":
			if w.spec.Require == r.level && need > r.need-r.short {
				return true
			}
		case r.pods > 0:
			if w.spec.GPUsPerPod >= r.gpp && w.spec.Pods > r.pods-r.short && boundedInPods(w) {
				return true
			}
		case need > r.room && r.gen == gen && r.at.Equal(now):
			return true
		}
	}
	return false
}

// refused records r for k, read on victim lists whose order first changes
// at flip (zero: never).
func (b *bounds) refused(k boundKey, r refusal, flip time.Time) {
	if b == nil {
		return
	}
	if !flip.IsZero() && (b.until.IsZero() || flip.Before(b.until)) {
		b.until = flip
	}
	l, ok := b.byKey[k]
	if n := len(b.spare); !ok && n > 0 {
		l, b.spare = b.spare[n-1], b.spare[:n-1]
	}
	if len(l) >= maxRefusals {
		l = l[:copy(l, l[1:])]
	}
	b.byKey[k] = append(l, r)
}

// drop drops k's refusals, their list kept for a key refused next.
func (b *bounds) drop(k boundKey) {
	if l, ok := b.byKey[k]; ok {
		b.spare = append(b.spare, l[:0])
		delete(b.byKey, k)
	}
}

// releasing keeps, x about to be released, the refusals on its flavor of
// searches x was a candidate of (the GPUs it frees were counted as takeable
// already), and of the others those x's GPUs cannot lift (grownBy). A
// starving search's refusal keeps refusing as it did only the searches
// submitted before x (of which x is a candidate).
func (s *Scheduler) releasing(x *workload) {
	f := x.flavor
	b := &f.bounds
	if len(b.byKey) == 0 {
		return
	}
	o, p := x.team, x.tier.spec.Priority
	borrowOnly, submitted := x.tier.spec.BorrowOnly, unixNanos(x.spec.Submitted)
	var lent, knownLent bool // x is of what o borrows on f's own view
	for k, rs := range b.byKey {
		var taken bool
		switch {
		case k.t == o:
			taken = x.tier.spec.Preemptible && p < k.prio
		case k.kind == kindOwn || k.t.q.Root() != o.q.Root():
		case k.kind == kindStarving && p > k.prio:
		case borrowOnly:
			taken = true
		case k.v == f.view:
			if !knownLent {
				lent, knownLent = s.borrowedBy(x), true
			}
			taken = lent
		}
		switch {
		case !taken:
			b.grownBy(k, rs, x)
		case k.kind == kindStarving && k.t != o:
			// Of the searches submitted after x, x is no candidate.
			for i := range rs {
				rs[i].upto = min(rs[i].upto, submitted)
			}
			b.keep(k, rs)
		}
	}
}

// grownBy takes x, released and no candidate of their searches, from k's
// refusals rs (refusal.grownBy) and drops those it lifts.
func (b *bounds) grownBy(k boundKey, rs []refusal, x *workload) {
	for i := range rs {
		rs[i].grownBy(x)
	}
	b.keep(k, rs)
}

// dead says whether r refuses no search any more: it was lifted, or it is
// of room, which stands only on the state it was read on (which releasing
// and freed change), or it covers no submission.
func (r refusal) dead() bool { return r.short <= 0 || r.upto <= r.after }

// keep keeps k's refusals rs that are not dead (rs itself when none is).
func (b *bounds) keep(k boundKey, rs []refusal) {
	if !slices.ContainsFunc(rs, refusal.dead) {
		return
	}
	rs = slices.DeleteFunc(rs, refusal.dead)
	if len(rs) == 0 {
		b.drop(k)
		return
	}
	b.byKey[k] = rs
}

// freed is releasing's for x, released from f, taken as no search's
// candidate.
func (s *Scheduler) freed(x *workload, f *flavorState) {
	b := &f.bounds
	for k, rs := range b.byKey {
		b.grownBy(k, rs, x)
	}
}

// borrowedBy says whether x, not of a borrowOnly tier, is of what its team
// borrows on its flavor's own view: within the prefix of its victim list a
// search takes back (candidatesFor). Not when the list is not kept.
func (s *Scheduler) borrowedBy(x *workload) bool {
	f, o := x.flavor, x.team
	if !borrowing(o, f) {
		return false
	}
	l := o.victimsOn(f, f.view)
	if l == nil || !l.current(s.now) {
		return false
	}
	budget := borrowed(o, f)
	for c := range l.rest.from(vpos{}) {
		if budget <= 0 {
			break
		}
		if c.w == x {
			return true
		}
		budget -= c.gpus
	}
	return false
}

// binding drops, w just bound and charged, the refusals it may lift. What
// it takes of the free GPUs of its flavor's own view comes back at most as
// a candidate, unless its team's borrowing lifts other teams' refusals: the
// budget of its stream grew by w's GPUs, which reaches further down its
// victims unless the stream reached w's place before (the victims before
// it, on the own view, fewer GPUs than it borrowed before w). A view of
// rules may count it a candidate on nodes it does not hold (domainRoom
// counts a candidate's pods wherever they run): refusals on one are
// dropped.
func (s *Scheduler) binding(w *workload) {
	f := w.flavor
	b := &f.bounds
	if len(b.byKey) == 0 {
		return
	}
	o := w.team
	lifts := !w.tier.spec.BorrowOnly && borrowing(o, f)
	if lifts {
		before := borrowed(o, f) - w.GPUs()
		if l := o.victimsOn(f, f.view); before > 0 && l != nil && l.current(s.now) {
			c := s.candidate(w)
			lifts = false
			for x := range l.rest.from(vpos{}) {
				if !victimLess(x, &c) {
					break
				}
				if before -= x.gpus; before <= 0 {
					lifts = true
					break
				}
			}
		}
	}
	for k := range b.byKey {
		if k.v != f.view || (lifts && k.t != o && k.kind != kindOwn && k.t.q.Root() == o.q.Root()) {
			b.drop(k)
		}
	}
}
