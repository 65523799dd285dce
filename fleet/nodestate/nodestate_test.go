package nodestate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/allot-dev/allot/fleet/health"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func gpuNode(gpus int64) *corev1.Node {
	n := &corev1.Node{}
	n.Name = "n1"
	n.Status.Allocatable = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}}
	return n
}

func healthyReport() health.Report {
	return health.Report{Healthy: true, Reason: health.ReasonHealthy, Message: "8 of 8 GPUs healthy", GPUs: 8, HealthyGPUs: 8}
}

func fatalReport() (health.Report, health.State) {
	f := health.Fault{GPU: 2, Check: health.CheckXID, Fatal: true, Phase: health.Active, Detail: "XID 79", Since: t0, LastFailed: t0}
	g := health.Fault{GPU: health.NodeGPU, Check: health.CheckGPUCount, Fatal: true, Phase: health.Active, Detail: "7 of 8", Since: t0, LastFailed: t0}
	return health.Report{Reason: "GPUCount,XID", Message: "7 of 8 GPUs healthy: ...", Fatal: true, GPUs: 8, HealthyGPUs: 7, Faults: []health.Fault{g, f}},
		health.State{BootID: "b1", Faults: []health.Fault{g, f}}
}

func TestApply(t *testing.T) {
	n := gpuNode(8)
	// First healthy report: the condition appears; nothing else.
	ch := Apply(n, healthyReport(), health.State{BootID: "b1"}, t0, 5*time.Minute)
	if !ch.Status || ch.Meta || !ch.Health {
		t.Fatalf("first report: %+v", ch)
	}
	if c := n.Status.Conditions[1]; c.Status != corev1.ConditionTrue || c.Reason != health.ReasonHealthy {
		t.Fatalf("condition %+v", c)
	}
	// The same report a minute later changes nothing; after the heartbeat, only the condition.
	if ch := Apply(n, healthyReport(), health.State{BootID: "b1"}, t0.Add(time.Minute), 5*time.Minute); ch != (Change{}) {
		t.Fatalf("steady report: %+v", ch)
	}
	if ch := Apply(n, healthyReport(), health.State{BootID: "b1"}, t0.Add(6*time.Minute), 5*time.Minute); ch != (Change{Status: true}) {
		t.Fatalf("heartbeat: %+v", ch)
	}

	rep, st := fatalReport()
	ch = Apply(n, rep, st, t0.Add(7*time.Minute), 5*time.Minute)
	if ch != (Change{Meta: true, Status: true, Health: true}) {
		t.Fatalf("fatal report: %+v", ch)
	}
	c := n.Status.Conditions[1]
	if c.Status != corev1.ConditionFalse || c.Reason != "GPUCount,XID" || !c.LastTransitionTime.Time.Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("condition %+v", c)
	}
	if n.Annotations[AnnotationHealthyGPUs] != "7" {
		t.Fatalf("annotations %v", n.Annotations)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[1] != (corev1.Taint{Key: TaintGPUFault, Value: "GPUCount_XID", Effect: corev1.TaintEffectNoSchedule}) {
		t.Fatalf("taints %+v", n.Spec.Taints)
	}
	got, ok := ReadState(n)
	if !ok || len(got.Faults) != 2 || got.BootID != "b1" {
		t.Fatalf("state kept on the node: %+v %v", got, ok)
	}
	if r := Read(n); r.Usable || r.Reason != ReasonGPUFault {
		t.Fatalf("tainted node reads %+v", r)
	}
	// Timestamps alone do not rewrite the state annotation.
	st.Faults[0].LastFailed = t0.Add(8 * time.Minute)
	if ch := Apply(n, rep, st, t0.Add(8*time.Minute), 5*time.Minute); ch.Meta {
		t.Fatalf("a newer LastFailed rewrote the node: %+v", ch)
	}

	// Recovery removes the annotation, the taint and the state, keeps the other taint.
	ch = Apply(n, healthyReport(), health.State{BootID: "b2"}, t0.Add(time.Hour), 5*time.Minute)
	if ch != (Change{Meta: true, Status: true, Health: true}) {
		t.Fatalf("recovery: %+v", ch)
	}
	if _, ok := n.Annotations[AnnotationHealthyGPUs]; ok || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "other" {
		t.Fatalf("after recovery: annotations %v taints %v", n.Annotations, n.Spec.Taints)
	}
	if _, ok := n.Annotations[AnnotationState]; ok {
		t.Fatalf("a state without faults stays on the node: %v", n.Annotations)
	}
	if r := Read(n); !r.Usable || r.HealthyGPUs != 8 || r.Reason != "" {
		t.Fatalf("recovered node reads %+v", r)
	}
}

func TestRead(t *testing.T) {
	tests := map[string]struct {
		edit func(*corev1.Node)
		want Capacity
	}{
		"healthy":            {edit: func(*corev1.Node) {}, want: Capacity{GPUs: 8, HealthyGPUs: 8, Usable: true}},
		"not ready":          {edit: func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, want: Capacity{GPUs: 8, Reason: ReasonNotReady}},
		"no ready condition": {edit: func(n *corev1.Node) { n.Status.Conditions = nil }, want: Capacity{GPUs: 8, Reason: ReasonNotReady}},
		"fatal taint": {edit: func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintGPUFault, Effect: corev1.TaintEffectNoSchedule})
		}, want: Capacity{GPUs: 8, Reason: ReasonGPUFault}},
		"some GPUs unhealthy": {edit: func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationHealthyGPUs: "6"} }, want: Capacity{GPUs: 8, HealthyGPUs: 6, Usable: true, Reason: ReasonGPUUnhealthy}},
		"none healthy": {edit: func(n *corev1.Node) {
			n.Annotations = map[string]string{AnnotationHealthyGPUs: "0"}
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: ConditionGPUHealthy, Status: corev1.ConditionFalse})
		}, want: Capacity{GPUs: 8, Reason: ReasonGPUUnhealthy}},
		"more healthy than allocatable": {edit: func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationHealthyGPUs: "16"} }, want: Capacity{GPUs: 8, HealthyGPUs: 8, Usable: true}},
		"unreadable annotation":         {edit: func(n *corev1.Node) { n.Annotations = map[string]string{AnnotationHealthyGPUs: "many"} }, want: Capacity{GPUs: 8, Reason: ReasonGPUUnhealthy}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := gpuNode(8)
			tc.edit(n)
			if got := Read(n); got != tc.want {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
		})
	}
}
