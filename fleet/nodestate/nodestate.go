package nodestate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/fleet/health"
)

// The names the team agreed on (docs/contracts.md, "Names on nodes and pods").
const (
	// ConditionGPUHealthy is the node condition the agent writes: True when every
	// check passes; False with the failing checks as its reason.
	ConditionGPUHealthy corev1.NodeConditionType = "GPUHealthy"
	// AnnotationHealthyGPUs holds the healthy GPU count; absent: every
	// allocatable GPU is healthy.
	AnnotationHealthyGPUs = "allot.dev/healthy-gpus"
	// TaintGPUFault (NoSchedule) marks a node with a fatal GPU fault; its value
	// names the fatal checks.
	TaintGPUFault = "allot.dev/gpu-fault"
	// AnnotationState keeps the agent's health.State (JSON) so a restarted agent
	// remembers its faults until they recover.
	AnnotationState = "allot.dev/gpu-health-state"
	// ResourceGPU is the extended resource GPU nodes advertise.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
)

// Change says what Apply changed on a node.
type Change struct {
	// Meta: annotations or taints (the node object).
	Meta bool
	// Status: the GPUHealthy condition (the status subresource).
	Status bool
	// Health: the node's health as others see it changed (healthy or not, the
	// failing checks, the healthy GPU count, the taint): worth an Event.
	Health bool
}

// Apply writes rep and st on n, as of now. The condition's heartbeat is
// refreshed only when it is older than heartbeat, so a steady node is not
// patched on every poll.
func Apply(n *corev1.Node, rep health.Report, st health.State, now time.Time, heartbeat time.Duration) Change {
	var ch Change
	status, reason := corev1.ConditionTrue, rep.Reason
	if !rep.Healthy {
		status = corev1.ConditionFalse
	}
	ts := metav1.NewTime(now)
	i := conditionIndex(n)
	if i < 0 {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: ConditionGPUHealthy, LastTransitionTime: ts})
		i = len(n.Status.Conditions) - 1
	}
	c := &n.Status.Conditions[i]
	if c.Status != status || c.Reason != reason {
		ch.Health = true
	}
	if c.Status != status {
		c.LastTransitionTime = ts
	}
	if c.Status != status || c.Reason != reason || c.Message != rep.Message || now.Sub(c.LastHeartbeatTime.Time) >= heartbeat {
		c.Status, c.Reason, c.Message, c.LastHeartbeatTime = status, reason, rep.Message, ts
		ch.Status = true
	}

	want := ""
	if !rep.Healthy {
		want = strconv.Itoa(rep.HealthyGPUs)
	}
	if setAnnotation(n, AnnotationHealthyGPUs, want) {
		ch.Meta, ch.Health = true, true
	}
	if setTaint(n, rep) {
		ch.Meta, ch.Health = true, true
	}
	if old, ok := ReadState(n); !ok || !sameState(old, st) {
		b, _ := json.Marshal(st)
		if len(st.Faults) == 0 && len(st.NVLinksUp) == 0 {
			b = nil
		}
		if setAnnotation(n, AnnotationState, string(b)) {
			ch.Meta = true
		}
	}
	return ch
}

func conditionIndex(n *corev1.Node) int {
	for i, c := range n.Status.Conditions {
		if c.Type == ConditionGPUHealthy {
			return i
		}
	}
	return -1
}

// setAnnotation sets key to v, or removes it when v is empty; it reports a change.
func setAnnotation(n *corev1.Node, key, v string) bool {
	old, had := n.Annotations[key]
	switch {
	case v == "" && had:
		delete(n.Annotations, key)
		return true
	case v != "" && old != v:
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[key] = v
		return true
	}
	return false
}

func setTaint(n *corev1.Node, rep health.Report) bool {
	value := ""
	if rep.Fatal {
		value = fatalChecks(rep)
	}
	var kept []corev1.Taint
	found := false
	for _, t := range n.Spec.Taints {
		if t.Key != TaintGPUFault {
			kept = append(kept, t)
			continue
		}
		if rep.Fatal && !found && t.Value == value && t.Effect == corev1.TaintEffectNoSchedule {
			kept = append(kept, t)
			found = true
		}
	}
	if rep.Fatal && !found {
		kept = append(kept, corev1.Taint{Key: TaintGPUFault, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
	if len(kept) == len(n.Spec.Taints) && (found || !rep.Fatal) {
		return false
	}
	n.Spec.Taints = kept
	return true
}

// fatalChecks names the fatal checks as a label value: "GPUCount_XID".
func fatalChecks(rep health.Report) string {
	seen := map[string]bool{}
	var out []string
	for _, f := range rep.Faults {
		if f.Fatal && f.Counts() && !seen[string(f.Check)] {
			seen[string(f.Check)] = true
			out = append(out, string(f.Check))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "_")
}

// ReadState returns the health state the agent kept on n; ok is false when
// there is none or it does not parse (the agent then starts afresh). Faults come
// back as failing at their last recorded time; the agent restarts their
// recovery clock on load.
func ReadState(n *corev1.Node) (health.State, bool) {
	v, had := n.Annotations[AnnotationState]
	if !had {
		return health.State{}, false
	}
	var st health.State
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return health.State{}, false
	}
	return st, true
}

// sameState compares what is worth keeping: the boot, each fault's identity,
// phase and fatality, and the NVLink baseline; not the per-poll timestamps.
func sameState(a, b health.State) bool {
	key := func(s health.State) string {
		var sb strings.Builder
		sb.WriteString(s.BootID)
		for _, f := range s.Faults {
			fmt.Fprintf(&sb, "|%d/%s/%s/%v", f.GPU, f.Check, f.Phase, f.Fatal)
		}
		gpus := make([]int, 0, len(s.NVLinksUp))
		for g := range s.NVLinksUp {
			gpus = append(gpus, g)
		}
		sort.Ints(gpus)
		for _, g := range gpus {
			fmt.Fprintf(&sb, "|nvl%d=%d", g, s.NVLinksUp[g])
		}
		return sb.String()
	}
	return key(a) == key(b)
}
