package scheduler

import "slices"

// placeOn finds nodes of flavor f for w's pods without changing anything: the
// best-fit domain of the required level, or of the preferred level and then each
// wider one, or the flavor as a whole; inside it, the nodes with the least free
// GPUs that still take a pod, so large holes stay whole.
func (s *Scheduler) placeOn(w *workload, f *flavorState) ([]placement, *Domain, PendingReason, bool) {
	gpp, pods := w.spec.GPUsPerPod, w.spec.Pods
	if lvl := w.spec.Require; lvl != "" {
		li := f.levels[lvl]
		var g *group
		if li != nil {
			g = li.bestFit(gpp, pods)
		}
		if g == nil {
			r := PendingReason{Code: ReasonNoTopologyDomain, Flavor: f.name, Level: lvl, Requested: w.GPUs()}
			if li != nil {
				r.Available, r.Limit = li.largestFree(), li.maxCap
			}
			return nil, nil, r, false
		}
		d := g.dom
		return s.pick(g, gpp, pods), &d, PendingReason{}, true
	}
	if lvl := w.spec.Prefer; lvl != "" {
		if i := slices.Index(f.order, lvl); i >= 0 {
			for ; i >= 0; i-- {
				if g := f.levels[f.order[i]].bestFit(gpp, pods); g != nil {
					d := g.dom
					return s.pick(g, gpp, pods), &d, PendingReason{}, true
				}
			}
		}
	}
	if f.all.fits(gpp, pods) {
		return s.pick(f.all, gpp, pods), nil, PendingReason{}, true
	}
	return nil, nil, s.nodeReason(w, f), false
}

// nodeReason explains why w does not fit the listed nodes of f.
func (s *Scheduler) nodeReason(w *workload, f *flavorState) PendingReason {
	gpp := w.spec.GPUsPerPod
	r := PendingReason{Code: ReasonInsufficientNodes, Flavor: f.name, Requested: w.GPUs(), Limit: f.all.capacity, Held: f.held}
	r.Available = usable(f.all.buckets, gpp, 1<<62) * gpp
	if f.res != nil && f.res != w {
		// Would it fit on the reserved nodes too?
		n := r.Available / gpp
		for _, rn := range f.res.reserved {
			if !rn.spec.Unhealthy {
				n += rn.free() / gpp
			}
		}
		if n >= w.spec.Pods {
			r.Code, r.Holder = ReasonReserved, f.res.spec.ID
			return r
		}
	}
	if f.start != nil {
		var n int64
		for k := gpp; k < GPUs(len(f.start)); k++ {
			n += int64(f.start[k]) * (k / gpp)
		}
		if n >= w.spec.Pods {
			r.Code = ReasonBehindHigherTier
		}
	}
	return r
}

// pick chooses the nodes of g for pods pods of gpp GPUs, least free first. The
// group must fit them.
func (s *Scheduler) pick(g *group, gpp GPUs, pods int64) []placement {
	var out []placement
	for k := gpp; k < GPUs(len(g.buckets)) && pods > 0; k++ {
		for _, id := range g.buckets[k] {
			take := min(k/gpp, pods)
			out = append(out, placement{node: s.nodes[id], pods: take})
			pods -= take
			if pods == 0 {
				break
			}
		}
	}
	return out
}
