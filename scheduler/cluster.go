package scheduler

import (
	"github.com/allot-dev/allot/scheduler/internal/index"
)

// Clusters. A fleet may span several clusters (Node.Cluster); a cluster is a
// hard boundary: no gang spans two. The core keeps a cluster as the widest
// topology domain of its nodes, at ClusterLevel, above the levels the nodes
// name, and qualifies the names of the narrower domains by it (rack r0 of one
// cluster is not rack r0 of another). A workload that requires no level is
// held to one cluster as if it required this one. Routing: a workload that
// names no cluster goes to the cheapest cluster (Node.Cost) where it fits now,
// and among equally cheap ones to the best fit (the domain it requires, else
// the cluster, with the least free GPUs); a pinned one (Workload.Cluster) goes
// to its cluster or waits. Reservations stay inside one cluster too.

// domains are n's topology domains as the index keeps them: its cluster's
// first, when it names one.
func (n *node) domains() []index.Domain {
	out := make([]index.Domain, 0, 1+len(n.spec.Domains))
	if n.spec.Cluster != "" {
		out = append(out, index.Domain{Level: ClusterLevel, Name: n.spec.Cluster})
	}
	for _, d := range n.spec.Domains {
		out = append(out, index.Domain(d))
	}
	return out
}

// route finds where w fits on v when v's nodes name clusters (clustered):
// the best-fit domain of the level w requires, else the cluster itself, in the
// cheapest cluster (w's own when it is pinned) where one fits; nil when none
// does. A pinned workload on nodes that name no cluster fits nowhere.
func (v *view) route(w *workload) (g *index.Group, clustered bool) {
	if len(v.Clusters) == 0 {
		return nil, w.spec.Cluster != ""
	}
	gpp, pods := w.spec.GPUsPerPod, w.spec.Pods
	var li *index.Level
	if l := w.spec.Require; l != "" {
		if li = v.Levels[l]; li == nil {
			return nil, true
		}
	}
	var best *index.Group
	for _, c := range v.Clusters {
		if best != nil && c.Cost > best.Cluster.Cost {
			break
		}
		if w.spec.Cluster != "" && c.Dom.Name != w.spec.Cluster {
			continue
		}
		if c.Free < gpp*pods || !c.Fits(gpp, pods) {
			continue
		}
		d := c
		if li != nil {
			if d = li.BestFit(gpp, pods, c); d == nil {
				continue
			}
		}
		if best == nil || d.Free < best.Free {
			best = d
		}
	}
	return best, true
}

// cluster returns v's cluster of the name, or nil.
func (v *view) cluster(name string) *index.Group {
	for _, c := range v.Clusters {
		if c.Dom.Name == name {
			return c
		}
	}
	return nil
}

// clusterReason explains why w fits in no cluster of v.
func (s *Scheduler) clusterReason(w *workload, f *flavorState, v *view) PendingReason {
	gpp := w.spec.GPUsPerPod
	if w.spec.Cluster != "" && v.cluster(w.spec.Cluster) == nil {
		return PendingReason{Code: ReasonNoMatchingNodes, Flavor: f.name, Requested: w.GPUs(), Cluster: w.spec.Cluster}
	}
	if l := w.spec.Require; l != "" {
		r := PendingReason{Code: ReasonNoTopologyDomain, Flavor: f.name, Level: l, Requested: w.GPUs(), Cluster: w.spec.Cluster}
		if li := v.Levels[l]; li != nil {
			r.Available, r.Limit = li.LargestFree(), li.MaxCap
		}
		return r
	}
	r := s.nodeReason(w, f, v)
	switch r.Code {
	case ReasonBehindHigherTier:
		// What was free at the start of the cycle is known for the flavor,
		// not per cluster.
		r.Code = ReasonInsufficientNodes
	case ReasonInsufficientNodes:
	default:
		return r
	}
	r.Available = 0
	for _, c := range v.Clusters {
		if w.spec.Cluster == "" || c.Dom.Name == w.spec.Cluster {
			r.Available = max(r.Available, c.Usable(gpp, 1<<62)*gpp)
		}
	}
	if r.Cluster = w.spec.Cluster; r.Cluster == "" {
		r.Level = ClusterLevel
	}
	return r
}

// inCluster says whether domain g may hold a workload pinned to cluster
// (empty: any).
func inCluster(g *index.Group, cluster string) bool {
	return cluster == "" || (g.Cluster != nil && g.Cluster.Dom.Name == cluster)
}
