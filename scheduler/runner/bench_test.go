package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// Issue 4's figure: through one real API server, on 1,000 Nodes of 8 GPUs,
// bind 5,000 single-GPU pods and 200 gangs of 8 one-GPU pods; then, on the
// same API server and nodes, kube-scheduler (built from the same
// k8s.io/kubernetes) binds the same pods, as plain pods. Both clients may send
// 5,000 requests/s. Reported: pods bound per second, from the first create to
// the last bind. Run with: go test ./scheduler/runner -run '^$' -bench BindThroughAPI -benchtime 1x
func BenchmarkBindThroughAPI(b *testing.B) {
	const nodes, singles, gangs, gangSize = 1000, 5000, 200, 8
	cl := newCluster(b)
	ctx := context.Background()
	if err := cl.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube"}}); err != nil {
		b.Fatal(err)
	}
	cl.tiers()
	cl.team("alpha", "", "h100", 8*nodes)
	parallel(b, nodes, func(i int) error {
		_, err := testenv.CreateNode(ctx, cl.c, fmt.Sprintf("a-%d", i), 8, map[string]string{
			contract.LabelPool: "a", contract.LabelFlavor: "h100",
			contract.TopologyLabelPrefix + "rack": fmt.Sprintf("r%d", i/16),
			contract.TopologyLabelPrefix + "host": fmt.Sprintf("a-%d", i),
		})
		return err
	})
	for b.Loop() {
		s := cl.start(schedOptions{})
		b.ReportMetric(bindAll(b, cl, cl.ns, contract.SchedulerName, singles, gangs, gangSize), "allot-pods/s")
		s.stop()
		deleteAll(b, cl, cl.ns)

		stop := testenv.StartKubeScheduler(b, cl.env)
		b.ReportMetric(bindAll(b, cl, "kube", corev1.DefaultSchedulerName, singles, gangs, gangSize), "kube-scheduler-pods/s")
		stop()
		deleteAll(b, cl, "kube")
	}
}

// bindAll creates the pods in ns for the scheduler named and returns the pods
// bound per second from the first create to the last bind.
func bindAll(b *testing.B, cl *cluster, ns, schedulerName string, singles, gangs, gangSize int) float64 {
	b.Helper()
	ctx := context.Background()
	total := singles + gangs*gangSize
	start := time.Now()
	go parallel(b, total, func(i int) error {
		labels := map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production"}
		name := fmt.Sprintf("s%d", i)
		if i >= singles {
			g := (i - singles) / gangSize
			name = fmt.Sprintf("g%d-%d", g, (i-singles)%gangSize)
			if schedulerName == contract.SchedulerName {
				labels[contract.LabelGang] = fmt.Sprintf("g%d", g)
				labels[contract.LabelGangSize] = fmt.Sprint(gangSize)
			}
		}
		one := *resource.NewQuantity(1, resource.DecimalSI)
		return cl.c.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{
				Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{nodestate.ResourceGPU: one}, Limits: corev1.ResourceList{nodestate.ResourceGPU: one}},
			}}},
		})
	})
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var pods corev1.PodList
		if err := cl.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		if n == total {
			return float64(total) / time.Since(start).Seconds()
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s bound %d of %d pods in 10 minutes", schedulerName, n, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deleteAll(b *testing.B, cl *cluster, ns string) {
	b.Helper()
	if err := cl.c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0)); err != nil {
		b.Fatal(err)
	}
}

// parallel runs f(0..n-1) on 32 workers.
func parallel(b *testing.B, n int, f func(i int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
