package scheduler

import (
	"cmp"
	"slices"
	"time"
)

type candidate struct {
	w      *workload
	reason PreemptReason
	// prio, late and at order the candidates (see candidates).
	prio int64
	late bool
	at   int64
	seq  int64
}

// preempt looks for the smallest set of running workloads whose eviction lets w
// fit on flavor f, by the rules in order: a team under its nominal quota reclaims
// what other teams of its cohort borrow (whatever their tier, borrowOnly tiers
// always counting as borrowed); within a team a higher tier preempts a lower,
// preemptible one. A borrowing workload never preempts another team's workload
// running inside that team's nominal quota. Victims are taken lowest tier and most
// recently started first, then the set is pruned of any victim it does not need.
// Nothing is evicted when w would still not fit.
func (s *Scheduler) preempt(w *workload, f *flavorState, res *Results) bool {
	if v := s.viewOf(w, f); v.empty || v.all.capacity < w.GPUs() {
		return false
	}
	reclaim, own, ok := s.candidates(w, f)
	if !ok {
		return false
	}
	version := f.version
	var chosen []candidate
	var restores []func()
	fits := false
	try := func(c candidate) bool {
		if c.reason == PreemptReclaim && !c.w.tier.spec.BorrowOnly && !borrowing(c.w.team, f) {
			return false
		}
		restores = append(restores, s.evictWhatIf(c.w))
		chosen = append(chosen, c)
		fits = s.fitsNow(w, f)
		return fits
	}
	for _, c := range reclaim {
		if c.w.team != w.team && try(c) {
			break
		}
	}
	if !fits {
		for _, c := range own {
			if c.prio >= w.tier.spec.Priority || try(c) {
				break
			}
		}
	}
	if !fits {
		for i := len(restores) - 1; i >= 0; i-- {
			restores[i]()
		}
		f.version = version // all put back as it was: the victim lists hold
		return false
	}
	// Prune: put back each victim, most important first, if w fits without it.
	var keep []candidate
	for i := len(chosen) - 1; i >= 0; i-- {
		restores[i]()
		if s.fitsNow(w, f) {
			continue
		}
		s.evictWhatIf(chosen[i].w)
		keep = append(keep, chosen[i])
	}
	slices.Reverse(keep)
	pl, dom, _, ok := s.placeOn(w, f)
	if !ok {
		return false // unreachable: fitsNow said it fits
	}
	victims := make([]WorkloadID, 0, len(keep))
	for _, c := range keep {
		s.requeue(c.w)
		if i, ok := s.admittedNow[c.w]; ok {
			// Admitted earlier in this cycle: it never started, so it is simply
			// not admitted after all.
			res.Admitted[i].Workload = ""
			delete(s.admittedNow, c.w)
			continue
		}
		victims = append(victims, c.w.spec.ID)
		res.Preempted = append(res.Preempted, Preemption{Victim: c.w.spec.ID, By: w.spec.ID, Reason: c.reason})
	}
	s.admit(w, f, pl, dom, victims, res)
	s.epoch++
	return true
}

// fitsNow says whether w fits flavor f's quota and nodes as they are.
func (s *Scheduler) fitsNow(w *workload, f *flavorState) bool {
	if _, ok := s.quotaCheck(w, f); !ok {
		return false
	}
	v := s.viewOf(w, f)
	if v.empty || v.all.free < w.GPUs() {
		return false
	}
	// As placeOn would find: a domain of the required level, else any room
	// (a preferred level only orders the search).
	if l := w.spec.Require; l != "" {
		li := v.levels[l]
		return li != nil && li.bestFit(w.spec.GPUsPerPod, w.spec.Pods) != nil
	}
	return v.all.fits(w.spec.GPUsPerPod, w.spec.Pods)
}

// borrowing says whether t uses more of f than its nominal quota, not counting
// its borrowOnly workloads.
func borrowing(t *team, f *flavorState) bool {
	r := t.q.r(f.id)
	return r.usage-r.borrowOnly > r.nominal
}

// candidates returns the workloads the rules allow w to preempt on f, in the
// order they are tried: lowest tier first; in a tier, a gang just admitted on
// nodes drained for it last, then the most recently admitted first. reclaim
// is what w's team may reclaim from the other teams of its cohort (it holds the
// team's own entries too: skip them); own is the team's preemptible workloads
// (try only those of a lower tier than w's, a prefix). ok is false when
// evicting them all would not free enough GPUs.
//
// Both lists are kept per flavor, view and cohort (or team) until the
// flavor's running workloads change (or time moves): a busy fleet searches
// often between two admissions, and each search then costs what it tries, not
// a walk and a sort of every running workload.
func (s *Scheduler) candidates(w *workload, f *flavorState) (reclaim, own []candidate, ok bool) {
	t := w.team
	r := t.q.r(f.id)
	v := s.viewOf(w, f)
	room := v.all.free
	if !w.tier.spec.BorrowOnly && r.usage+w.GPUs() <= r.nominal && t.q.parent != nil {
		root := t.q.root()
		if f.id < len(root.reclaimable) && root.reclaimable[f.id] > 0 {
			l := s.victimList(f, v, root, nil)
			reclaim = l.list
			room += l.gpus - l.byTeam[t]
		}
	}
	l := s.victimList(f, v, nil, t)
	own = l.list
	for _, c := range own {
		if c.prio >= w.tier.spec.Priority {
			break
		}
		room += c.w.GPUs()
	}
	return reclaim, own, room >= w.GPUs()
}

// victimKey names a victim list: the reclaim candidates of a cohort tree
// (root), or the preemptible workloads of one team, on a view of a flavor.
type victimKey struct {
	v    *view
	root *qnode
	t    *team
}

// victims is a sorted list of candidates as they stood at one version of
// the flavor's running workloads, with their GPUs (in all, and per team).
type victims struct {
	version uint64
	now     time.Time
	list    []candidate
	gpus    GPUs
	byTeam  map[*team]GPUs
}

// victimList returns the reclaim candidates of root's teams (t nil) or t's
// preemptible workloads (root nil) on view v of f, building them again only
// when f's running workloads changed since, or the time did.
func (s *Scheduler) victimList(f *flavorState, v *view, root *qnode, t *team) *victims {
	key := victimKey{v: v, root: root, t: t}
	if l := f.victims[key]; l != nil && l.version == f.version && l.now.Equal(s.now) {
		return l
	}
	// helps: only a victim on a node w may use can make room for it.
	helps := func(x *workload) bool {
		if x.flavor != f {
			return false
		}
		if v == f.view {
			return true
		}
		for _, p := range x.placements {
			if v.admitsClass(f, p.node.spec.Class) {
				return true
			}
		}
		return false
	}
	l := f.victims[key]
	if l == nil {
		l = &victims{}
		if f.victims == nil {
			f.victims = map[victimKey]*victims{}
		}
		f.victims[key] = l
	}
	l.version, l.now, l.list, l.gpus = f.version, s.now, l.list[:0], 0
	clear(l.byTeam)
	if root != nil {
		if l.byTeam == nil {
			l.byTeam = map[*team]GPUs{}
		}
		for _, o := range root.teams {
			if o.reclaimable(f.id) == 0 {
				continue
			}
			// Only borrowed work is reclaimed: all of a borrowing
			// team's, else its borrowOnly tiers'.
			all := borrowing(o, f)
			start := len(l.list)
			for x := range o.running {
				if (all || x.tier.spec.BorrowOnly) && helps(x) {
					l.list = append(l.list, s.candidate(x, PreemptReclaim))
				}
			}
			if all {
				l.list = borrowedPrefix(l.list, start, o.q.r(f.id))
			}
			for _, c := range l.list[start:] {
				l.byTeam[o] += c.w.GPUs()
				l.gpus += c.w.GPUs()
			}
		}
	} else {
		for x := range t.running {
			if x.tier.spec.Preemptible && helps(x) {
				l.list = append(l.list, s.candidate(x, PreemptHigherTier))
			}
		}
	}
	slices.SortFunc(l.list, victimOrder)
	return l
}

// borrowedPrefix keeps of the team's candidates cands[start:] those the search
// can take: its borrowOnly ones, and of the others, in victim order, only those
// up to the one that ends its borrowing (the search skips the rest, as the team
// then runs within its nominal quota). Only what is kept gets sorted, so a
// search does not sort every borrowed workload of the cohort.
func borrowedPrefix(cands []candidate, start int, r *qres) []candidate {
	mine := cands[start:]
	n := 0
	for i := range mine {
		if mine[i].w.tier.spec.BorrowOnly {
			mine[n], mine[i] = mine[i], mine[n]
			n++
		}
	}
	// A heap of the others; each pop moves the least to the heap's end.
	h := mine[n:]
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	popped := 0
	for excess := r.usage - r.borrowOnly - r.nominal; excess > 0 && popped < len(h); popped++ {
		last := len(h) - 1 - popped
		h[0], h[last] = h[last], h[0]
		siftDown(h[:last], 0)
		excess -= h[last].w.GPUs()
	}
	copy(h, h[len(h)-popped:])
	return cands[:start+n+popped]
}

// siftDown restores the min-heap h (in victim order) below i.
func siftDown(h []candidate, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && victimLess(&h[r], &h[l]) {
			m = r
		}
		if !victimLess(&h[m], &h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// victimLess is victimOrder(a, b) < 0.
func victimLess(a, b *candidate) bool {
	switch {
	case a.prio != b.prio:
		return a.prio < b.prio
	case a.late != b.late:
		return b.late
	case a.at != b.at:
		return a.at > b.at
	}
	return a.seq > b.seq
}

// victimOrder orders candidates: lowest tier first; in a tier, a gang just
// admitted on nodes drained for it last, then the most recently admitted.
func victimOrder(a, b candidate) int {
	if c := cmp.Compare(a.prio, b.prio); c != 0 {
		return c
	}
	if a.late != b.late {
		if a.late {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(b.at, a.at); c != 0 {
		return c
	}
	return cmp.Compare(b.seq, a.seq)
}

func (s *Scheduler) candidate(x *workload, r PreemptReason) candidate {
	return candidate{w: x, reason: r, prio: x.tier.spec.Priority, late: s.justAdmittedGang(x), at: x.admittedAt.UnixNano(), seq: x.seq}
}

// drainedGrace is how long a gang admitted on the nodes drained for it is
// reclaimed after every other victim of its tier.
const drainedGrace = 4 * time.Hour

// justAdmittedGang says whether x is a gang of several pods admitted on the
// nodes reserved (drained) for it less than drainedGrace ago: what it waited
// for is not the first thing taken back.
func (s *Scheduler) justAdmittedGang(x *workload) bool {
	return x.spec.Pods > 1 && x.drained && s.now.Sub(x.admittedAt) < drainedGrace
}

// evictWhatIf releases x and returns the function that puts it back exactly.
func (s *Scheduler) evictWhatIf(x *workload) func() {
	started, dirty := x.started, s.dirty
	_, unstarted := s.unstarted[x]
	s.release(x)
	return func() {
		s.bind(x, x.flavor, x.placements)
		x.started, s.dirty = started, dirty
		if unstarted {
			s.unstarted[x] = struct{}{}
		}
	}
}

// WhatIfEvict releases the given admitted workloads as if they were evicted and
// returns the function that restores the scheduler exactly.
func (s *Scheduler) WhatIfEvict(ids ...WorkloadID) (restore func()) {
	var restores []func()
	for _, id := range ids {
		if w, ok := s.workloads[id]; ok && w.state == stateAdmitted {
			restores = append(restores, s.evictWhatIf(w))
		}
	}
	return func() {
		for i := len(restores) - 1; i >= 0; i-- {
			restores[i]()
		}
	}
}
