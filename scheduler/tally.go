package scheduler

import "github.com/allot-dev/allot/scheduler/internal/index"

// A tally runs a preemption search without evicting anyone from the index:
// it charges each victim tried off its team's quota (O(depth), undone after)
// and counts, per node, the GPUs the victims tried would free, and from them
// the pods of the workload's size the view's listed nodes (or each domain of
// the level it requires) would take. In a busy fleet a search tries hundreds
// of victims for the one or two it keeps, each spread over other nodes; a
// what-if eviction moves every node and domain it frees in every bucket of
// the index (and back), a tally adds to a counter. Its answer is the one the
// what-if search (tryVictims) gives on the same state: the same victims tried
// in the same order, the same fit test (fitsNow's, on the counters), the same
// pruning. Where the nodes name clusters, a workload fits in one cluster
// (route): a tally counts per domain of the level it requires, else per
// cluster, and only in its own cluster when it is pinned to one.
type tally struct {
	s    *Scheduler
	w    *workload
	f    *flavorState
	v    *view
	li   *index.Level // the level w requires (or the clusters'), or nil: any listed nodes
	pin  *index.Group // the cluster w is pinned to, or nil
	gpp  GPUs
	pods int64
	id   uint64
	// fit0: w's pods fit the nodes with nothing evicted (then more freed
	// changes nothing); else n counts the pods the view takes (li nil) or
	// fitting the domains of li that take them all.
	fit0    bool
	n       int64
	fitting int
}

// newTally prepares a tally of w's search on f, or returns nil when its fit
// test is not one a tally can make (a workload pinned to a cluster its view
// does not hold, a level its view does not have).
func (s *Scheduler) newTally(w *workload, f *flavorState) *tally {
	v := s.viewOf(w, f)
	if s.test != nil && s.test.noTally || w.spec.GPUsPerPod <= 0 {
		return nil
	}
	t := &s.searchScratch.tally
	*t = tally{s: s, w: w, f: f, v: v, gpp: w.spec.GPUsPerPod, pods: w.spec.Pods}
	l := w.spec.Require
	if len(v.Clusters) > 0 {
		if l == "" {
			l = ClusterLevel
		}
		if c := w.spec.Cluster; c != "" {
			if t.pin = v.cluster(c); t.pin == nil {
				return nil
			}
		}
	} else if w.spec.Cluster != "" {
		return nil
	}
	if l != "" {
		if t.li = v.Levels[l]; t.li == nil {
			return nil
		}
		t.fit0 = t.li.BestFit(t.gpp, t.pods, t.pin) != nil
	} else {
		t.n = v.All.Usable(t.gpp, t.pods)
		t.fit0 = t.n >= t.pods
	}
	s.searches++
	t.id = s.searches
	return t
}

// run runs the search on the tally (searchVictims) and returns the victims
// kept; it leaves the quotas and the index as it found them.
func (t *tally) run(search *victimSearch) (keep []candidate, ok bool) {
	t.s.tallying = t.id
	defer func() { t.s.tallying = 0 }()
	keep, ok = t.s.searchVictims(t.f, search, t)
	for _, c := range keep {
		t.back(c.w, true)
	}
	return keep, ok
}

// fits is fitsNow on the tally: the quota as charged, the nodes as counted.
func (t *tally) fits() bool {
	if _, ok := t.s.quotaCheck(t.w, t.f); !ok {
		return false
	}
	switch {
	case t.fit0:
		return true
	case t.li != nil:
		return t.fitting > 0
	}
	return t.n >= t.pods
}

// evict tallies x as evicted; back as put back. Once the search is over
// (failed, or done with the victims it keeps) only the quotas need putting
// back: the counts are the search's alone (numbered by its id).
func (t *tally) evict(x *workload) { t.move(x, 1) }
func (t *tally) back(x *workload, over bool) {
	if over {
		chargeQuota(x, x.flavor, 1)
		return
	}
	t.move(x, -1)
}

func (t *tally) move(x *workload, sign GPUs) {
	chargeQuota(x, x.flavor, -sign)
	for _, p := range x.placements {
		nd := p.node
		d := nd.freeFor(sign*p.pods*x.gpp, t.gpp, t.id)
		if t.fit0 || !t.v.lists(t.f, nd) {
			continue
		}
		if d == 0 {
			continue
		}
		if t.li == nil {
			t.n += d
			continue
		}
		i := domainNum(t.li, nd, t.v == t.f.view)
		if i < 0 {
			continue
		}
		dom := &t.li.Doms[i]
		if dom.TalliedOf != t.id {
			if t.pin != nil && dom.G.Cluster != t.pin {
				continue
			}
			// The domain's count with nothing evicted: less than pods,
			// since none fit then (fit0 false).
			dom.Tallied, dom.TalliedOf = dom.G.Usable(t.gpp, t.pods), t.id
		}
		was := dom.Tallied >= t.pods
		dom.Tallied += d
		switch now := dom.Tallied >= t.pods; {
		case now && !was:
			t.fitting++
		case was && !now:
			t.fitting--
		}
	}
}

// freeFor frees g GPUs on n (takes them back, g negative) for the search
// numbered id, and returns how many more pods of gpp GPUs n then takes
// (fewer: negative).
func (n *node) freeFor(g, gpp GPUs, id uint64) int64 {
	if n.freedOf != id {
		n.freed, n.freedOf = 0, id
	}
	before := n.freeAfter() / gpp
	n.freed += g
	return n.freeAfter()/gpp - before
}

// freeAfter is n's free GPUs once what the search numbered freedOf freed
// is gone from it.
func (n *node) freeAfter() GPUs { return max(0, n.capacity-(n.used-n.freed)) }

// freeNow is n's free GPUs, counting what the running tally has evicted.
func (s *Scheduler) freeNow(n *node) GPUs {
	if s.tallying != 0 && n.freedOf == s.tallying {
		return n.freeAfter()
	}
	return n.free()
}
