package runner_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/scheduler/runner"
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
				Requests: corev1.ResourceList{runner.GPUResource: gpus}, Limits: corev1.ResourceList{runner.GPUResource: gpus},
			}}},
		},
	})
	cl.start(schedOptions{})

	alpha := cl.submit("alpha-run", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
	if n := cl.waitBound(alpha)[0]; n == "a-2" {
		t.Fatalf("alpha's pod bound to a-2, which the other scheduler's pod fills")
	}
	var team allotv1.Team
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: "alpha"}, &team); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Delete(context.Background(), &team); err != nil {
		t.Fatal(err)
	}
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
	cl.waitBound(beta[:2])
	cl.waitPending(beta[2], "h100")
	cl.finish(alpha)
	cl.waitBound(beta)
	cl.checkNoOvercommit(8)
}
