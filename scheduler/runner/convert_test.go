package runner

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// How a node's readiness, GPU-fault taint and cordon make it healthy, closed
// (no new work, running work stays) or unhealthy (its gangs are evicted).
func TestModelNodeHealth(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const grace = 5 * time.Minute
	pools := map[string]poolInfo{"a": {flavor: "h100"}}
	node := func(ready corev1.ConditionStatus, since time.Duration, fault, cordoned bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Labels: map[string]string{contract.LabelPool: "a"}}}
		n.Status.Allocatable = corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-since))}}
		if fault {
			n.Spec.Taints = []corev1.Taint{{Key: nodestate.TaintGPUFault, Effect: corev1.TaintEffectNoSchedule}}
		}
		n.Spec.Unschedulable = cordoned
		return n
	}
	for _, tc := range []struct {
		name              string
		n                 *corev1.Node
		grace             time.Duration
		unhealthy, closed bool
		reason            string
	}{
		{"ready", node(corev1.ConditionTrue, time.Hour, false, false), grace, false, false, ""},
		{"cordoned", node(corev1.ConditionTrue, time.Hour, false, true), grace, false, true, ""},
		{"not ready within the grace", node(corev1.ConditionUnknown, time.Minute, false, false), grace, false, true, nodestate.ReasonNotReady},
		{"not ready past the grace", node(corev1.ConditionFalse, 6*time.Minute, false, false), grace, true, false, nodestate.ReasonNotReady},
		{"not ready, no grace", node(corev1.ConditionFalse, time.Second, false, false), -1, true, false, nodestate.ReasonNotReady},
		{"GPU fault", node(corev1.ConditionTrue, time.Hour, true, false), grace, true, false, nodestate.ReasonGPUFault},
		{"GPU fault on a node not ready: no grace", node(corev1.ConditionUnknown, time.Second, true, false), grace, true, false, nodestate.ReasonGPUFault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := modelNode(tc.n, pools, "", tc.grace, now)
			if !ok {
				t.Fatal("node not modelled")
			}
			if m.spec.Unhealthy != tc.unhealthy || m.closed() != tc.closed || m.reason != tc.reason {
				t.Errorf("unhealthy %v, closed %v, reason %q; want %v, %v, %q", m.spec.Unhealthy, m.closed(), m.reason, tc.unhealthy, tc.closed, tc.reason)
			}
			if m.spec.GPUs != 8 {
				t.Errorf("GPUs = %d, want 8 (an unusable node keeps its size)", m.spec.GPUs)
			}
		})
	}
}

// A usable node with GPUs the agent counts unhealthy keeps its size; the
// unhealthy ones are held.
func TestModelNodeFaultyGPUs(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Labels: map[string]string{contract.LabelPool: "a"},
		Annotations: map[string]string{nodestate.AnnotationHealthyGPUs: "6"}}}
	n.Status.Allocatable = corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	m, ok := modelNode(n, map[string]poolInfo{"a": {flavor: "h100"}}, "", time.Minute, time.Now())
	if !ok || m.spec.GPUs != 8 || m.faulty != 2 || m.spec.Unhealthy || m.closed() {
		t.Errorf("model = %+v, want 8 GPUs of which 2 faulty, healthy, open", m)
	}
}

// The restarts kept for a gang that spans Jobs go when one of its Jobs goes: a
// later gang of the same name starts from none.
func TestJobDeletionDropsItsGangsRestarts(t *testing.T) {
	r := New(Options{})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "leader"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "leader-0", UID: "u1",
		Labels:          map[string]string{contract.LabelTeam: "a", contract.LabelGang: "js", contract.LabelGangSize: "4"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "leader", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName}}
	r.upsertPod(pod)
	if got := r.st.pods["u1"].gang; got != "ns/gang/js" {
		t.Fatalf("gang = %q, want ns/gang/js", got)
	}
	r.st.restarts["ns/gang/js"] = 2 // evicted from a failed node
	r.deletePod(pod)
	if r.st.restarts["ns/gang/js"] != 2 {
		t.Fatal("restarts dropped with the pod: its Job's next pod would lose them")
	}
	r.deleteJob(job)
	if n, ok := r.st.restarts["ns/gang/js"]; ok {
		t.Errorf("restarts %d kept after the Job went", n)
	}
}

// TestPoolPriceOrdersClusters: a node costs its Pool's on-demand price per
// GPU-hour, in millionths of a dollar; a price that does not parse is 0.
func TestPoolPriceOrdersClusters(t *testing.T) {
	p := &allotv1.Pool{Spec: allotv1.PoolSpec{Flavor: "h100", GPUsPerNode: 8, Price: allotv1.Price{OnDemandPerNodeHour: "88.2532"}}}
	if got := poolInfoOf(p).cost; got != 11_031_650 {
		t.Errorf("cost %d, want 11031650", got)
	}
	p.Spec.Price.OnDemandPerNodeHour = "a lot"
	if got := poolInfoOf(p).cost; got != 0 {
		t.Errorf("cost of an unparsable price %d, want 0", got)
	}
}
