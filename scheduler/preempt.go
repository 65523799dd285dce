package scheduler

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/allot-dev/allot/scheduler/internal/index"
)

// candidate is a running workload as the victim lists hold it: what a
// search reads of each candidate it passes, copied, since the lists are
// read in order while the workloads are spread over the heap; 64 bytes, one
// cache line.
type candidate struct {
	w *workload
	// prio, late, at and seq order the candidates (see victimOrder).
	prio, at, seq int64
	// gpus is w's size.
	gpus GPUs
	// submitted is w's submission (unixNanos): a starving workload's
	// search compares it with its own for every candidate it passes.
	submitted int64
	// home is, per depth of its flavor's own view, the number of the one
	// domain all w's pods run in (-1: none or several): domainShort reads
	// it, not w's nodes, where the depth names one level.
	home [homeDepths]int32
	late bool
	// borrowOnly and preemptible copy w's tier.
	borrowOnly, preemptible bool
	// reason is the rule a search takes it by (none in the lists).
	reason why
}

// searchScratch is what preemption searches keep: one runs at a time.
type searchScratch struct {
	// searches numbers the bounds of preemption searches (domainShort,
	// domainPodShort, podShort) and the tallies.
	searches uint64
	// searching: a preemption search is trying victims; the victim lists
	// stay as they are meanwhile.
	searching bool
	// flipSeen is, for the search running, the first time after now that
	// the order of a victim list it read changes (memo.go).
	flipSeen time.Time
	// gens numbers the flavors' generations (memo.go).
	gens uint64
	// tallying numbers the tally running, if any (tally.go).
	tallying uint64
	// search and streams are candidatesOf's (a busy fleet runs hundreds of
	// thousands of searches, each a stream per borrowing team: garbage to
	// collect were they allocated anew); chosen is searchVictims' list of
	// the candidates tried.
	search  victimSearch
	streams []stream
	chosen  []candidate
	// tally is newTally's: one search runs at a time.
	tally tally
	// touched are the domains domainShort counted candidates in.
	touched []int32
	// journal holds what a search's what-if evictions changed of the nodes
	// (journal.go); the index keeps its own.
	journal []nodeOp
}

// preempt looks for the smallest set of running workloads whose eviction lets w
// fit on flavor f, by the rules in order: a team under its nominal quota reclaims
// what other teams of its cohort borrow (whatever their tier, borrowOnly tiers
// always counting as borrowed); within a team a higher tier preempts a lower,
// preemptible one. Both in one decision: a team may reclaim when, with the
// evictions of its own lower tiers the same decision makes, it ends within its
// nominal. A borrowing workload never preempts another team's workload
// running inside that team's nominal quota. Victims are taken lowest tier and most
// recently started first, then the set is pruned of any victim it does not need.
// Nothing is evicted when w would still not fit.
func (s *Scheduler) preempt(w *workload, f *flavorState, res *Results) bool {
	v := s.viewOf(w, f)
	if v.empty || v.All.Capacity < w.GPUs() {
		return false
	}
	if !s.worthSearching(w, f, v) {
		return false
	}
	again := s.failedBefore(w, f)
	if again && (s.test == nil || s.test.memoCheck == nil) {
		return false
	}
	// A failed search leaves everything as it was, its generation too.
	gen, grown := f.gen, f.grown
	s.flipSeen = time.Time{}
	keep, evicted, bounded, ok := s.findVictims(w, f, v, false)
	if !ok && bounded {
		// A bounded search evicts its reclaim victims first, so fails
		// where only its own victims fit (the team borrowing) were their
		// sum on f more than it may evict on w's view; and a starving
		// workload may take back later borrowed work above its nominal.
		keep, evicted, _, ok = s.findVictims(w, f, v, true)
	}
	if again {
		s.test.memoCheck(w, ok)
	}
	if !ok {
		f.gen, f.grown = gen, grown
		s.rememberFail(w, f, gen)
		return false
	}
	// Its victims are released (some while searching, unseen by the
	// refusals): what others' bounds find may grow.
	for _, c := range keep {
		s.freed(c.w, f)
	}
	pl, dom, _, ok := s.placeOn(w, f)
	if !ok {
		// Unreachable (the fit test said it fits); were it reached, the
		// tallied victims go back as they were.
		for _, e := range slices.Backward(evicted) {
			s.rebind(e)
		}
		return false
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
		res.Preempted = append(res.Preempted, Preemption{Victim: c.w.spec.ID, By: w.spec.ID, Reason: c.reason.preempt()})
	}
	s.admit(w, f, pl, dom, victims, res)
	s.epoch++
	return true
}

// findVictims runs w's search on f (candidates, with starving) and returns
// the victims kept, still evicted: what-if (evicted, to rebind should w not
// be placed after all) or from their lists (tryVictims). bounded says the
// search was a bounded one (victimSearch.bounded).
func (s *Scheduler) findVictims(w *workload, f *flavorState, v *view, starving bool) (keep []candidate, evicted []whatIf, bounded, ok bool) {
	kind := s.kindOf(w, f, starving)
	key := boundKey{v: v, t: w.team, prio: w.tier.spec.Priority, kind: kind}
	var after int64
	if kind == kindStarving {
		after = unixNanos(w.spec.Submitted)
	}
	b := s.boundsOf(f)
	known := b.refuses(key, after, w, f.gen, s.now)
	if known && (s.test == nil || s.test.boundCheck == nil) {
		return nil, nil, kind == kindReclaim && boundedFor(w, f), false
	}
	refused := func(r refusal) (keep []candidate, evicted []whatIf, bounded, ok bool) {
		if known {
			s.test.boundCheck(w, true)
		}
		r.after, r.upto = after, math.MaxInt64
		b.refused(key, r, s.flipSeen)
		return nil, nil, kind == kindReclaim && boundedFor(w, f), false
	}
	search, room, ok := s.candidatesOf(w, f, kind)
	if !ok {
		return refused(refusal{room: room, gen: f.gen, at: s.now})
	}
	if boundedInPods(w) {
		if short := s.podShort(f, v, w.spec.GPUsPerPod, w.spec.Pods, search); short > 0 {
			// Not enough nodes could take its pods were every candidate
			// evicted: the GPUs are there in all, on the wrong nodes.
			return refused(refusal{gpp: w.spec.GPUsPerPod, pods: w.spec.Pods, short: short})
		}
	}
	if w.spec.Require != "" {
		if short := s.domainShort(f, v, w.spec.Require, w.GPUs(), search); short > 0 {
			// A gang held to one domain that no domain could hold with
			// every candidate there evicted: no search can make it fit.
			return refused(refusal{level: w.spec.Require, need: w.GPUs(), short: short})
		}
		if w.spec.GPUsPerPod > 1 {
			if short := s.domainPodShort(f, v, w.spec.Require, w.spec.GPUsPerPod, w.spec.Pods, search); short > 0 {
				// The GPUs are there in one domain, on the wrong nodes.
				return refused(refusal{level: w.spec.Require, gpp: w.spec.GPUsPerPod, pods: w.spec.Pods, short: short})
			}
		}
	}
	if known {
		s.test.boundCheck(w, false)
	}
	bounded = search.bounded
	if s.test != nil && s.test.searched != nil {
		s.test.searched(false)
	}
	switch t := s.newTally(w, f); {
	case t == nil:
		keep, ok = s.tryVictims(w, f, search)
	case s.test != nil && s.test.crossTally != nil:
		tallied, tok := t.run(search)
		check := s.test.crossTally(w, tallied, tok)
		again, _, _ := s.candidatesOf(w, f, kind)
		keep, ok = s.tryVictims(w, f, again)
		check(keep, ok)
	default:
		if keep, ok = t.run(search); ok {
			for _, c := range slices.Backward(keep) {
				evicted = append(evicted, s.evictWhatIf(c.w))
			}
		}
	}
	if !ok && s.test != nil && s.test.searched != nil {
		s.test.searched(true)
	}
	return keep, evicted, bounded, ok
}

// boundedInPods says whether w's search is bounded by the pods that could take
// it (podShort): a pod of one GPU is bounded by the GPUs alone.
func boundedInPods(w *workload) bool { return w.spec.Pods > 1 || w.spec.GPUsPerPod > 1 }

// trial is how a search tries its victims: evicted from the index what-if
// (whatIfTrial), or tallied (tally.go).
type trial interface {
	evict(x *workload)
	// back puts x back; failed: the search found nothing and puts back
	// every victim it tried, the last first.
	back(x *workload, failed bool)
	fits() bool
}

// searchVictims tries the search's candidates in order until the workload
// fits (tr.fits), then puts back each victim, most important first, that it
// fits without. It returns the victims kept, still evicted by tr; when the
// workload does not fit with every candidate evicted, it puts them all back
// and returns false.
func (s *Scheduler) searchVictims(f *flavorState, search *victimSearch, tr trial) (keep []candidate, ok bool) {
	// The candidates tried: hundreds in a busy fleet, for the one or two
	// kept; the list is the scheduler's, reused from search to search.
	chosen := s.chosen[:0]
	defer func() {
		clear(chosen)
		s.chosen = chosen[:0]
	}()
	fits := false
	for c, more := search.next(); more && !fits; c, more = search.next() {
		if c.reason != byHigherTier && !c.borrowOnly && !borrowing(c.w.team, f) {
			continue
		}
		if !search.takes(&c) {
			continue
		}
		search.evict(tr, &c)
		chosen = append(chosen, c)
		fits = search.fits(tr)
	}
	if !fits {
		for i := range slices.Backward(chosen) {
			search.back(tr, &chosen[i], true)
		}
		return nil, false
	}
	for i := len(chosen) - 1; i >= 0; i-- {
		search.back(tr, &chosen[i], false)
		if search.fits(tr) {
			continue
		}
		search.evict(tr, &chosen[i])
		keep = append(keep, chosen[i])
	}
	slices.Reverse(keep)
	if search.bounded {
		keep = search.prune(tr, keep)
	}
	return keep, true
}

// prune puts back, until none can be, each victim of keep (evicted by tr)
// the workload fits without. One pass (searchVictims') is enough where
// fewer victims never fit better; in a bounded search they may: once its
// last reclaim victim is put back, the team may borrow, and own victims
// kept only to bring it within its nominal are no longer needed.
func (vs *victimSearch) prune(tr trial, keep []candidate) []candidate {
	for again := true; again; {
		again = false
		for i := len(keep) - 1; i >= 0; i-- {
			vs.back(tr, &keep[i], false)
			if vs.fits(tr) {
				keep, again = slices.Delete(keep, i, i+1), true
				continue
			}
			vs.evict(tr, &keep[i])
		}
	}
	return keep
}

// whatIfTrial evicts the victims it tries from the index and binds them back;
// a failed search undoes the index's journal, so that it leaves no trace.
type whatIfTrial struct {
	s        *Scheduler
	w        *workload
	f        *flavorState
	restores map[*workload]whatIf
}

func (t *whatIfTrial) evict(x *workload) { t.restores[x] = t.s.evictWhatIf(x) }
func (t *whatIfTrial) fits() bool        { return t.s.fitsNow(t.w, t.f) }
func (t *whatIfTrial) back(x *workload, failed bool) {
	if failed {
		t.s.undo(t.restores[x])
		return
	}
	t.s.rebind(t.restores[x])
}

// tryVictims runs w's search on f by evicting its victims what-if. It
// returns the victims kept, evicted and out of their lists. Tallies
// (tally.go) give its answer for most searches without evicting.
func (s *Scheduler) tryVictims(w *workload, f *flavorState, search *victimSearch) (keep []candidate, ok bool) {
	// The victim lists stay as they are while victims are tried (and put
	// back); what is evicted for good leaves them after. The index and the
	// nodes keep journals meanwhile (journal.go).
	s.beginSearch()
	defer s.endSearch()
	keep, ok = s.searchVictims(f, search, &whatIfTrial{s: s, w: w, f: f, restores: map[*workload]whatIf{}})
	if !ok {
		return nil, false
	}
	s.endSearch()
	for _, c := range keep {
		s.unlistVictim(c.w)
	}
	return keep, true
}

// domainRoom says whether some domain of the level on view v of f has need
// GPUs free, or would were every candidate of the search evicted: one with
// enough free GPUs already (quota may be what it lacks), or whose free GPUs
// and its candidates' GPUs there are enough. It reads the candidates in
// place (the search yields them all after, in order).
func (s *Scheduler) domainRoom(f *flavorState, v *view, level string, need GPUs, search *victimSearch) bool {
	return s.domainShort(f, v, level, need, search) <= 0
}

// domainShort is domainRoom's answer as the GPUs the best domain lacks; 0
// or less: room.
func (s *Scheduler) domainShort(f *flavorState, v *view, level string, need GPUs, search *victimSearch) GPUs {
	li := v.Levels[level]
	if li == nil {
		return need
	}
	most := li.LargestFree()
	if most >= need {
		return 0
	}
	s.searches++
	enough := false
	touched := s.touched[:0]
	own := v == f.view
	depth := -1 // the depth of the candidates' homes, where it names li
	if own && !v.DepthsVary && li.Depth < homeDepths {
		depth = li.Depth
	}
	add := func(i int32, g GPUs) bool {
		d := &li.Doms[i]
		if d.RoomOf != s.searches {
			d.Room, d.RoomOf = 0, s.searches
			touched = append(touched, i)
		}
		d.Room += g
		// No domain has more than most free: the domain's own group
		// (spread over the heap) is read only when that could be
		// enough.
		return d.Room+most >= need && d.G.Free+d.Room >= need
	}
	search.each(func(c *candidate) bool {
		if depth >= 0 && c.home[depth] >= 0 {
			enough = add(c.home[depth], c.gpus)
			return !enough
		}
		for _, p := range c.w.placements {
			if i := domainNum(li, p.node, own); i >= 0 && add(i, p.pods*c.w.gpp) {
				enough = true
				return false
			}
		}
		return true
	})
	s.touched = touched
	if enough {
		return 0
	}
	best := most
	for _, i := range touched {
		d := &li.Doms[i]
		best = max(best, d.G.Free+d.Room)
	}
	return need - best
}

// domainPodShort is domainShort in pods of gpp GPUs, counted node by node
// as placement counts them: the pods the best domain of the level on view v
// of f lacks to take pods of them were every candidate of the search
// evicted; 0 or less: room. Where gpp is more than one, a domain may have
// the GPUs but not on nodes that take whole pods.
func (s *Scheduler) domainPodShort(f *flavorState, v *view, level string, gpp GPUs, pods int64, search *victimSearch) int64 {
	li := v.Levels[level]
	if li == nil {
		return pods
	}
	if li.BestFit(gpp, pods, nil) != nil {
		return 0
	}
	s.searches++
	id := s.searches
	own := v == f.view
	best := int64(0)
	search.each(func(c *candidate) bool {
		for _, p := range c.w.placements {
			nd := p.node
			if !v.lists(f, nd) {
				continue
			}
			i := domainNum(li, nd, own)
			if i < 0 {
				continue
			}
			more := nd.freeFor(p.pods*c.w.gpp, gpp, id)
			d := &li.Doms[i]
			if d.TalliedOf != id {
				d.Tallied, d.TalliedOf = d.G.Usable(gpp, pods), id
			}
			d.Tallied += more
			best = max(best, d.Tallied)
			if best >= pods {
				return false
			}
		}
		return true
	})
	if best < pods {
		// What it lacks is from the best domain, touched by the
		// candidates or not: the refusal's shortfall is that domain's.
		for i := range li.Doms {
			if d := &li.Doms[i]; d.TalliedOf != id {
				best = max(best, d.G.Usable(gpp, pods))
			}
		}
	}
	return pods - best
}

// podRoom says whether the listed nodes of view v of f could take pods pods
// of gpp GPUs were every candidate of the search evicted: the pods that fit
// now, and those each node the candidates run on would take once they are
// gone. A gang of whole nodes whose view has enough free GPUs, but not
// enough whole free nodes, would otherwise evict every candidate one by one
// before it gave up. Reserved and unhealthy nodes (not listed) count as they
// would for placement: not at all.
func (s *Scheduler) podRoom(f *flavorState, v *view, gpp GPUs, pods int64, search *victimSearch) bool {
	return s.podShort(f, v, gpp, pods, search) <= 0
}

// podShort is podRoom's answer as the pods lacking; 0 or less: room.
func (s *Scheduler) podShort(f *flavorState, v *view, gpp GPUs, pods int64, search *victimSearch) int64 {
	n := v.All.Usable(gpp, pods)
	if n >= pods {
		return 0
	}
	s.searches++
	search.each(func(c *candidate) bool {
		for _, p := range c.w.placements {
			nd := p.node
			if !v.lists(f, nd) {
				continue
			}
			if n += nd.freeFor(p.pods*c.w.gpp, gpp, s.searches); n >= pods {
				return false
			}
		}
		return true
	})
	return pods - n
}

// domainNum is the number of n's domain at level li (domainOf), or -1. On
// the flavor's own view it reads the node's own copy of the number, checked
// against the level's dense array, without reading the domain's group.
func domainNum(li *index.Level, n *node, own bool) int32 {
	if i := 1 + li.Depth; own && i < int(n.Base) && i < len(n.Dnum) {
		if k := n.Dnum[i]; int(k) < len(li.Doms) && li.Doms[k].G == n.Groups[i] {
			return k
		}
	}
	if g := domainOf(n, own, li); g != nil {
		return g.Num
	}
	return -1
}

// domainOf is n's domain at level li: on the flavor's own view (own) its
// group at the level's depth, else by name.
func domainOf(n *node, own bool, li *index.Level) *index.Group {
	if i := 1 + li.Depth; own && i < int(n.Base) && n.Groups[i].Level == li {
		return n.Groups[i]
	}
	if li.Name == ClusterLevel {
		return li.Domains[n.spec.Cluster]
	}
	for _, d := range n.spec.Domains {
		if d.Level == li.Name {
			return li.Domains[index.Key(n.spec.Cluster, index.Domain(d))]
		}
	}
	return nil
}

// fitsNow says whether w fits flavor f's quota and nodes as they are.
func (s *Scheduler) fitsNow(w *workload, f *flavorState) bool {
	if _, ok := s.quotaCheck(w, f); !ok {
		return false
	}
	v := s.viewOf(w, f)
	if v.empty || v.All.Free < w.GPUs() {
		return false
	}
	// As placeOn would find: a domain of the required level (in one cluster,
	// when the nodes name clusters), else any room (a preferred level only
	// orders the search).
	if g, clustered := v.route(w); clustered {
		return g != nil
	}
	if l := w.spec.Require; l != "" {
		li := v.Levels[l]
		return li != nil && li.BestFit(w.spec.GPUsPerPod, w.spec.Pods, nil) != nil
	}
	return v.All.Fits(w.spec.GPUsPerPod, w.spec.Pods)
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

// candidate is running x as the victim lists keep it (taken by no rule
// yet: a stream's rule is the search's).
func (s *Scheduler) candidate(x *workload) candidate {
	return candidateOf(x, s.justAdmittedGang(x))
}

// candidateOf is x as a candidate; late says it goes last in its tier.
func candidateOf(x *workload, late bool) candidate {
	return candidate{
		w: x, prio: x.tier.spec.Priority, late: late,
		borrowOnly: x.tier.spec.BorrowOnly, preemptible: x.tier.spec.Preemptible,
		at: x.admittedAt.UnixNano(), seq: x.seq, gpus: x.GPUs(), submitted: unixNanos(x.spec.Submitted),
		home: homeOf(x),
	}
}

// homeDepths is how many depths of the own view a candidate's home covers,
// widest first: as many as a node keeps the domain numbers of (Node.Dnum).
const homeDepths = 3

// homeOf is x's candidate's home: the domain of each depth of the own view
// that holds all its pods.
func homeOf(x *workload) [homeDepths]int32 {
	var h [homeDepths]int32
	for i := range h {
		h[i] = -1
	}
	for j, p := range x.placements {
		n := p.node
		for i := range h {
			k := int32(-1)
			if 1+i < int(n.Base) && 1+i < len(n.Dnum) {
				k = n.Dnum[1+i]
			}
			if j == 0 {
				h[i] = k
			} else if h[i] != k {
				h[i] = -1
			}
		}
	}
	return h
}

// unixNanos is t in nanoseconds since 1970, held to what an int64 holds
// (a submission time may come from anywhere), so that it orders as t does.
func unixNanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var minNanos, maxNanos = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// drainedGrace is how long a gang admitted on the nodes drained for it is
// reclaimed after every other victim of its tier.
const drainedGrace = 4 * time.Hour

// justAdmittedGang says whether x is a gang of several pods admitted on the
// nodes reserved (drained) for it less than drainedGrace ago: what it waited
// for is not the first thing taken back.
func (s *Scheduler) justAdmittedGang(x *workload) bool {
	return x.spec.Pods > 1 && x.drained && s.now.Sub(x.admittedAt) < drainedGrace
}

// whatIf is a workload a search evicted what-if, and what putting it back
// needs.
type whatIf struct {
	w                         *workload
	mark                      mark
	started, dirty, unstarted bool
}

// evictWhatIf releases x, to be put back by undo or rebind.
func (s *Scheduler) evictWhatIf(x *workload) whatIf {
	_, unstarted := s.unstarted[x]
	e := whatIf{w: x, mark: s.mark(), started: x.started, dirty: s.dirty, unstarted: unstarted}
	s.release(x)
	return e
}

// undo puts e back exactly as it was, the order of the index included, by
// undoing the journal since its eviction: it must be the last eviction of
// the search not yet put back.
func (s *Scheduler) undo(e whatIf) {
	x := e.w
	s.rollback(e.mark)
	x.state = stateAdmitted
	s.charge(x, x.flavor, 1)
	x.team.running[x] = struct{}{}
	s.restoreFlags(e)
}

// rebind puts e back by binding it again: its nodes' sums and the quotas as
// they were, not the order of the nodes in the index.
func (s *Scheduler) rebind(e whatIf) {
	s.bind(e.w, e.w.flavor, e.w.placements)
	s.restoreFlags(e)
}

func (s *Scheduler) restoreFlags(e whatIf) {
	e.w.started, s.dirty = e.started, e.dirty
	if e.unstarted {
		s.unstarted[e.w] = struct{}{}
	}
}
