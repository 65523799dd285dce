package scheduler

import (
	"iter"
	"slices"
	"time"

	"github.com/allot-dev/allot/scheduler/internal/quota"
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
	borrowOnly, rest vlist
	// borrowOnlyGPUs sums borrowOnly; preemptible sums the GPUs of the
	// preemptible workloads by tier priority.
	borrowOnlyGPUs GPUs
	preemptible    quota.TierSums
}

// vlist is a list of candidates in victim order, kept in segments of one
// tier and lateness each (in order), each stored backwards: the workload
// just admitted, the first victim of its segment, goes at the end of its
// slice instead of moving the rest of the list up. A workload that ends
// leaves a gap (its candidate keeps its place, without the workload) until
// half its segment is gaps.
type vlist struct {
	segs []vseg
}

type vseg struct {
	prio int64
	late bool
	c    []candidate // in reverse victim order
	gaps int
}

// vpos is a place in a vlist: the i-th candidate of segment s in victim order.
type vpos struct{ s, i int }

// reverseVictimOrder is the order a segment stores its candidates in.
func reverseVictimOrder(a, b candidate) int { return victimOrder(b, a) }

// seg returns c's segment, made (in its place) when create is true, or nil.
func (l *vlist) seg(c *candidate, create bool) *vseg {
	i := 0
	for ; i < len(l.segs); i++ {
		g := &l.segs[i]
		if g.prio == c.prio && g.late == c.late {
			return g
		}
		if g.prio > c.prio || (g.prio == c.prio && g.late) {
			break
		}
	}
	if !create {
		return nil
	}
	l.segs = slices.Insert(l.segs, i, vseg{prio: c.prio, late: c.late})
	return &l.segs[i]
}

// reset empties the list, keeping its room.
func (l *vlist) reset() {
	for i := range l.segs {
		clear(l.segs[i].c)
		l.segs[i].c, l.segs[i].gaps = l.segs[i].c[:0], 0
	}
}

// push adds c at the end of its segment, out of order (see sort).
func (l *vlist) push(c candidate) {
	g := l.seg(&c, true)
	g.c = append(g.c, c)
}

// sort puts every segment in order after pushes.
func (l *vlist) sort() {
	for i := range l.segs {
		slices.SortFunc(l.segs[i].c, reverseVictimOrder)
	}
}

// add puts c in its place.
func (l *vlist) add(c candidate) {
	g := l.seg(&c, true)
	if n := len(g.c); n == 0 || victimOrder(c, g.c[n-1]) < 0 {
		g.c = append(g.c, c)
		return
	}
	i, _ := slices.BinarySearchFunc(g.c, c, reverseVictimOrder)
	g.c = slices.Insert(g.c, i, c)
}

// remove takes c's workload out of the list.
func (l *vlist) remove(c candidate) {
	g := l.seg(&c, false)
	if g == nil {
		return
	}
	i, ok := slices.BinarySearchFunc(g.c, c, reverseVictimOrder)
	if !ok || g.c[i].w != c.w {
		// A gap of the same keys (the workload left and came back).
		i = slices.IndexFunc(g.c, func(x candidate) bool { return x.w == c.w })
	}
	if i < 0 {
		return
	}
	g.c[i].w = nil
	if g.gaps++; g.gaps*2 > len(g.c) {
		g.c = slices.DeleteFunc(g.c, func(x candidate) bool { return x.w == nil })
		g.gaps = 0
	}
}

// at returns the candidate at p, moving p past gaps and the ends of
// segments, or nil at the end of the list.
func (l *vlist) at(p *vpos) *candidate {
	for ; p.s < len(l.segs); p.s, p.i = p.s+1, 0 {
		c := l.segs[p.s].c
		for ; p.i < len(c); p.i++ {
			if x := &c[len(c)-1-p.i]; x.w != nil {
				return x
			}
		}
	}
	return nil
}

// from yields the candidates from p on, in victim order.
func (l *vlist) from(p vpos) iter.Seq[*candidate] {
	return func(yield func(*candidate) bool) {
		for c := l.at(&p); c != nil; c = l.at(&p) {
			if !yield(c) {
				return
			}
			p.i++
		}
	}
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

// flavorVictims are a team's victim lists of one flavor: on the flavor's own
// view (the searches of workloads without placement rules) and on the views
// of placement rules.
type flavorVictims struct {
	whole *teamVictims
	views map[*view]*teamVictims
}

// victimsOn returns t's victim lists on view v of f as kept, or nil.
func (t *team) victimsOn(f *flavorState, v *view) *teamVictims {
	if f.id >= len(t.victims) {
		return nil
	}
	if v == f.view {
		return t.victims[f.id].whole
	}
	return t.victims[f.id].views[v]
}

// keepVictims keeps l as t's victim lists on view v of f.
func (t *team) keepVictims(f *flavorState, v *view, l *teamVictims) {
	if f.id >= len(t.victims) {
		t.victims = append(t.victims, make([]flavorVictims, f.id+1-len(t.victims))...)
	}
	fv := &t.victims[f.id]
	switch {
	case v == f.view:
		fv.whole = l
	case fv.views == nil:
		fv.views = map[*view]*teamVictims{v: l}
	default:
		fv.views[v] = l
	}
}

// teamVictims returns t's victim lists on view v of f, up to date.
func (s *Scheduler) teamVictims(f *flavorState, v *view, t *team) *teamVictims {
	l := t.victimsOn(f, v)
	if l != nil && l.current(s.now) {
		s.sawFlip(l)
		return l
	}
	if l == nil {
		l = &teamVictims{}
		t.keepVictims(f, v, l)
	}
	l.now, l.flipAt, l.borrowOnlyGPUs = s.now, time.Time{}, 0
	l.borrowOnly.reset()
	l.rest.reset()
	l.preemptible = l.preemptible[:0]
	for x := range t.running {
		if helps(f, v, x) {
			l.put(s.candidate(x), false)
		}
	}
	l.borrowOnly.sort()
	l.rest.sort()
	s.sawFlip(l)
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
		l.preemptible.Add(c.prio, c.gpus)
	}
	if c.late {
		if at := c.w.admittedAt.Add(drainedGrace); l.flipAt.IsZero() || at.Before(l.flipAt) {
			l.flipAt = at
		}
	}
	if sorted {
		list.add(c)
	} else {
		list.push(c)
	}
}

// remove takes c out of its list and its sums.
func (l *teamVictims) remove(c candidate) {
	list := &l.rest
	if c.borrowOnly {
		list = &l.borrowOnly
		l.borrowOnlyGPUs -= c.gpus
	}
	if c.preemptible {
		l.preemptible.Add(c.prio, -c.gpus)
	}
	list.remove(c)
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
	if f.id >= len(w.team.victims) {
		return // no list of the team's on f kept yet
	}
	c := s.candidate(w)
	fv := &w.team.victims[f.id]
	// Every workload of f helps on its own view; on another, as helps says.
	if l := fv.whole; l != nil && l.current(s.now) {
		op(l, c)
	}
	for v, l := range fv.views {
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
	// after is the submission of a starving workload's search: its reclaim
	// candidates (PreemptStarving) count only when submitted after it.
	after int64
	// bounded: the search of a team that would pass its nominal were none
	// of its own lower tiers evicted. With a reclaim victim evicted (of
	// reclaimed, the count) the workload fits only while its team, w
	// included, stays within its nominal (ceiling: the nominal less w's
	// GPUs) on the state after the search's evictions, as Kueue reclaims
	// without borrowing; with its own victims alone the team may borrow.
	bounded   bool
	team      *team
	fid       int
	ceiling   GPUs
	reclaimed int
}

// fits says whether the workload fits with the victims tr has evicted: tr's
// fit test and, for a bounded search that reclaims, its team within its
// nominal.
func (vs *victimSearch) fits(tr trial) bool {
	return (!vs.bounded || vs.reclaimed == 0 || vs.team.q.R(vs.fid).Usage <= vs.ceiling) && tr.fits()
}

// evict evicts c by tr and counts it; back puts it back (failed: see trial).
func (vs *victimSearch) evict(tr trial, c *candidate) {
	tr.evict(c.w)
	if c.reason != byHigherTier {
		vs.reclaimed++
	}
}

func (vs *victimSearch) back(tr trial, c *candidate, failed bool) {
	tr.back(c.w, failed)
	if c.reason != byHigherTier {
		vs.reclaimed--
	}
}

// stream walks one team's two lists in victim order, keeping of the non
// borrowOnly ones only a prefix of budget GPUs (what the team borrows).
type stream struct {
	borrowOnly, rest *vlist
	i, j             vpos
	// all: the rest are taken (up to budget); else only borrowOnly ones.
	all    bool
	budget GPUs
	reason why
	// top is the head while known (a heap of streams asks for it often).
	top   *candidate
	known bool
	// starving, when set, is the search of a starving workload, which takes
	// only what it says: the stream passes over the rest (as the search
	// would, counting them against the budget) and ends at the first
	// candidate of a higher tier.
	starving *victimSearch
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
	for {
		c := st.look()
		if c == nil || st.starving == nil || st.starving.laterBorrow(c) {
			return c
		}
		if c.prio > st.starving.prio {
			// Victim order is by tier first: nothing after it is taken.
			st.top = nil
			return nil
		}
		st.pop()
	}
}

// look reads the next candidate of the stream into top.
func (st *stream) look() *candidate {
	st.top, st.known = nil, true
	var r *candidate
	if st.all && st.budget > 0 {
		r = st.rest.at(&st.j)
	}
	b := st.borrowOnly.at(&st.i)
	switch {
	case b != nil && (r == nil || victimLess(b, r)):
		st.top = b
	case r != nil:
		st.top = r
	}
	return st.top
}

// pop moves past the head.
func (st *stream) pop() {
	c := st.top
	if !st.known {
		c = st.peek()
	}
	if c.borrowOnly {
		st.i.i++
	} else {
		st.j.i++
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
		for c := range st.borrowOnly.from(st.i) {
			if st.starving != nil && !st.starving.laterBorrow(c) {
				if c.prio > st.starving.prio {
					break
				}
				continue
			}
			if !yield(c) {
				return
			}
		}
		if !st.all {
			continue
		}
		budget := st.budget
		for c := range st.rest.from(st.j) {
			if budget <= 0 || (st.starving != nil && c.prio > st.starving.prio) {
				break
			}
			if (st.starving == nil || st.starving.laterBorrow(c)) && !yield(c) {
				return
			}
			budget -= c.gpus
		}
	}
	for _, l := range []struct {
		l *vlist
		p vpos
	}{{vs.own.borrowOnly, vs.own.i}, {vs.own.rest, vs.own.j}} {
		for c := range l.l.from(l.p) {
			if c.prio >= vs.prio {
				break
			}
			if c.preemptible && !yield(c) {
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
		if st.peek() == nil {
			vs.reclaim.dropTop()
		}
		vs.reclaim.down(0)
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

// streamHeap orders streams by their heads (every stream in it has one). A
// search pulls hundreds of candidates from up to a cohort's teams' streams.
type streamHeap []*stream

// init orders the heap.
func (h streamHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// dropTop replaces the top by the last stream (down(0) orders it after).
func (h *streamHeap) dropTop() {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], nil
	*h = old[:n]
}

func (h streamHeap) down(i int) { siftDown(h, i, headFirst) }

// headFirst says whether stream a's head comes before b's.
func headFirst(a, b *stream) bool { return victimLess(a.peek(), b.peek()) }

// candidatesOf prepares the search of what the rules allow w to preempt on
// f, a search of the kind given (kindOf): what its team may reclaim from the
// other teams of its cohort (only their borrowed work: all of a borrowing
// team's — in victim order, no more than it borrows — else its borrowOnly
// tiers'), then its own preemptible workloads of a lower tier. The order:
// lowest tier first; in a tier, a gang just admitted on nodes drained for it
// last, then the most recently admitted first. room is what the candidates
// hold and, of what the view has free, as much as the team's quota has
// available (roomFor), read until it reaches what w asks; ok is false when
// it does not: then nothing is tried. The search and its streams are the
// scheduler's, reused: they hold until the next call.
func (s *Scheduler) candidatesOf(w *workload, f *flavorState, kind searchKind) (vs *victimSearch, room GPUs, ok bool) {
	need := w.GPUs()
	vs, room = s.candidatesFor(w.team, w.tier.spec.Priority, w.spec.Submitted, f, s.viewOf(w, f), kind, need)
	if kind == kindReclaim && boundedFor(w, f) {
		vs.bounded, vs.team, vs.fid, vs.ceiling = true, w.team, f.id, w.team.q.R(f.id).Nominal-need
	}
	return vs, room, room >= need
}

// candidatesFor is candidatesOf for a workload of team t and tier priority
// prio submitted then, on view v of f: the search, not bounded, and its room
// where that is less than need, else need or more (the lists are read for
// the room only until it is enough).
func (s *Scheduler) candidatesFor(t *team, prio int64, submitted time.Time, f *flavorState, v *view, kind searchKind, need GPUs) (vs *victimSearch, room GPUs) {
	room = s.roomFor(t, f, v, 0)
	vs = &s.search
	*vs = victimSearch{prio: prio, reclaim: vs.reclaim[:0], ahead: vs.ahead[:0]}
	l := s.teamVictims(f, v, t)
	vs.own = stream{borrowOnly: &l.borrowOnly, rest: &l.rest, all: true, budget: maxGPUs, reason: byHigherTier}
	room += l.preemptible.Below(prio)
	if kind == kindOwn {
		return vs, room
	}
	reason := byReclaim
	forStarving := kind != kindReclaim
	if forStarving {
		reason, vs.after = byStarving, unixNanos(submitted)
	}
	teams := s.trees[t.q.Root()]
	if len(s.streams) < len(teams) {
		s.streams = make([]stream, len(teams))
	}
	for i, o := range teams {
		if o == t || o.reclaimable(f.id) == 0 {
			continue
		}
		l := s.teamVictims(f, v, o)
		st := &s.streams[i]
		*st = stream{borrowOnly: &l.borrowOnly, rest: &l.rest, reason: reason}
		if forStarving {
			// Only what it may take counts, and the stream yields only
			// that.
			st.starving = vs
			for c := range l.borrowOnly.from(vpos{}) {
				if c.prio > vs.prio || room >= need {
					break
				}
				if vs.laterBorrow(c) {
					room += c.gpus
				}
			}
		} else {
			room += l.borrowOnlyGPUs
		}
		if borrowing(o, f) {
			excess := borrowed(o, f)
			st.all, st.budget = true, excess
			for c := range l.rest.from(vpos{}) {
				if excess <= 0 || (forStarving && c.prio > vs.prio) || room >= need {
					break
				}
				if !forStarving || vs.laterBorrow(c) {
					room += c.gpus
				}
				excess -= c.gpus
			}
		}
		if _, any := st.head(); any {
			vs.reclaim = append(vs.reclaim, st)
		}
	}
	vs.reclaim.init()
	return vs, room
}

// roomFor is the most a workload of team t could have on view v of f were
// every candidate of its search evicted, their GPUs being takeable: the
// nodes' free GPUs and the takeable ones, and the team's available quota and
// the takeable ones (fits checks both). Evicting GPUs raises what a team may
// use by at most as many (quota.Node.Available moves no more than the usage
// it reads: TestAvailableMovesNoMoreThanUsage), so of the free GPUs only as
// many count as its quota has available.
func (s *Scheduler) roomFor(t *team, f *flavorState, v *view, takeable GPUs) GPUs {
	free := v.All.Free
	if s.test != nil && s.test.noQuotaRoom {
		return free + takeable
	}
	if avail := max(0, t.q.Available(f.id)); avail < free {
		free = avail
		if s.test != nil && s.test.quotaRoomCut != nil {
			s.test.quotaRoomCut()
		}
	}
	return free + takeable
}

// boundedFor says whether w's reclaim search on f is a bounded one
// (victimSearch.bounded): its team would pass its nominal were none of its
// own lower tiers evicted.
func boundedFor(w *workload, f *flavorState) bool {
	r := w.team.q.R(f.id)
	return r.Usage+w.GPUs() > r.Nominal
}

// maxGPUs is a budget no stream reaches.
const maxGPUs = GPUs(1) << 62
