package scheduler

import (
	"slices"

	"github.com/allot-dev/allot/scheduler/internal/quota"
)

// State is a comparable summary of the scheduler's accounting: used GPUs per node,
// usage per team and cohort per flavor, free GPUs per domain, the admitted workloads.
type State struct {
	NodeUsed   map[NodeName]GPUs
	Usage      map[string]map[Flavor]GPUs
	DomainFree map[string]GPUs
	Admitted   []WorkloadID
}

func (s *Scheduler) state() State {
	st := State{NodeUsed: map[NodeName]GPUs{}, Usage: map[string]map[Flavor]GPUs{}, DomainFree: map[string]GPUs{}}
	for _, n := range s.nodes {
		if !n.removed {
			st.NodeUsed[n.spec.Name] = n.used
		}
	}
	var visit func(q *quota.Node)
	visit = func(q *quota.Node) {
		u := map[Flavor]GPUs{}
		for _, f := range s.flavorList {
			u[f.name] = q.R(f.id).Usage
		}
		st.Usage[q.Name] = u
		for _, c := range q.Children {
			visit(c)
		}
	}
	for _, r := range s.roots() {
		visit(r)
	}
	for _, f := range s.flavorList {
		st.DomainFree[string(f.name)] = f.All.Free
		for _, l := range f.Levels {
			for name, g := range l.Domains {
				st.DomainFree[string(f.name)+"/"+l.Name+"/"+name] = g.Free
			}
		}
	}
	for id, w := range s.workloads {
		if w.state == stateAdmitted {
			st.Admitted = append(st.Admitted, id)
		}
	}
	slices.Sort(st.Admitted)
	return st
}

// WhatIfEvict releases the given admitted workloads as if they were evicted and
// returns the function that binds them again: usage, quotas and free GPUs as
// they were (not the order of nodes inside the index, which a failed
// preemption search restores with its journal).
func (s *Scheduler) WhatIfEvict(ids ...WorkloadID) (restore func()) {
	var restores []whatIf
	for _, id := range ids {
		if w, ok := s.workloads[id]; ok && w.state == stateAdmitted {
			restores = append(restores, s.evictWhatIf(w))
		}
	}
	return func() {
		for i := len(restores) - 1; i >= 0; i-- {
			s.rebind(restores[i])
		}
	}
}
