package runner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unique"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/schema/quantity"
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
			if err != nil {
				return cfg, fmt.Errorf("team %s: weight %q is not a number", t.Name, w)
			}
			st.Weight = f // the core checks it is positive
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

// poolInfo is what the scheduler needs of a Pool: its flavor, level order
// and price per GPU-hour (millionths of a dollar; it orders clusters).
type poolInfo struct {
	flavor string
	levels []string
	cost   int64
}

func poolInfoOf(p *allotv1.Pool) poolInfo {
	pi := poolInfo{flavor: p.Spec.Flavor}
	if price, err := quantity.Parse(string(p.Spec.Price.OnDemandPerNodeHour)); err == nil && p.Spec.GPUsPerNode > 0 && price.Sign() >= 0 {
		pi.cost = price.MulInt(1_000_000).Quo(quantity.Int(p.Spec.GPUsPerNode)).Floor()
	}
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
func modelNode(n *corev1.Node, pools map[string]poolInfo, cluster string, grace time.Duration, now time.Time) (nodeModel, bool) {
	c := nodestate.Read(n)
	if c.GPUs <= 0 {
		return nodeModel{}, false
	}
	pool, havePool := pools[n.Labels[contract.LabelPool]]
	flavor := n.Labels[contract.LabelFlavor]
	if flavor == "" {
		flavor = pool.flavor
	}
	if flavor == "" {
		return nodeModel{}, false
	}
	m := nodeModel{spec: scheduler.Node{Name: scheduler.NodeName(n.Name), Flavor: scheduler.Flavor(flavor), Class: nodeClass(n), Cluster: cmp.Or(n.Labels[contract.LabelCluster], cluster)}}
	if havePool {
		m.spec.Cost = pool.cost
		// Domain names are qualified by their wider domains: rack r0 of block b1
		// is not rack r0 of block b2.
		path := ""
		for _, l := range pool.levels {
			v, ok := n.Labels[contract.TopologyLabelPrefix+l]
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

// PodGPUs is the GPUs a pod asks for: the sum over its containers, or the most
// one init container asks for if that is more; a request defaults to the limit.
// A count is the pod's writer's: one beyond int64 (1e30), or a sum that would
// overflow it, reads as int64's largest, which no fleet holds (it wrapped
// around: three containers of 2^63-1, 2^63-1 and 3 GPUs read as 1 GPU).
func PodGPUs(p *corev1.Pod) int64 {
	get := func(c corev1.Container) int64 {
		q, ok := c.Resources.Requests[nodestate.ResourceGPU]
		if !ok {
			q, ok = c.Resources.Limits[nodestate.ResourceGPU]
		}
		switch {
		case !ok || q.Sign() <= 0:
			return 0
		case q.CmpInt64(math.MaxInt64) >= 0:
			return math.MaxInt64
		}
		return q.Value()
	}
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		if g := get(c); sum > math.MaxInt64-g {
			sum = math.MaxInt64
		} else {
			sum += g
		}
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, get(c))
	}
	return max(sum, initMax)
}

// Kubernetes' placement rules. A node's class is what the rules can see of it:
// its NoSchedule and NoExecute taints and its labels, but those that name one
// node alone (its hostname, allot's topology domains, which allot.dev/require
// and allot.dev/prefer place by) and the taints allot reads as health (not
// Ready, unreachable, cordoned, GPU fault). A pod's rules are its tolerations,
// nodeSelector and required node affinity, decided by Kubernetes' own helpers
// (k8s.io/component-helpers/scheduling/corev1) on a node of the class.

// labelHostname names a node alone; rules on it cannot be decided per class.
const labelHostname = corev1.LabelHostname

// healthTaints are read as the node's health (nodestate), not as rules.
var healthTaints = []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable, nodestate.TaintGPUFault}

// classOf is what a class encodes, in JSON.
type classOf struct {
	Labels map[string]string `json:"l,omitempty"`
	Taints []corev1.Taint    `json:"t,omitempty"`
}

// perNode says whether a label names a single node.
func perNode(label string) bool {
	return label == labelHostname || strings.HasPrefix(label, contract.TopologyLabelPrefix)
}

// nodeClass is the node's class: its labels and scheduling taints, encoded
// canonically (labels by key, taints by key, value and effect).
func nodeClass(n *corev1.Node) string {
	var c classOf
	for k, v := range n.Labels {
		if !perNode(k) {
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			c.Labels[k] = v
		}
	}
	for _, t := range n.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !slices.Contains(healthTaints, t.Key) {
			c.Taints = append(c.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	slices.SortFunc(c.Taints, func(a, b corev1.Taint) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Effect, b.Effect))
	})
	b, _ := json.Marshal(c) // maps and strings always encode
	// Interned: thousands of nodes share a handful of classes.
	return unique.Make(string(b)).Value()
}

// podRules are a pod's placement rules, for the core (scheduler.Rules).
type podRules struct {
	key         string
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
}

// rulesKey is what of a pod decides where it may run.
type rulesKey struct {
	Tolerations  []corev1.Toleration  `json:"t,omitempty"`
	NodeSelector map[string]string    `json:"s,omitempty"`
	Required     *corev1.NodeSelector `json:"a,omitempty"`
}

// maxRulesKey bounds a pod's placement rules (they are kept per gang).
const maxRulesKey = 16 << 10

// rulesOf reads a pod's placement rules, or says why allot cannot honour
// them: rules on a label of single nodes, or on node fields, would need a
// decision per node.
func rulesOf(p *corev1.Pod) (*podRules, error) {
	k := rulesKey{Tolerations: p.Spec.Tolerations, NodeSelector: p.Spec.NodeSelector}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		k.Required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	for l := range k.NodeSelector {
		if perNode(l) {
			return nil, fmt.Errorf("pod %s: its nodeSelector names %s, a label of single nodes; allot places by topology labels (%s, %s) instead", p.Name, l, contract.LabelRequire, contract.LabelPrefer)
		}
	}
	if k.Required != nil {
		for _, t := range k.Required.NodeSelectorTerms {
			if len(t.MatchFields) > 0 {
				return nil, fmt.Errorf("pod %s: its required node affinity matches node fields (%s), which allot does not place by", p.Name, t.MatchFields[0].Key)
			}
			for _, e := range t.MatchExpressions {
				if perNode(e.Key) {
					return nil, fmt.Errorf("pod %s: its required node affinity names %s, a label of single nodes; allot places by topology labels (%s, %s) instead", p.Name, e.Key, contract.LabelRequire, contract.LabelPrefer)
				}
			}
		}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("pod %s: reading its placement rules: %w", p.Name, err)
	}
	if len(b) > maxRulesKey {
		return nil, fmt.Errorf("pod %s: its tolerations, nodeSelector and node affinity take %d bytes, more than allot reads (%d)", p.Name, len(b), maxRulesKey)
	}
	return &podRules{key: string(b), tolerations: p.Spec.Tolerations, affinity: nodeaffinity.GetRequiredNodeAffinity(p)}, nil
}

// Key identifies the rules.
func (r *podRules) Key() string { return r.key }

// rulesKeyOf is the key of a workload's rules, "" for none.
func rulesKeyOf(w scheduler.Workload) string {
	if w.Rules == nil {
		return ""
	}
	return w.Rules.Key()
}

// Admits says whether a pod of these rules may run on a node of the class:
// every NoSchedule and NoExecute taint tolerated, nodeSelector and required
// node affinity matched. Tolerations' comparison operators stay off, as they
// are by default in Kubernetes 1.36 (an alpha feature).
func (r *podRules) Admits(class string) bool {
	var c classOf
	if json.Unmarshal([]byte(class), &c) != nil {
		return false
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: c.Labels}, Spec: corev1.NodeSpec{Taints: c.Taints}}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), c.Taints, r.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	ok, err := r.affinity.Match(n)
	return ok && err == nil
}

// QuotaConfig builds the core's quota tree from the Team, Cohort and Tier
// objects, as the runner does: for a hub whose core spans the fleet.
func QuotaConfig(teams []allotv1.Team, cohorts []allotv1.Cohort, tiers []allotv1.Tier) (scheduler.Config, error) {
	return quotaConfig(teams, cohorts, tiers)
}

// FleetNodes reads a worker cluster's nodes as the core sees them (flavor,
// domains and cost from their Pools, health; a node not Ready counts as
// unhealthy at once), each in cluster (the name the hub registered it under): for a hub that
// models its workers' nodes. Nodes that offer allot nothing are left out.
func FleetNodes(nodes []corev1.Node, pools []allotv1.Pool, cluster string) []scheduler.Node {
	info := make(map[string]poolInfo, len(pools))
	for i := range pools {
		info[pools[i].Name] = poolInfoOf(&pools[i])
	}
	out := make([]scheduler.Node, 0, len(nodes))
	for i := range nodes {
		if m, ok := modelNode(&nodes[i], info, cluster, -1, time.Time{}); ok {
			m.spec.Cluster = cluster // the worker's name on the hub decides
			out = append(out, m.spec)
		}
	}
	return out
}
