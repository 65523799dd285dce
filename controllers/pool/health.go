package pool

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// Health is what a pool's nodes offer, from Observe.
type Health struct {
	Nodes, UsableNodes int64
	GPUs, HealthyGPUs  int64
	// Faulty are the nodes offering fewer GPUs than they have, by name.
	Faulty []Fault
	// NeededGPUs is what the quotas need of the pool: its node target less its
	// spare nodes, in GPUs.
	NeededGPUs int64
}

// Fault is a node that offers fewer GPUs than it has, and why
// (nodestate.ReasonNotReady, ReasonGPUFault or ReasonGPUUnhealthy).
type Fault struct{ Node, Reason string }

func (f Fault) String() string { return f.Node + " (" + f.Reason + ")" }

// Observe reads the pool's nodes. It is pure: the reconciler lists the nodes.
func Observe(p *allotv1.Pool, nodes []corev1.Node) Health {
	h := Health{NeededGPUs: max(0, p.Spec.NodesTarget-p.Spec.SpareNodes) * p.Spec.GPUsPerNode}
	for i := range nodes {
		c := nodestate.Read(&nodes[i])
		h.Nodes++
		h.GPUs += c.GPUs
		if c.Usable {
			h.UsableNodes++
			h.HealthyGPUs += c.HealthyGPUs
		}
		if c.Reason != "" {
			h.Faulty = append(h.Faulty, Fault{Node: nodes[i].Name, Reason: c.Reason})
		}
	}
	slices.SortFunc(h.Faulty, func(a, b Fault) int { return strings.Compare(a.Node, b.Node) })
	return h
}

// CapacityReady says whether the healthy GPUs cover what the quotas need.
func (h Health) CapacityReady() bool { return h.HealthyGPUs >= h.NeededGPUs }

// Message says it in one line, with the numbers and the faulty nodes.
func (h Health) Message() string {
	msg := fmt.Sprintf("%d healthy GPUs of %d needed (%d of %d nodes usable)", h.HealthyGPUs, h.NeededGPUs, h.UsableNodes, h.Nodes)
	if len(h.Faulty) > 0 {
		msg += "; faulty: " + h.FaultList()
	}
	return msg
}

// FaultList names the first ten faulty nodes and counts the rest.
func (h Health) FaultList() string {
	const most = 10
	var names []string
	for i, f := range h.Faulty {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(h.Faulty)-most))
			break
		}
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}
