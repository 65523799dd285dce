package scheduler

import "slices"

// placeOn finds nodes of flavor f for w's pods without changing anything,
// among the nodes whose class w's rules admit: the best-fit domain of the
// required level, or of the preferred level and then each wider one, or the
// flavor as a whole; inside it, level by level, the fullest domain that still
// fits, and there the nodes with the least free GPUs that take a pod, so that
// large domains and large holes stay whole.
func (s *Scheduler) placeOn(w *workload, f *flavorState) ([]placement, *Domain, PendingReason, bool) {
	v := s.viewOf(w, f)
	gpp, pods := w.spec.GPUsPerPod, w.spec.Pods
	if v.empty {
		return nil, nil, PendingReason{Code: ReasonNoMatchingNodes, Flavor: f.name, Requested: w.GPUs(), Cluster: w.spec.Cluster}, false
	}
	if g, clustered := v.route(w); clustered {
		if g == nil {
			return nil, nil, s.clusterReason(w, f, v), false
		}
		if w.spec.Require != "" {
			d := g.dom
			return s.pick(descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
		}
		if d := v.preferredFit(w, g); d != nil {
			dom := d.dom
			return s.pick(descend(d, gpp, pods), gpp, pods), &dom, PendingReason{}, true
		}
		return s.pick(descend(g, gpp, pods), gpp, pods), nil, PendingReason{}, true
	}
	if lvl := w.spec.Require; lvl != "" {
		li := v.levels[lvl]
		var g *group
		if li != nil {
			g = li.bestFit(gpp, pods, nil)
		}
		if g == nil {
			r := PendingReason{Code: ReasonNoTopologyDomain, Flavor: f.name, Level: lvl, Requested: w.GPUs()}
			if li != nil {
				r.Available, r.Limit = li.largestFree(), li.maxCap
			}
			return nil, nil, r, false
		}
		d := g.dom
		return s.pick(descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
	}
	if g := v.preferredFit(w, nil); g != nil {
		d := g.dom
		return s.pick(descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
	}
	if !v.all.fits(gpp, pods) {
		return nil, nil, s.nodeReason(w, f, v), false
	}
	if len(v.order) > 0 && !s.opts.NodeLevelFit {
		if g := v.levels[v.order[0]].fullestFit(gpp, pods); g != nil {
			return s.pick(descend(g, gpp, pods), gpp, pods), nil, PendingReason{}, true
		}
	}
	return s.pick(v.all, gpp, pods), nil, PendingReason{}, true
}

// preferredFit is the best-fit domain for w of its preferred level, else of
// each wider one up to (not including) the cluster, inside within when the
// nodes name clusters; nil when w prefers none or none fits.
func (v *view) preferredFit(w *workload, within *group) *group {
	i := slices.Index(v.order, w.spec.Prefer)
	if w.spec.Prefer == "" || i < 0 {
		return nil
	}
	for ; i >= 0 && v.order[i] != ClusterLevel; i-- {
		if d := v.levels[v.order[i]].bestFit(w.spec.GPUsPerPod, w.spec.Pods, within); d != nil {
			return d
		}
	}
	return nil
}

// descend goes from domain g down the levels, each time into the fullest
// narrower domain that still fits the pods (see fuller), and returns the
// narrowest one reached.
func descend(g *group, gpp GPUs, pods int64) *group {
	need := gpp * pods
	for {
		var best *group
		for _, c := range g.children {
			if c.free >= need && (best == nil || fuller(c, best)) && c.fits(gpp, pods) {
				best = c
			}
		}
		if best == nil {
			return g
		}
		g = best
	}
}

// fuller says whether domain a is fuller than b: a domain already in use
// before a whole one (so whole domains stay whole, whatever their size), then
// the one with the least free GPUs.
func fuller(a, b *group) bool {
	if wa, wb := a.free == a.capacity, b.free == b.capacity; wa != wb {
		return wb
	}
	return a.free < b.free
}

// nodeReason explains why w does not fit the listed nodes of f.
func (s *Scheduler) nodeReason(w *workload, f *flavorState, v *view) PendingReason {
	gpp := w.spec.GPUsPerPod
	r := PendingReason{Code: ReasonInsufficientNodes, Flavor: f.name, Requested: w.GPUs(), Limit: v.all.capacity, Held: f.held}
	r.Available = usable(v.all.buckets, gpp, 1<<62) * gpp
	if f.res != nil && f.res != w {
		// Would it fit on the reserved nodes too?
		n := r.Available / gpp
		for _, rn := range f.res.reserved {
			if !rn.spec.Unhealthy && (v == f.view || v.admitsClass(f, rn.spec.Class)) {
				n += rn.free() / gpp
			}
		}
		if n >= w.spec.Pods {
			r.Code, r.Holder = ReasonReserved, f.res.spec.ID
			return r
		}
	}
	if v.start != nil {
		var n int64
		for k := gpp; k < GPUs(len(v.start)); k++ {
			n += int64(v.start[k]) * (k / gpp)
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
		for _, m := range g.buckets[k] {
			take := min(k/gpp, pods)
			out = append(out, placement{node: s.nodes[m.id], pods: take})
			pods -= take
			if pods == 0 {
				break
			}
		}
	}
	return out
}
