package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// Restore records a workload that already runs at the given placement, as a
// runner finds it after a restart or a change of the quota tree: it is admitted
// and started without any check of quota, order or topology, because it runs
// whatever the rules say now. A team that so ends up above its nominal quota (or
// its nominal plus borrowing limit) counts the excess as borrowed: its cohort may
// reclaim it, and the team admits nothing new of that flavor until it is back
// under its limits. The placement must name known nodes of one flavor, hold every
// pod of the gang and fit the nodes' GPUs.
func (s *Scheduler) Restore(spec Workload, pods []PodPlacement) error {
	if err := s.Submit(spec); err != nil {
		return err
	}
	w := s.workloads[spec.ID]
	pl, f, err := s.restorePlacement(w, pods)
	if err != nil {
		delete(s.workloads, spec.ID)
		w.team.queue.leave(w, nil)
		w.state = stateGone
		return err
	}
	w.team.queue.leave(w, nil)
	w.admittedAt, w.started, w.restored = spec.Submitted, true, true
	s.bind(w, f, pl)
	w.reason = PendingReason{}
	w.domain = commonDomain(pl)
	return nil
}

func (s *Scheduler) restorePlacement(w *workload, pods []PodPlacement) ([]placement, *flavorState, error) {
	var f *flavorState
	var n int64
	need := map[*node]GPUs{}
	pl := make([]placement, 0, len(pods))
	for _, p := range pods {
		nd, ok := s.nodeByName[p.Node]
		if !ok {
			return nil, nil, fmt.Errorf("workload %s: node %s: %w", w.spec.ID, p.Node, ErrUnknown)
		}
		if f == nil {
			f = nd.flavor
		} else if nd.flavor != f {
			return nil, nil, fmt.Errorf("workload %s spans flavors %s and %s", w.spec.ID, f.name, nd.flavor.name)
		} else if c := pl[0].node.spec.Cluster; nd.spec.Cluster != c {
			return nil, nil, fmt.Errorf("workload %s spans clusters %s and %s", w.spec.ID, c, nd.spec.Cluster)
		}
		if nd.spec.Unhealthy {
			return nil, nil, fmt.Errorf("workload %s: node %s is unhealthy", w.spec.ID, p.Node)
		}
		if p.Pods <= 0 {
			return nil, nil, fmt.Errorf("workload %s: %d pods on node %s", w.spec.ID, p.Pods, p.Node)
		}
		n += p.Pods
		need[nd] += p.Pods * w.spec.GPUsPerPod
		pl = append(pl, placement{node: nd, pods: p.Pods})
	}
	if n != w.spec.Pods {
		return nil, nil, fmt.Errorf("workload %s: placement holds %d of %d pods", w.spec.ID, n, w.spec.Pods)
	}
	if !slices.Contains(w.cands, f) {
		return nil, nil, fmt.Errorf("workload %s: team %s has no quota for flavor %s", w.spec.ID, w.spec.Team, f.name)
	}
	for nd, g := range need {
		if nd.reservedFor != nil {
			s.unreserve(nd.reservedFor)
		}
		// What is held there (Hold) does not count: the workload runs, and
		// what holds GPUs beside it runs too.
		if free := nd.spec.GPUs - nd.used; free < g {
			return nil, nil, fmt.Errorf("workload %s: node %s has %d free GPUs, the workload holds %d there", w.spec.ID, nd.spec.Name, free, g)
		}
	}
	return pl, f, nil
}

// commonDomain is the narrowest domain all placements share, if any.
func commonDomain(pl []placement) *Domain {
	if len(pl) == 0 {
		return nil
	}
	var out *Domain
	for i, d := range pl[0].node.spec.Domains {
		for _, p := range pl[1:] {
			if len(p.node.spec.Domains) <= i || p.node.spec.Domains[i] != d {
				return out
			}
		}
		d := d
		out = &d
	}
	return out
}

// Requeue takes an admitted workload back, as when its pods could not all be
// bound: it frees what the workload holds and returns it to its queue, where it
// waits the backoff (doubling with every requeue) before it is considered again.
func (s *Scheduler) Requeue(id WorkloadID) error {
	w, ok := s.workloads[id]
	if !ok || w.state != stateAdmitted {
		return fmt.Errorf("workload %s is not admitted: %w", id, ErrUnknown)
	}
	s.release(w)
	w.timeouts++
	w.notBefore = s.now.Add(s.opts.Backoff << (w.timeouts - 1))
	s.requeue(w)
	s.setReason(w, PendingReason{Code: ReasonBackoff, Requested: w.GPUs()})
	return nil
}

// Admitted says whether a workload is admitted (placed), and where.
func (s *Scheduler) Admitted(id WorkloadID) ([]PodPlacement, bool) {
	w, ok := s.workloads[id]
	if !ok || w.state != stateAdmitted {
		return nil, false
	}
	out := make([]PodPlacement, 0, len(w.placements))
	for _, p := range w.placements {
		out = append(out, PodPlacement{Node: p.node.spec.Name, Pods: p.pods, GPUs: p.pods * w.spec.GPUsPerPod})
	}
	return out, true
}

// Advance moves the scheduler's notion of now forward without a cycle, so that
// what happens between cycles (a node failing, a workload requeued) is stamped
// with the time it happened.
func (s *Scheduler) Advance(now time.Time) {
	if now.After(s.now) {
		s.setNow(now)
	}
}
