package nodestate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Why a node offers fewer GPUs than it has.
const (
	ReasonNotReady     = "NotReady"
	ReasonGPUFault     = "GPUFault"
	ReasonGPUUnhealthy = "GPUUnhealthy"
)

// Capacity is what one node offers the scheduler.
type Capacity struct {
	// GPUs are the node's allocatable GPUs.
	GPUs int64
	// HealthyGPUs are the GPUs work may be placed on.
	HealthyGPUs int64
	// Usable: the node may take work at all (Ready, no fatal GPU fault, and at
	// least one healthy GPU).
	Usable bool
	// Reason says why it offers fewer than GPUs (empty when it offers them all).
	Reason string
}

// Read returns what n offers: nothing when it is not Ready, carries the
// gpu-fault taint, or reports GPUHealthy=False with no healthy GPU; only the
// healthy GPUs when the agent counted fewer than allocatable.
func Read(n *corev1.Node) Capacity {
	c := Capacity{}
	if q, ok := n.Status.Allocatable[ResourceGPU]; ok {
		c.GPUs = q.Value()
	}
	switch {
	case !ready(n):
		c.Reason = ReasonNotReady
		return c
	case tainted(n):
		c.Reason = ReasonGPUFault
		return c
	}
	c.HealthyGPUs = c.GPUs
	if v, ok := n.Annotations[AnnotationHealthyGPUs]; ok {
		h, err := strconv.ParseInt(v, 10, 64)
		if err != nil || h < 0 {
			h = 0 // an annotation nobody can read promises nothing
		}
		c.HealthyGPUs = min(h, c.GPUs)
	}
	if c.HealthyGPUs < c.GPUs {
		c.Reason = ReasonGPUUnhealthy
	}
	c.Usable = c.HealthyGPUs > 0 || c.GPUs == 0 && gpuHealthy(n)
	return c
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == TaintGPUFault {
			return true
		}
	}
	return false
}

// gpuHealthy reports whether the GPUHealthy condition is not False.
func gpuHealthy(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionGPUHealthy {
			return c.Status != corev1.ConditionFalse
		}
	}
	return true
}
