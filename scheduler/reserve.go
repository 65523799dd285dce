package scheduler

import "github.com/allot-dev/allot/scheduler/internal/index"

// A gang that has waited ReserveAfter and still does not fit gets the nodes it
// will use reserved: they leave the placement index, so nothing new lands there,
// and as their work ends they drain toward it. The scheduler does not know when
// work ends, so it reserves the nodes with the most free GPUs now. One gang per
// flavor holds a reservation at a time: the first in cycle order, until it
// starts. Its nodes stay the same from cycle to cycle while they can still
// hold it (they only drain), and the quota their drained GPUs stand for is
// held too: no workload that would borrow it may take it (takesHeadroom).

// reserve reserves nodes for w on the first flavor whose quota it fits: prev,
// the nodes it held until now, while they still can hold it.
func (s *Scheduler) reserve(w *workload, prev []*node) bool {
	for _, f := range w.cands {
		if f.res != nil && f.res != w {
			continue
		}
		if _, ok := s.quotaCheck(w, f); !ok {
			continue
		}
		nodes := prev
		if !s.stillReservable(w, f, prev) {
			nodes = s.chooseReserve(w, f)
		}
		if nodes == nil {
			continue
		}
		var free, capacity GPUs
		for _, n := range nodes {
			s.unlist(n)
			n.reservedFor = w
			free += n.free()
			capacity += n.capacity
		}
		w.reserved, f.res = nodes, w
		w.reason = PendingReason{Code: ReasonWaitingForReservation, Flavor: f.name, Requested: w.GPUs(), Available: free, Limit: capacity}
		w.team.queue.held(w)
		return true
	}
	return false
}

// stillReservable says whether nodes can still be reserved for w: all of
// flavor f, healthy, listed (reserved for no other), enough once drained, and
// in one domain of the level w requires.
func (s *Scheduler) stillReservable(w *workload, f *flavorState, nodes []*node) bool {
	if len(nodes) == 0 {
		return false
	}
	var pods int64
	for _, n := range nodes {
		if n.flavor != f || n.spec.Unhealthy || !n.Listed || n.spec.Cluster != nodes[0].spec.Cluster {
			return false
		}
		pods += n.capacity / w.spec.GPUsPerPod
	}
	if w.spec.Cluster != "" && nodes[0].spec.Cluster != w.spec.Cluster {
		return false
	}
	if l := w.spec.Require; l != "" {
		d, ok := domainAt(nodes[0], l)
		for _, n := range nodes[1:] {
			if e, _ := domainAt(n, l); !ok || e != d {
				return false
			}
		}
	}
	return pods >= w.spec.Pods
}

// domainAt is n's domain of the level, if it has one.
func domainAt(n *node, level string) (Domain, bool) {
	for _, d := range n.spec.Domains {
		if d.Level == level {
			return d, true
		}
	}
	return Domain{}, false
}

// drainedFree is the GPUs free now on nodes, in whole pods of gpp GPUs (with
// what a running tally evicts counted as gone).
func (s *Scheduler) drainedFree(nodes []*node, gpp GPUs) GPUs {
	var free GPUs
	for _, n := range nodes {
		free += s.freeNow(n) / gpp * gpp
	}
	return free
}

// unreserve gives w's reserved nodes back to the index.
func (s *Scheduler) unreserve(w *workload) {
	if w.reserved == nil {
		return
	}
	for _, n := range w.reserved {
		n.reservedFor = nil
		if !n.spec.Unhealthy {
			s.list(n)
		}
	}
	f := w.reserved[0].flavor
	f.res = nil
	s.changed(f) // another workload may reserve on f now
	w.reserved = nil
	w.team.queue.held(w)
	s.dirty = true
}

// chooseReserve picks the nodes w would drain toward on f, honouring its
// topology: the domain with the most free GPUs that can ever hold it, and in it
// the nodes with the most free GPUs.
func (s *Scheduler) chooseReserve(w *workload, f *flavorState) []*node {
	v := s.viewOf(w, f)
	if v.empty {
		return nil
	}
	gpp, pods := w.spec.GPUsPerPod, w.spec.Pods
	var levels []string
	switch {
	case len(v.Clusters) == 0 && w.spec.Cluster != "":
		return nil
	case w.spec.Require != "":
		levels = []string{w.spec.Require}
	case w.spec.Prefer != "":
		for i := len(v.Order) - 1; i >= 0; i-- {
			if v.Order[i] == w.spec.Prefer {
				for j := i; j >= 0; j-- {
					levels = append(levels, v.Order[j])
				}
			}
		}
	}
	if w.spec.Require == "" && len(v.Clusters) > 0 && (len(levels) == 0 || levels[len(levels)-1] != ClusterLevel) {
		// Held to one cluster: its cluster is the widest domain it may use.
		levels = append(levels, ClusterLevel)
	}
	for _, lvl := range levels {
		li := v.Levels[lvl]
		if li == nil {
			continue
		}
		if li.MaxCap < gpp*pods {
			continue // no domain of the level is ever large enough
		}
		var found []*node
		li.MostFreeFirst(func(g *index.Group) bool {
			if g.Capacity >= gpp*pods && inCluster(g, w.spec.Cluster) {
				found = s.mostFree(g, gpp, pods)
			}
			return found == nil
		})
		if found != nil {
			return found
		}
	}
	if w.spec.Require != "" || len(v.Clusters) > 0 {
		return nil
	}
	return s.mostFree(v.All, gpp, pods)
}

// mostFree returns the nodes of g with the most free GPUs that can hold pods pods
// of gpp GPUs once drained, or nil if g cannot.
func (s *Scheduler) mostFree(g *index.Group, gpp GPUs, pods int64) []*node {
	var out []*node
	for k := g.Buckets() - 1; k >= 0 && pods > 0; k-- {
		for _, m := range g.Bucket(k) {
			n := s.nodes[m.ID]
			if c := n.capacity / gpp; c > 0 {
				out = append(out, n)
				pods -= c
				if pods <= 0 {
					break
				}
			}
		}
	}
	if pods > 0 {
		return nil
	}
	return out
}
