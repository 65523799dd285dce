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
	since     time.Time
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
		return m.gen == f.gen && m.since.Equal(w.since) && m.starving == s.starving(w.tier, w.since) &&
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
