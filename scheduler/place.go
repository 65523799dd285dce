package scheduler

import (
	"slices"

	"github.com/allot-dev/allot/scheduler/internal/index"
)

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
			d := Domain(g.Dom)
			return s.pick(index.Descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
		}
		if d := v.preferredFit(w, g); d != nil {
			dom := Domain(d.Dom)
			return s.pick(index.Descend(d, gpp, pods), gpp, pods), &dom, PendingReason{}, true
		}
		return s.pick(index.Descend(g, gpp, pods), gpp, pods), nil, PendingReason{}, true
	}
	if lvl := w.spec.Require; lvl != "" {
		li := v.Levels[lvl]
		var g *index.Group
		if li != nil {
			g = li.BestFit(gpp, pods, nil)
		}
		if g == nil {
			r := PendingReason{Code: ReasonNoTopologyDomain, Flavor: f.name, Level: lvl, Requested: w.GPUs()}
			if li != nil {
				r.Available, r.Limit = li.LargestFree(), li.MaxCap
			}
			return nil, nil, r, false
		}
		d := Domain(g.Dom)
		return s.pick(index.Descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
	}
	if g := v.preferredFit(w, nil); g != nil {
		d := Domain(g.Dom)
		return s.pick(index.Descend(g, gpp, pods), gpp, pods), &d, PendingReason{}, true
	}
	if !v.All.Fits(gpp, pods) {
		return nil, nil, s.nodeReason(w, f, v), false
	}
	if len(v.Order) > 0 && !s.opts.NodeLevelFit {
		if g := v.Levels[v.Order[0]].FullestFit(gpp, pods); g != nil {
			return s.pick(index.Descend(g, gpp, pods), gpp, pods), nil, PendingReason{}, true
		}
	}
	return s.pick(v.All, gpp, pods), nil, PendingReason{}, true
}

// preferredFit is the best-fit domain for w of its preferred level, else of
// each wider one up to (not including) the cluster, inside within when the
// nodes name clusters; nil when w prefers none or none fits.
func (v *view) preferredFit(w *workload, within *index.Group) *index.Group {
	i := slices.Index(v.Order, w.spec.Prefer)
	if w.spec.Prefer == "" || i < 0 {
		return nil
	}
	for ; i >= 0 && v.Order[i] != ClusterLevel; i-- {
		if d := v.Levels[v.Order[i]].BestFit(w.spec.GPUsPerPod, w.spec.Pods, within); d != nil {
			return d
		}
	}
	return nil
}

// nodeReason explains why w does not fit the listed nodes of f.
func (s *Scheduler) nodeReason(w *workload, f *flavorState, v *view) PendingReason {
	gpp := w.spec.GPUsPerPod
	r := PendingReason{Code: ReasonInsufficientNodes, Flavor: f.name, Requested: w.GPUs(), Limit: v.All.Capacity, Held: f.held}
	r.Available = v.All.Usable(gpp, 1<<62) * gpp
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
func (s *Scheduler) pick(g *index.Group, gpp GPUs, pods int64) []placement {
	var out []placement
	for k := gpp; k < GPUs(g.Buckets()) && pods > 0; k++ {
		for _, m := range g.Bucket(int(k)) {
			take := min(k/gpp, pods)
			out = append(out, placement{node: s.nodes[m.ID], pods: take})
			pods -= take
			if pods == 0 {
				break
			}
		}
	}
	return out
}
