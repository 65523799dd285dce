package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// GPUs held outside allot's accounting are never given out: another
// scheduler's pod, and a running pod allot can no longer account for (its
// team was deleted while it ran). When they end, their GPUs are given again.
func TestHeldGPUsAreNotGivenOut(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.team("beta", "", "h100", 32)
	cl.pool("a", "h100", 3, 8, 3)
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	cl.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "foreign"},
		Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName, NodeName: "a-2",
			Containers: []corev1.Container{{Name: "c", Image: "other:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus}, Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus},
			}}},
		},
	})
	cl.start(schedOptions{})

	alpha := cl.submit("alpha-run", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	if n := cl.waitBound(alpha)[0]; n == "a-2" {
		t.Fatalf("alpha's pod bound to a-2, which the other scheduler's pod fills")
	}
	cl.deleteTeam("alpha")
	cl.waitEvent(alpha[0], "NotAccounted", "GPUs are held")

	var beta []string
	for i := range 3 {
		beta = append(beta, cl.submit(fmt.Sprintf("beta-%d", i), podSpec{team: "beta", tier: "production", pods: 1, gpus: 8})...)
	}
	// One node is free: one of beta's pods runs, the others wait for nodes.
	cl.waitBound(beta[:1])
	for _, p := range beta[1:] {
		cl.waitPending(p, "h100")
	}
	cl.checkNoOvercommit(8)

	// The other scheduler's pod ends, then alpha's: beta's pods take their GPUs.
	cl.finish([]string{"foreign"})
	eventually(t, 20*time.Second, "two of beta's pods bound", func() error {
		if b := bound(cl.nodesOf(beta)); b != 2 {
			return fmt.Errorf("%d bound", b)
		}
		return nil
	})
	cl.checkNoOvercommit(8)
	cl.finish(alpha)
	cl.waitBound(beta)
	cl.checkNoOvercommit(8)
}

// A cordoned node and a node that stopped being Ready take no new work, and
// keep what runs there: the not-Ready node's pods are evicted only when its
// grace ends with it still not Ready; the cordoned node takes work again once
// uncordoned.
func TestClosedNodesKeepTheirWork(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 32)
	cl.pool("a", "h100", 2, 8, 2)
	const grace = 4 * time.Second
	cl.start(schedOptions{notReadyGrace: grace})

	run := cl.submit("run", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 4})
	x := cl.waitBound(run)[0]
	y := map[string]string{"a-0": "a-1", "a-1": "a-0"}[x]
	cl.updateNode(x, false, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	// Best fit would put it beside run, on x: cordoned, x takes nothing new.
	next := cl.submit("next", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 4})
	if got := cl.waitBound(next)[0]; got != y {
		t.Fatalf("pod next bound to %s, want %s (%s is cordoned)", got, y, x)
	}

	lost := time.Now().Truncate(time.Second) // the API keeps seconds
	cl.updateNode(y, true, func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = corev1.ConditionUnknown
				n.Status.Conditions[i].LastTransitionTime = metav1.NewTime(lost)
			}
		}
	})
	late := cl.submit("late", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 4})
	cl.waitPending(late[0], "h100")
	// Within the grace, nothing is evicted.
	if time.Sleep(grace / 4); time.Since(lost) < grace {
		if got := cl.nodesOf(append(run, next...)); got[0] != x || got[1] != y {
			t.Fatalf("pods moved or went within the grace: %v", got)
		}
	}
	// Past it, next's node is lost: next is evicted, run stays.
	eventually(t, 3*grace, "next evicted", func() error {
		if _, ok := cl.pods()[next[0]]; ok {
			return fmt.Errorf("pod next still there")
		}
		return nil
	})
	if gone := time.Since(lost); gone < grace {
		t.Errorf("next evicted %s after its node went not Ready, within the grace of %s", gone, grace)
	}
	if got := cl.nodesOf(run); got[0] != x {
		t.Fatalf("run left the cordoned node: %v", got)
	}
	// Uncordoned, x takes the late pod.
	cl.updateNode(x, false, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	if got := cl.waitBound(late)[0]; got != x {
		t.Fatalf("late bound to %s, want %s", got, x)
	}
	cl.checkNoOvercommit(8)
}

// updateNode changes a Node, its status too when status is set.
func (cl *cluster) updateNode(name string, status bool, change func(*corev1.Node)) {
	cl.t.Helper()
	var n corev1.Node
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		cl.t.Fatal(err)
	}
	change(&n)
	update := cl.c.Update
	if status {
		update = func(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
			return cl.c.Status().Update(ctx, obj)
		}
	}
	if err := update(context.Background(), &n); err != nil {
		cl.t.Fatal(err)
	}
}

// A stuck gang whose running pods end is not stuck any more, even when its
// Job made their replacements before they ended: the new pods are a new
// submission, with a pending reason, and run once their team is back.
func TestStuckGangReplacedPodsAreScheduled(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.pool("a", "h100", 3, 8, 3)
	cl.start(schedOptions{})
	job := cl.job("train", 2, 2)
	jobPod := func(name string) {
		cl.jobPod(job, name, 8, map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production"})
	}
	fail := func(name string) {
		var p corev1.Pod
		if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodFailed
		if err := cl.c.Status().Update(context.Background(), &p); err != nil {
			t.Fatal(err)
		}
	}
	jobPod("train-a")
	jobPod("train-b")
	cl.waitBound([]string{"train-a", "train-b"})
	cl.deleteTeam("alpha")
	cl.waitEvent("train-a", "NotAccounted", "GPUs are held")
	// Each pod fails after its Job made its replacement: the gang always has
	// a live pod.
	jobPod("train-c")
	fail("train-a")
	jobPod("train-d")
	fail("train-b")
	cl.waitPending("train-c", "team alpha")
	cl.team("alpha", "", "h100", 16)
	cl.waitBound([]string{"train-c", "train-d"})
	cl.checkNoOvercommit(8)
}

// GPUs the agent counts unhealthy on a usable node are held, not cut from the
// node: the pod running on all of them stays, accounted to its team; nothing
// new lands there; they are given again when the agent counts them healthy.
func TestFaultyGPUsAreHeld(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 16)
	cl.pool("a", "h100", 2, 8, 2)
	cl.start(schedOptions{})
	run := cl.submit("run", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	node := cl.waitBound(run)[0]
	cl.updateNode(node, false, func(n *corev1.Node) {
		n.Annotations = map[string]string{nodestate.AnnotationHealthyGPUs: "6"}
	})
	// The other node has room; this one none, even once run ends.
	late := cl.submit("late", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	if got := cl.waitBound(late)[0]; got == node {
		t.Fatalf("late bound to %s, whose GPUs run holds", node)
	}
	// Both count against alpha's quota: run was not dropped from its accounts.
	eventually(t, 10*time.Second, "run and late accounted to alpha", func() error {
		var team allotv1.Team
		if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "alpha"}, &team); err != nil {
			return err
		}
		if len(team.Status.Flavors) != 1 || team.Status.Flavors[0].UsedGPUs != 16 {
			return fmt.Errorf("status %+v", team.Status.Flavors)
		}
		return nil
	})
	cl.finish(run)
	later := cl.submit("later", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	cl.waitPending(later[0], "h100") // 6 healthy GPUs of 8
	cl.updateNode(node, false, func(n *corev1.Node) { delete(n.Annotations, nodestate.AnnotationHealthyGPUs) })
	if got := cl.waitBound(later)[0]; got != node {
		t.Fatalf("later bound to %s, want %s", got, node)
	}
	cl.checkNoOvercommit(8)
}

// deleteTeam deletes a Team object, as a revision that drops the team does.
func (cl *cluster) deleteTeam(name string) {
	cl.t.Helper()
	if err := cl.c.Delete(context.Background(), &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		cl.t.Fatal(err)
	}
}
