package scheduler

import "time"

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

// changedAll counts a change on every flavor: a node added, removed,
// held or marked healthy or not.
func (s *Scheduler) changedAll() {
	for _, f := range s.flavorList {
		s.changed(f)
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

// A search's bounds (candidates' room, roomInPods, roomInOneDomain) read
// what is free on its view and the candidates it may take: its team's lower
// tiers and, by its kind, what the others borrow, or of that what was
// submitted after it. While nothing changes (the flavor's generation and the
// time), the searches of one team, tier, view and kind read the same
// candidates, or for a starving one submitted later a part of them: a bound
// one refused refuses every one of them that asks as much or more (more
// GPUs; at least as many pods of at least as many GPUs; a domain of the same
// level for at least as many GPUs). A starving queue's searches are mostly
// such repeats of one workload's refusal by the next ones in its run.

// boundKey names the candidates a search reads but for its submission.
type boundKey struct {
	v    *view
	t    *team
	prio int64
	kind searchKind
}

// refusal is a bound refused for a search submitted at after (unixNanos;
// 0 but for kindStarving): room, the GPUs its view had free and takeable,
// were fewer than it asked; or no nodes could take pods pods of gpp GPUs; or
// no domain of level could take need GPUs.
type refusal struct {
	after int64
	room  GPUs
	gpp   GPUs
	pods  int64
	level string
	need  GPUs
}

// maxRefusals bounds what one key keeps (the latest).
const maxRefusals = 8

// bounds are the refusals of the searches of one key at one state.
type bounds struct {
	gen   uint64
	now   time.Time
	byKey map[boundKey][]refusal
}

// boundsOf returns f's refusals at the state now, or nil when the memo is
// off.
func (s *Scheduler) boundsOf(f *flavorState) *bounds {
	if !s.memoOn() {
		return nil
	}
	b := &f.bounds
	if b.gen != f.gen || !b.now.Equal(s.now) {
		b.gen, b.now = f.gen, s.now
		clear(b.byKey)
	}
	if b.byKey == nil {
		b.byKey = map[boundKey][]refusal{}
	}
	return b
}

// refuses says whether a refusal of k stands for w's search, submitted at
// after.
func (b *bounds) refuses(k boundKey, after int64, w *workload) bool {
	if b == nil {
		return false
	}
	need := w.GPUs()
	for _, r := range b.byKey[k] {
		if after < r.after {
			continue
		}
		switch {
		case r.level != "":
			if w.spec.Require == r.level && need >= r.need {
				return true
			}
		case r.pods > 0:
			if w.spec.GPUsPerPod >= r.gpp && w.spec.Pods >= r.pods {
				return true
			}
		case need > r.room:
			return true
		}
	}
	return false
}

// refused records r for k.
func (b *bounds) refused(k boundKey, r refusal) {
	if b == nil {
		return
	}
	l := b.byKey[k]
	if len(l) >= maxRefusals {
		l = l[1:]
	}
	b.byKey[k] = append(l, r)
}
