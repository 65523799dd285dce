package runner

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
)

// The cluster contract (DESIGN.md, "Cluster contracts").
const (
	// SchedulerName is what pods set in spec.schedulerName to be scheduled by allot.
	SchedulerName = "allot"
	// GPUResource is the extended resource of a GPU.
	GPUResource = nodestate.ResourceGPU

	LabelTeam     = "allot.dev/team"
	LabelTier     = "allot.dev/tier"
	LabelGang     = "allot.dev/gang"
	LabelGangSize = "allot.dev/gang-size"
	LabelRequire  = "allot.dev/require"
	LabelPrefer   = "allot.dev/prefer"
	LabelFlavor   = "allot.dev/flavor"
	LabelPool     = "allot.dev/pool"
	// LabelTopologyPrefix + level names a node's domain of that level.
	LabelTopologyPrefix = "topology.allot.dev/"
)

// quotaConfig builds the core's quota tree from the Team, Cohort and Tier objects.
func quotaConfig(teams []allotv1.Team, cohorts []allotv1.Cohort, tiers []allotv1.Tier) (scheduler.Config, error) {
	var cfg scheduler.Config
	for _, t := range tiers {
		cfg.Tiers = append(cfg.Tiers, scheduler.Tier{Name: scheduler.TierName(t.Name), Priority: int64(t.Spec.Priority), Preemptible: t.Spec.Preemptible, BorrowOnly: t.Spec.BorrowOnly})
	}
	slices.SortFunc(cfg.Tiers, func(a, b scheduler.Tier) int { return int(b.Priority - a.Priority) })
	for _, c := range cohorts {
		cfg.Cohorts = append(cfg.Cohorts, scheduler.Cohort{Name: scheduler.CohortName(c.Name), Parent: scheduler.CohortName(c.Spec.Parent)})
	}
	for _, t := range teams {
		st := scheduler.Team{Name: scheduler.TeamName(t.Name), Cohort: scheduler.CohortName(t.Spec.Cohort), Weight: 1, Quota: map[scheduler.Flavor]scheduler.Quota{}}
		if w := string(t.Spec.Weight); w != "" {
			f, err := strconv.ParseFloat(w, 64)
			if err != nil || f <= 0 {
				return cfg, fmt.Errorf("team %s: weight %q is not a positive number", t.Name, w)
			}
			st.Weight = f
		}
		for _, n := range t.Spec.Tiers {
			st.Tiers = append(st.Tiers, scheduler.TierName(n))
		}
		for _, q := range t.Spec.Quota {
			st.Quota[scheduler.Flavor(q.Flavor)] = scheduler.Quota{Nominal: q.Nominal, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit}
		}
		cfg.Teams = append(cfg.Teams, st)
	}
	return cfg, nil
}

// poolInfo is what the scheduler needs of a Pool: its flavor and level order.
type poolInfo struct {
	flavor string
	levels []string
}

func poolInfoOf(p *allotv1.Pool) poolInfo {
	pi := poolInfo{flavor: p.Spec.Flavor}
	if p.Spec.Topology != nil {
		for _, l := range p.Spec.Topology.Levels {
			pi.levels = append(pi.levels, l.Name)
		}
	}
	return pi
}

// nodeModel is a Node as the scheduler sees it; ok is false for a node that
// offers allot nothing (no GPUs, or no flavor from its label or its Pool).
type nodeModel struct {
	// spec.GPUs are the node's allocatable GPUs, healthy or not: a change of
	// health never resizes the node in the core.
	spec scheduler.Node
	// faulty are the GPUs of a usable node the agent counts unhealthy: held,
	// so that nothing new lands on them, while what runs stays.
	faulty int64
	// reason says why the node offers fewer GPUs than it has (nodestate).
	reason string
	// graceEnds, set while a node that stopped being Ready is within its grace:
	// it takes no new work, and its running work is evicted only when the grace
	// ends with the node still not Ready.
	graceEnds time.Time
	// cordoned: spec.unschedulable (kubectl cordon or drain): no new work, the
	// running work stays.
	cordoned bool
}

// closed says the node takes no new work though it is not unhealthy: all its
// GPUs are held.
func (m nodeModel) closed() bool { return m.cordoned || !m.graceEnds.IsZero() }

// modelNode reads a Node: nvidia.com/gpu allocatable (and how many of them the
// agent counts unhealthy), the flavor, the topology domains in the
// order of the node's Pool, and health as the node contract reads it
// (fleet/nodestate.Read): unhealthy when not Ready, tainted allot.dev/gpu-fault,
// or without a healthy GPU; a node not Ready for less than grace is closed,
// not unhealthy, and so is a cordoned one.
func modelNode(n *corev1.Node, pools map[string]poolInfo, grace time.Duration, now time.Time) (nodeModel, bool) {
	c := nodestate.Read(n)
	if c.GPUs <= 0 {
		return nodeModel{}, false
	}
	pool, havePool := pools[n.Labels[LabelPool]]
	flavor := n.Labels[LabelFlavor]
	if flavor == "" {
		flavor = pool.flavor
	}
	if flavor == "" {
		return nodeModel{}, false
	}
	m := nodeModel{spec: scheduler.Node{Name: scheduler.NodeName(n.Name), Flavor: scheduler.Flavor(flavor)}}
	if havePool {
		// Domain names are qualified by their wider domains: rack r0 of block b1
		// is not rack r0 of block b2.
		path := ""
		for _, l := range pool.levels {
			v, ok := n.Labels[LabelTopologyPrefix+l]
			if !ok || v == "" {
				break // a node outside a level is outside every narrower one
			}
			path += "/" + v
			m.spec.Domains = append(m.spec.Domains, scheduler.Domain{Level: l, Name: path[1:]})
		}
	}
	// An unusable node keeps its size (the core takes its work back by its
	// health); a usable one offers its healthy GPUs.
	m.spec.Unhealthy, m.reason, m.cordoned = !c.Usable, c.Reason, n.Spec.Unschedulable
	if c.Reason == nodestate.ReasonNotReady && gpuFault(n) {
		m.reason = nodestate.ReasonGPUFault // the fault decides: no grace
	}
	m.spec.GPUs = c.GPUs
	if c.Usable {
		m.faulty = c.GPUs - c.HealthyGPUs
	}
	if m.reason == nodestate.ReasonNotReady && grace > 0 {
		// A kubelet that stops reporting, or a short network partition, is
		// not a lost node yet: its gangs keep running for the grace, as
		// Kubernetes' own taint-based eviction gives pods 5 minutes.
		if since := notReadySince(n); !since.IsZero() && now.Sub(since) < grace {
			m.spec.Unhealthy, m.graceEnds = false, since.Add(grace)
		}
	}
	return m, true
}

// gpuFault says whether the node carries the GPU-fault taint (which evicts at
// once, whether or not the node is Ready).
func gpuFault(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodestate.TaintGPUFault })
}

// notReadySince is when the node's Ready condition last changed to not True;
// zero when the node never reported one.
func notReadySince(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// podGPUs is the GPUs a pod asks for: the sum over its containers, or the most
// one init container asks for if that is more; a request defaults to the limit.
func podGPUs(p *corev1.Pod) int64 {
	get := func(c corev1.Container) int64 {
		if q, ok := c.Resources.Requests[GPUResource]; ok {
			return q.Value()
		}
		if q, ok := c.Resources.Limits[GPUResource]; ok {
			return q.Value()
		}
		return 0
	}
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		sum += get(c)
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, get(c))
	}
	return max(sum, initMax)
}
