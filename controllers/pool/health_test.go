package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

func node(name string, gpus int64, ready bool, edit func(*corev1.Node)) corev1.Node {
	n := corev1.Node{}
	n.Name = name
	n.Status.Allocatable = corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	if edit != nil {
		edit(&n)
	}
	return n
}

func TestObserve(t *testing.T) {
	pool := &allotv1.Pool{Spec: allotv1.PoolSpec{GPUsPerNode: 8, NodesTarget: 4, SpareNodes: 1}}
	taint := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: nodestate.TaintGPUFault, Effect: corev1.TaintEffectNoSchedule}}
	}
	fewer := func(n *corev1.Node) { n.Annotations = map[string]string{nodestate.AnnotationHealthyGPUs: "6"} }
	for name, tc := range map[string]struct {
		nodes     []corev1.Node
		want      Health
		wantReady bool
	}{
		"all healthy, spare node included": {
			nodes:     []corev1.Node{node("a", 8, true, nil), node("b", 8, true, nil), node("c", 8, true, nil), node("d", 8, true, nil)},
			want:      Health{Nodes: 4, UsableNodes: 4, GPUs: 32, HealthyGPUs: 32, NeededGPUs: 24},
			wantReady: true,
		},
		"one fatal fault: the spare node covers it": {
			nodes:     []corev1.Node{node("a", 8, true, taint), node("b", 8, true, nil), node("c", 8, true, nil), node("d", 8, true, nil)},
			want:      Health{Nodes: 4, UsableNodes: 3, GPUs: 32, HealthyGPUs: 24, NeededGPUs: 24, Faulty: []Fault{{"a", nodestate.ReasonGPUFault}}},
			wantReady: true,
		},
		"a fault, a node not ready, two GPUs down: below need": {
			nodes: []corev1.Node{node("d", 8, true, taint), node("b", 8, false, nil), node("c", 8, true, fewer), node("a", 8, true, nil)},
			want: Health{Nodes: 4, UsableNodes: 2, GPUs: 32, HealthyGPUs: 14, NeededGPUs: 24,
				Faulty: []Fault{{"b", nodestate.ReasonNotReady}, {"c", nodestate.ReasonGPUUnhealthy}, {"d", nodestate.ReasonGPUFault}}},
		},
		"no nodes yet": {
			want: Health{NeededGPUs: 24},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Observe(pool, tc.nodes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
			if got.CapacityReady() != tc.wantReady {
				t.Errorf("CapacityReady = %v: %s", got.CapacityReady(), got.Message())
			}
		})
	}
}

func TestMessage(t *testing.T) {
	h := Health{Nodes: 12, UsableNodes: 0, NeededGPUs: 96}
	for i := range 12 {
		h.Faulty = append(h.Faulty, Fault{Node: string(rune('a' + i)), Reason: nodestate.ReasonNotReady})
	}
	want := "0 healthy GPUs of 96 needed (0 of 12 nodes usable); faulty: a (NotReady), b (NotReady), c (NotReady), d (NotReady), e (NotReady), f (NotReady), g (NotReady), h (NotReady), i (NotReady), j (NotReady), and 2 more"
	if got := h.Message(); got != want {
		t.Errorf("Message:\n got %s\nwant %s", got, want)
	}
}
