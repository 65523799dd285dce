package scheduler

import (
	"fmt"
	"slices"

	"github.com/allot-dev/allot/scheduler/internal/index"
)

// checkInvariants recomputes, from the admitted workloads alone, what the
// scheduler's rules promise, and says what is broken: no node over committed or
// running work while unhealthy, no partial or mixed-flavor gang, no pod on a node
// of a class its rules do not admit, required
// topology kept, no team above nominal + borrowing limit, no team's guaranteed
// quota (nominal - lending limit) used by others. Tests call it after every cycle.
func (s *Scheduler) checkInvariants() error {
	used := map[*node]GPUs{}
	usage := map[*team]map[Flavor]GPUs{}
	for _, w := range s.workloads {
		if w.state != stateAdmitted {
			continue
		}
		var pods int64
		doms := map[string]string{}
		for i, p := range w.placements {
			pods += p.pods
			used[p.node] += p.pods * w.spec.GPUsPerPod
			if p.node.flavor != w.flavor {
				return fmt.Errorf("gang %s spans flavors", w.spec.ID)
			}
			if c := w.placements[0].node.spec.Cluster; p.node.spec.Cluster != c {
				return fmt.Errorf("gang %s spans clusters %s and %s", w.spec.ID, c, p.node.spec.Cluster)
			}
			if w.spec.Cluster != "" && p.node.spec.Cluster != w.spec.Cluster && !w.restored {
				return fmt.Errorf("gang %s pinned to cluster %s runs in %s", w.spec.ID, w.spec.Cluster, p.node.spec.Cluster)
			}
			if w.spec.Rules != nil && !w.restored && !w.spec.Rules.Admits(p.node.spec.Class) {
				return fmt.Errorf("gang %s on node %s of class %q its rules do not admit", w.spec.ID, p.node.spec.Name, p.node.spec.Class)
			}
			if len(w.spec.Flavors) > 0 && !contains(w.spec.Flavors, w.flavor.name) {
				return fmt.Errorf("gang %s on flavor %s it does not accept", w.spec.ID, w.flavor.name)
			}
			for _, d := range p.node.spec.Domains {
				if i == 0 {
					doms[d.Level] = d.Name
				} else if doms[d.Level] != d.Name {
					doms[d.Level] = ""
				}
			}
		}
		if pods != w.spec.Pods {
			return fmt.Errorf("gang %s has %d of %d pods placed", w.spec.ID, pods, w.spec.Pods)
		}
		if l := w.spec.Require; l != "" && doms[l] == "" {
			return fmt.Errorf("gang %s requires one %s but spans several", w.spec.ID, l)
		}
		if usage[w.team] == nil {
			usage[w.team] = map[Flavor]GPUs{}
		}
		usage[w.team][w.flavor.name] += w.GPUs()
	}
	for _, n := range s.nodes {
		if used[n] != n.used {
			return fmt.Errorf("node %s: accounted %d GPUs used, workloads hold %d", n.spec.Name, n.used, used[n])
		}
		if used[n] > n.spec.GPUs {
			return fmt.Errorf("node %s over committed: %d of %d GPUs", n.spec.Name, used[n], n.spec.GPUs)
		}
		if n.spec.Unhealthy && used[n] > 0 {
			return fmt.Errorf("unhealthy node %s runs work", n.spec.Name)
		}
	}
	// Each listed node with free GPUs is in the bucket of its free GPUs of
	// each of its groups (the index holds itself against its definition in
	// its own tests).
	for _, n := range s.nodes {
		f := n.free()
		if !n.Listed || f == 0 {
			continue
		}
		for i, g := range n.Groups {
			if int(f) >= g.Buckets() || !slices.ContainsFunc(g.Bucket(int(f)), func(m index.Member) bool { return m.ID == n.ID }) {
				return fmt.Errorf("node %s misplaced in the index (group %d of %d)", n.spec.Name, i, len(n.Groups))
			}
		}
	}
	for _, t := range s.teamList {
		for f, q := range t.spec.Quota {
			u := usage[t][f]
			limit := q.Nominal
			if t.spec.Cohort != "" {
				if q.BorrowingLimit == nil {
					limit = -1
				} else {
					limit += *q.BorrowingLimit
				}
			}
			if limit >= 0 && u > limit {
				return fmt.Errorf("team %s uses %d of %s, limit %d", t.spec.Name, u, f, limit)
			}
		}
		for f := range t.spec.Quota {
			if _, ok := t.spec.Quota[f]; !ok {
				return fmt.Errorf("team %s uses %s without quota", t.spec.Name, f)
			}
		}
		for f, u := range usage[t] {
			if _, ok := t.spec.Quota[f]; !ok && u > 0 {
				return fmt.Errorf("team %s uses %d of %s without a quota for it", t.spec.Name, u, f)
			}
		}
	}
	// Lenders: in each tree, the others may use at most the tree's nominal minus
	// what a team does not lend.
	for _, t := range s.teamList {
		root := t.q.Root()
		for f, q := range t.spec.Quota {
			var total, others GPUs
			for _, o := range s.trees[root] {
				total += o.spec.Quota[f].Nominal
				if o != t {
					others += usage[o][f]
				}
			}
			keep := GPUs(0)
			if q.LendingLimit != nil {
				keep = max(0, q.Nominal-*q.LendingLimit)
			}
			if others > total-keep {
				return fmt.Errorf("team %s lends at most %v of %s, but others use %d of the tree's %d", t.spec.Name, q.LendingLimit, f, others, total)
			}
		}
	}
	// Each level's largest capacity is at least each of its domains'.
	for _, f := range s.flavorList {
		var err error
		f.eachView(func(v *view) {
			for _, l := range v.Levels {
				for _, d := range l.Domains {
					if err == nil && d.Capacity > l.MaxCap {
						err = fmt.Errorf("flavor %s, level %s: domain %s of %d GPUs, the largest %d", f.name, l.Name, d.Dom.Name, d.Capacity, l.MaxCap)
					}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func contains(fs []Flavor, f Flavor) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}
