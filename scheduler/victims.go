package scheduler

import (
	"container/heap"
	"slices"
	"time"
)

// teamVictims are a team's running workloads on one flavor that can make room
// on one view of it (their pods on nodes the view admits), in victim order,
// kept as workloads start and end rather than collected and sorted on each
// search: in a busy fleet a cycle searches thousands of times. The order of
// a gang just admitted on drained nodes depends on the time, so the lists are
// ordered again once such a gang's grace ends.
type teamVictims struct {
	// now is when the order was last known right; flipAt is the first time
	// after it that a member's place changes (a drained gang's grace ends).
	now, flipAt time.Time
	// borrowOnly holds the workloads of borrowOnly tiers, rest the others.
	borrowOnly, rest []candidate
	// borrowOnlyGPUs sums borrowOnly; preemptible sums the GPUs of the
	// preemptible workloads by tier priority.
	borrowOnlyGPUs GPUs
	preemptible    map[int64]GPUs
}

// helps says whether x, running, could make room on view v of f.
func helps(f *flavorState, v *view, x *workload) bool {
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

// teamVictims returns t's victim lists on view v of f, up to date.
func (s *Scheduler) teamVictims(f *flavorState, v *view, t *team) *teamVictims {
	byView := f.victims[t]
	if byView == nil {
		if f.victims == nil {
			f.victims = map[*team]map[*view]*teamVictims{}
		}
		byView = map[*view]*teamVictims{}
		f.victims[t] = byView
	}
	l := byView[v]
	if l != nil && l.current(s.now) {
		return l
	}
	if l == nil {
		l = &teamVictims{preemptible: map[int64]GPUs{}}
		byView[v] = l
	}
	l.now, l.flipAt, l.borrowOnly, l.rest, l.borrowOnlyGPUs = s.now, time.Time{}, l.borrowOnly[:0], l.rest[:0], 0
	clear(l.preemptible)
	for x := range t.running {
		if helps(f, v, x) {
			l.put(s.candidate(x, ""), false)
		}
	}
	slices.SortFunc(l.borrowOnly, victimOrder)
	slices.SortFunc(l.rest, victimOrder)
	return l
}

// current says whether the lists' order holds at now (and then moves them to
// it): time went forward and no drained gang's grace ended since.
func (l *teamVictims) current(now time.Time) bool {
	switch {
	case l.now.Equal(now):
		return true
	case now.Before(l.now) || (!l.flipAt.IsZero() && !now.Before(l.flipAt)):
		return false
	}
	l.now = now
	return true
}

// add puts c in its list, in order, and in its sums.
func (l *teamVictims) add(c candidate) { l.put(c, true) }

// put puts c in its list (in order when sorted) and in its sums.
func (l *teamVictims) put(c candidate, sorted bool) {
	list := &l.rest
	if c.borrowOnly {
		list = &l.borrowOnly
		l.borrowOnlyGPUs += c.gpus
	}
	if c.preemptible {
		l.preemptible[c.prio] += c.gpus
	}
	if c.late {
		if at := c.w.admittedAt.Add(drainedGrace); l.flipAt.IsZero() || at.Before(l.flipAt) {
			l.flipAt = at
		}
	}
	if !sorted {
		*list = append(*list, c)
		return
	}
	i, _ := slices.BinarySearchFunc(*list, c, victimOrder)
	*list = slices.Insert(*list, i, c)
}

// remove takes c out of its list and its sums.
func (l *teamVictims) remove(c candidate) {
	list := &l.rest
	if c.borrowOnly {
		list = &l.borrowOnly
		l.borrowOnlyGPUs -= c.gpus
	}
	if c.preemptible {
		l.preemptible[c.prio] -= c.gpus
	}
	i, ok := slices.BinarySearchFunc(*list, c, victimOrder)
	if !ok || (*list)[i].w != c.w {
		i = slices.IndexFunc(*list, func(x candidate) bool { return x.w == c.w })
	}
	if i >= 0 {
		*list = slices.Delete(*list, i, i+1)
	}
}

// listVictim adds w, just admitted, to its team's lists that are up to date
// (the others are built again when next used); unlistVictim takes it out,
// about to be released.
func (s *Scheduler) listVictim(w *workload)   { s.relistVictim(w, (*teamVictims).add) }
func (s *Scheduler) unlistVictim(w *workload) { s.relistVictim(w, (*teamVictims).remove) }

func (s *Scheduler) relistVictim(w *workload, op func(*teamVictims, candidate)) {
	if s.searching {
		return
	}
	f := w.flavor
	c := s.candidate(w, "")
	for v, l := range f.victims[w.team] {
		if l.current(s.now) && helps(f, v, w) {
			op(l, c)
		}
	}
}

// victimSearch yields the candidates of one preemption search in the order
// they are tried: the reclaim candidates of the cohort's other teams, merged
// from each team's lists, then the team's own of lower tiers.
type victimSearch struct {
	reclaim streamHeap
	own     stream
	prio    int64 // the searching workload's tier priority
	// ahead holds candidates drained by all and not yet yielded by next.
	ahead []candidate
}

// stream walks one team's two lists in victim order, keeping of the non
// borrowOnly ones only a prefix of budget GPUs (what the team borrows).
type stream struct {
	borrowOnly, rest []candidate
	i, j             int
	// all: the rest are taken (up to budget); else only borrowOnly ones.
	all    bool
	budget GPUs
	reason PreemptReason
	// top is the head while known (a heap of streams asks for it often).
	top   *candidate
	known bool
}

// head returns the next candidate of the stream, if any.
func (st *stream) head() (candidate, bool) {
	if c := st.peek(); c != nil {
		return *c, true
	}
	return candidate{}, false
}

// peek returns the next candidate of the stream in place, or nil.
func (st *stream) peek() *candidate {
	if st.known {
		return st.top
	}
	st.top, st.known = nil, true
	restOK := st.all && st.j < len(st.rest) && st.budget > 0
	switch {
	case st.i < len(st.borrowOnly) && (!restOK || victimLess(&st.borrowOnly[st.i], &st.rest[st.j])):
		st.top = &st.borrowOnly[st.i]
	case restOK:
		st.top = &st.rest[st.j]
	}
	return st.top
}

// pop moves past the head.
func (st *stream) pop() {
	c := st.peek()
	if c.borrowOnly {
		st.i++
	} else {
		st.j++
		st.budget -= c.gpus
	}
	st.known = false
}

// next returns the next candidate of the search.
func (vs *victimSearch) next() (candidate, bool) {
	if len(vs.ahead) > 0 {
		c := vs.ahead[0]
		vs.ahead = vs.ahead[1:]
		return c, true
	}
	return vs.pull()
}

// each calls yield on every candidate next has still to yield, in no
// particular order, until yield returns false; it takes none of them.
func (vs *victimSearch) each(yield func(*candidate) bool) {
	for _, c := range vs.ahead {
		if !yield(&c) {
			return
		}
	}
	for _, st := range vs.reclaim {
		for i := st.i; i < len(st.borrowOnly); i++ {
			if !yield(&st.borrowOnly[i]) {
				return
			}
		}
		if !st.all {
			continue
		}
		budget := st.budget
		for j := st.j; j < len(st.rest) && budget > 0; j++ {
			if !yield(&st.rest[j]) {
				return
			}
			budget -= st.rest[j].gpus
		}
	}
	for _, l := range [][]candidate{vs.own.borrowOnly[vs.own.i:], vs.own.rest[vs.own.j:]} {
		for i := range l {
			if l[i].prio >= vs.prio {
				break
			}
			if l[i].preemptible && !yield(&l[i]) {
				return
			}
		}
	}
}

// all returns the candidates next has still to yield (it yields them after).
func (vs *victimSearch) all() []candidate {
	for c, ok := vs.pull(); ok; c, ok = vs.pull() {
		vs.ahead = append(vs.ahead, c)
	}
	return vs.ahead
}

// pull takes the next candidate from the lists.
func (vs *victimSearch) pull() (candidate, bool) {
	if len(vs.reclaim) > 0 {
		st := vs.reclaim[0]
		c := *st.peek()
		st.pop()
		if st.peek() != nil {
			heap.Fix(&vs.reclaim, 0)
		} else {
			heap.Pop(&vs.reclaim)
		}
		c.reason = st.reason
		return c, true
	}
	for {
		c, ok := vs.own.head()
		if !ok || c.prio >= vs.prio {
			return candidate{}, false
		}
		vs.own.pop()
		if c.preemptible {
			c.reason = vs.own.reason
			return c, true
		}
	}
}

// streamHeap orders streams by their heads.
type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	// Every stream in the heap has a head.
	return victimLess(h[i].peek(), h[j].peek())
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// candidates prepares the search of what the rules allow w to preempt on f:
// what its team may reclaim from the other teams of its cohort (only their
// borrowed work: all of a borrowing team's — in victim order, no more than it
// borrows — else its borrowOnly tiers'), then its own preemptible workloads of
// a lower tier. The order: lowest tier first; in a tier, a gang just admitted
// on nodes drained for it last, then the most recently admitted first. ok is
// false when evicting them all would not free enough GPUs: then nothing is
// tried.
func (s *Scheduler) candidates(w *workload, f *flavorState) (vs *victimSearch, ok bool) {
	t := w.team
	v := s.viewOf(w, f)
	room := v.all.free
	vs = &victimSearch{prio: w.tier.spec.Priority}
	if s.reclaims(w, f) {
		root := t.q.root()
		for _, o := range root.teams {
			if o == t || o.reclaimable(f.id) == 0 {
				continue
			}
			l := s.teamVictims(f, v, o)
			st := &stream{borrowOnly: l.borrowOnly, rest: l.rest, reason: PreemptReclaim}
			room += l.borrowOnlyGPUs
			if borrowing(o, f) {
				or := o.q.r(f.id)
				excess := or.usage - or.borrowOnly - or.nominal
				st.all, st.budget = true, excess
				for _, c := range l.rest {
					if excess <= 0 {
						break
					}
					room += c.gpus
					excess -= c.gpus
				}
			}
			if _, any := st.head(); any {
				vs.reclaim = append(vs.reclaim, st)
			}
		}
		heap.Init(&vs.reclaim)
	}
	l := s.teamVictims(f, v, t)
	vs.own = stream{borrowOnly: l.borrowOnly, rest: l.rest, all: true, budget: maxGPUs, reason: PreemptHigherTier}
	for prio, g := range l.preemptible {
		if prio < w.tier.spec.Priority {
			room += g
		}
	}
	return vs, room >= w.GPUs()
}

// reclaims says whether a search for w on f has reclaim candidates: w's team
// would stay within its nominal quota (w's tier is not borrowOnly) and some
// team of its cohort uses what may be reclaimed.
func (s *Scheduler) reclaims(w *workload, f *flavorState) bool {
	return reclaimsFor(w.team, w.tier, f, w.GPUs())
}

// reclaimsFor is reclaims for a workload of team t and tier p asking need GPUs.
func reclaimsFor(t *team, p *tier, f *flavorState, need GPUs) bool {
	if p.spec.BorrowOnly || t.q.parent == nil {
		return false
	}
	if r := t.q.r(f.id); r.usage+need > r.nominal {
		return false
	}
	root := t.q.root()
	return f.id < len(root.reclaimable) && root.reclaimable[f.id] > 0
}

// maxGPUs is a budget no stream reaches.
const maxGPUs = GPUs(1) << 62
