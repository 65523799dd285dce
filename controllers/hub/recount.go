package hub

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/allot-dev/allot/scheduler"
)

// How a routed job whose recorded placement no longer holds is counted
// (recounted.counted; the label counted of allot_hub_jobs_placement_gone).
const (
	// countedNodes: on other nodes of its worker, of a flavor it may use,
	// with GPUs free in the hub's count (its team's quota and the worker's
	// GPUs).
	countedNodes = "nodes"
	// countedQuota: on a stand-in node of its worker (its team's quota;
	// what the worker's real nodes had free of its flavor, up to its GPUs,
	// is held).
	countedQuota = "quota"
	// countedNone: the core cannot count it at all (its team has no quota
	// of a flavor it may use, or its tier is gone): it counts in no quota.
	countedNone = "none"
)

// standInPrefix begins the name of a stand-in node: a Kubernetes node's
// name has no '/', so none is taken for a real one.
const standInPrefix = "hub.allot.dev/stand-in/"

// recounted is a routed job of a worker that is not lost whose recorded
// placement the core could not restore: the nodes are gone from the worker,
// renamed, relabelled out of the job's flavor, unhealthy, full, or not the
// worker's at all.
type recounted struct {
	h *hubJob
	// why the recorded placement does not hold.
	why error
	// counted is how it is counted now (countedNodes, countedQuota,
	// countedNone); on is where (a placement, or the flavor of the stand-in).
	counted string
	on      string
	// held is what the stand-in holds of its worker's real GPUs.
	held scheduler.GPUs
	err  error
}

// recount counts a routed job whose recorded placement does not hold: it
// runs (or its pods wait) in its worker, and must count in its team's quota
// for as long as it is routed, whatever became of the nodes. First, as the
// worker's own scheduler would bind it again, on the worker's healthy nodes
// of a flavor the job may use where the hub counts enough GPUs free: the
// team's quota and the worker's GPUs. Else on a stand-in node of the worker
// that holds exactly the job's GPUs: the team's quota is counted, and no
// other job is placed there; the GPUs the worker's real nodes of that
// flavor have free in the hub's count are held, up to the job's, since it
// runs or waits on them. held is what this pass holds on each node.
func recount(core *scheduler.Scheduler, cfg scheduler.Config, h *hubJob, why error, nodes []scheduler.Node, fleet map[scheduler.Flavor]int64, held map[scheduler.NodeName]scheduler.GPUs) recounted {
	rc := recounted{h: h, why: why, counted: countedNone}
	flavors := jobFlavors(cfg, h.spec, nodes)
	if len(flavors) == 0 {
		rc.err = fmt.Errorf("team %s has no quota of a flavor the job may use", h.spec.Team)
		return rc
	}
	for _, f := range flavors {
		if pl := fit(core, h.spec, nodes, f, held); pl != nil {
			if err := core.Restore(h.spec, pl); err == nil {
				rc.counted, rc.on = countedNodes, formatPlacement(pl)
				return rc
			}
		}
	}
	name := scheduler.NodeName(standInPrefix + h.cluster + "/" + string(h.spec.ID))
	for _, f := range flavors {
		// A stand-in costs what its worker's nodes of the flavor cost (the
		// cheapest is the cluster's price, which it must not lower), or the
		// fleet's dearest where the worker has none left.
		cost := fleet[f]
		for _, n := range nodes {
			if n.Flavor == f {
				cost = min(cost, n.Cost)
			}
		}
		err := core.AddNode(scheduler.Node{Name: name, Flavor: f, GPUs: h.spec.GPUs(), Cluster: h.cluster, Cost: cost, Class: standInPrefix})
		if err == nil {
			if err = core.Restore(h.spec, []scheduler.PodPlacement{{Node: name, Pods: h.spec.Pods}}); err != nil {
				_, _ = core.RemoveNode(name)
			}
		}
		if err != nil {
			rc.err = err
			continue
		}
		rc.counted, rc.on, rc.err = countedQuota, string(f), nil
		need := h.spec.GPUs()
		for _, n := range nodes {
			if n.Flavor != f || n.Unhealthy || need == 0 {
				continue
			}
			used, err := core.NodeUsed(n.Name)
			if take := min(need, n.GPUs-used-held[n.Name]); err == nil && take > 0 {
				if core.Hold(n.Name, held[n.Name]+take) == nil {
					held[n.Name] += take
					need -= take
				}
			}
		}
		rc.held = h.spec.GPUs() - need
		return rc
	}
	return rc
}

// jobFlavors are the flavors of the team's quota the job may use, those the
// worker has nodes of first (by name), then the rest.
func jobFlavors(cfg scheduler.Config, w scheduler.Workload, nodes []scheduler.Node) []scheduler.Flavor {
	var quota map[scheduler.Flavor]scheduler.Quota
	for _, t := range cfg.Teams {
		if t.Name == w.Team {
			quota = t.Quota
		}
	}
	has := map[scheduler.Flavor]bool{}
	for _, n := range nodes {
		has[n.Flavor] = true
	}
	var out []scheduler.Flavor
	for _, f := range slices.Sorted(maps.Keys(quota)) {
		if len(w.Flavors) == 0 || slices.Contains(w.Flavors, f) {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b scheduler.Flavor) int {
		return cmp.Compare(btoi(!has[a]), btoi(!has[b]))
	})
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fit places w's pods on the healthy nodes of flavor f, in order, where the
// hub counts GPUs free (less what held holds), or returns nil.
func fit(core *scheduler.Scheduler, w scheduler.Workload, nodes []scheduler.Node, f scheduler.Flavor, held map[scheduler.NodeName]scheduler.GPUs) []scheduler.PodPlacement {
	var pl []scheduler.PodPlacement
	left := w.Pods
	for _, n := range nodes {
		if n.Flavor != f || n.Unhealthy || left == 0 {
			continue
		}
		used, err := core.NodeUsed(n.Name)
		if err != nil {
			continue
		}
		if pods := min(left, (n.GPUs-used-held[n.Name])/w.GPUsPerPod); pods > 0 {
			pl = append(pl, scheduler.PodPlacement{Node: n.Name, Pods: pods})
			left -= pods
		}
	}
	if left > 0 {
		return nil
	}
	return pl
}

// inCluster checks that a recorded placement names nodes of the job's
// cluster only: a placement read from a Job (or a copy) that whoever may
// write it edited could name another cluster's nodes, and hold GPUs there
// that no job uses.
func inCluster(pl []scheduler.PodPlacement, cluster string, clusterOf map[scheduler.NodeName]string) error {
	for _, p := range pl {
		if c, ok := clusterOf[p.Node]; ok && c != cluster {
			return fmt.Errorf("node %s is a node of %s, not %s", p.Node, c, cluster)
		}
	}
	return nil
}

// message says on the Job how the hub counts it now, and why.
func (rc recounted) message() string {
	h := rc.h
	var b strings.Builder
	fmt.Fprintf(&b, "the nodes the hub counted this job on in %s (%s %s) no longer hold it: %v; ", h.cluster, AnnotationPlacement, orNone(h.placement), rc.why)
	switch rc.counted {
	case countedNodes:
		fmt.Fprintf(&b, "while it is routed there it counts in team %s's quota and %s's GPUs on %s, as the worker would bind it again", h.spec.Team, h.cluster, rc.on)
	case countedQuota:
		fmt.Fprintf(&b, "%s has no %d GPUs of %s free in the hub's count for it: while it is routed there its %d GPUs count in team %s's quota on no node of %s, and %d free GPUs of %s there are held for it",
			h.cluster, h.spec.GPUs(), rc.on, h.spec.GPUs(), h.spec.Team, h.cluster, rc.held, rc.on)
	default:
		fmt.Fprintf(&b, "the hub cannot count it (%v): it counts in no team's quota while it runs", rc.err)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
