package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
)

// The throughput workload (issue 19): 1,000 nodes of 8 GPUs, 5,000 one-pod
// jobs and 200 jobs of 8 pods, every pod one GPU (6,600 of the 8,000).
const (
	tpNodes   = 1_000
	tpSingles = 5_000
	tpGangs   = 200
	tpGang    = 8
)

// BenchmarkThroughput measures allot's embedded scheduler against Kueue with
// kube-scheduler on the same workload of Jobs, each side on its own API
// server of the same nodes, with the same Job controller
// (kube-controller-manager's) making the pods: the time from the first Job
// created to the last pod bound. Each side runs -benchtime times (3x for the
// record: make bench-kueue); the metrics are the median and the range. It
// runs only with -bench (about 15 minutes here for 3x).
func BenchmarkThroughput(b *testing.B) {
	for _, side := range []struct {
		name string
		run  func(*testing.B) time.Duration
	}{{"allot", throughputAllot}, {"kueue", throughputKueue}} {
		b.Run(side.name, func(b *testing.B) {
			var runs []float64
			for b.Loop() {
				runs = append(runs, side.run(b).Seconds())
			}
			slices.Sort(runs)
			b.ReportMetric(runs[len(runs)/2], "s-to-last-bind")
			b.ReportMetric(runs[0], "min-s")
			b.ReportMetric(runs[len(runs)-1], "max-s")
		})
	}
}

// parallel runs f(i) for i in [0, n) on 16 workers and fails b on the first
// error.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func tpCreateNodes(b *testing.B, c client.Client) {
	b.Helper()
	parallel(b, tpNodes, func(i int) error {
		_, err := testenv.CreateNode(context.Background(), c, fmt.Sprintf("n%04d", i), 8, map[string]string{contract.LabelFlavor: "l4", contract.LabelPool: "l4"})
		return err
	})
}

func throughputAllot(b *testing.B) time.Duration {
	env := testenv.Start(b)
	ctx := context.Background()
	c := env.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "solo"}},
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Spec: allotv1.TierSpec{Priority: 10}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "solo"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "l4", Nominal: tpNodes * 8}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	tpCreateNodes(b, c)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}) // a second run in this process
	if err != nil {
		b.Fatal(err)
	}
	core := scheduler.DefaultOptions()
	core.GangTimeout = 0 // no kubelet runs the pods
	if err := runner.New(runner.Options{Core: &core}).SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(2 * time.Second) // the scheduler's caches synced

	testenv.StartJobController(b, env)
	start := time.Now()
	parallel(b, tpSingles+tpGangs, func(i int) error {
		if i < tpSingles {
			return c.Create(ctx, tpJob(fmt.Sprintf("s%d", i), 1, contract.SchedulerName, nil))
		}
		g := fmt.Sprintf("g%d", i-tpSingles)
		return c.Create(ctx, tpJob(g, tpGang, contract.SchedulerName, map[string]string{contract.LabelGang: g, contract.LabelGangSize: fmt.Sprint(tpGang)}))
	})
	tpAllBound(b, c)
	return time.Since(start)
}

func throughputKueue(b *testing.B) time.Duration {
	env := testenv.Start(b)
	testenv.StartKueue(b, env)
	ctx := context.Background()
	c := env.Client
	dir := b.TempDir()
	repo := strings.NewReplacer("nodes: {min: 2, max: 2}", fmt.Sprintf("nodes: {min: %d, max: %d}", tpNodes, tpNodes), "nominal: 16", fmt.Sprintf("nominal: %d", tpNodes*8)).Replace(side)
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(repo), 0o644); err != nil {
		b.Fatal(err)
	}
	o := render(b, dir)[0]
	apply(b, c, o)
	active(b, c, o)
	tpCreateNodes(b, c)

	testenv.StartKubeScheduler(b, env)
	testenv.StartJobController(b, env)
	queued := map[string]string{rkueue.LabelQueueName: "solo", rkueue.LabelPriorityClass: "batch"}
	start := time.Now()
	parallel(b, tpSingles+tpGangs, func(i int) error {
		var j *batchv1.Job
		if i < tpSingles {
			j = tpJob(fmt.Sprintf("s%d", i), 1, corev1.DefaultSchedulerName, nil)
		} else {
			j = tpJob(fmt.Sprintf("g%d", i-tpSingles), tpGang, corev1.DefaultSchedulerName, nil)
		}
		j.Labels, j.Spec.Suspend = queued, ptrTo(true)
		return c.Create(ctx, j)
	})
	tpAllBound(b, c)
	return time.Since(start)
}

// tpJob is a Job of the throughput workload in namespace solo: pods pods of
// one GPU, scheduled by scheduler, its pod template labelled labels.
func tpJob(name string, pods int32, scheduler string, labels map[string]string) *batchv1.Job {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "solo", Name: name},
		Spec: batchv1.JobSpec{Parallelism: &pods, Completions: &pods,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				SchedulerName: scheduler, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{rkueue.ResourceGPU: one}, Limits: corev1.ResourceList{rkueue.ResourceGPU: one}}}}}}}}
}

// tpAllBound waits until every pod of the workload is bound.
func tpAllBound(b *testing.B, c client.Client) {
	b.Helper()
	want := tpSingles + tpGangs*tpGang
	testenv.Eventually(b, 20*time.Minute, "every pod bound", func() error {
		var l corev1.PodList
		if err := c.List(context.Background(), &l, client.InNamespace("solo")); err != nil {
			return err
		}
		bound := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound < want {
			return fmt.Errorf("%d of %d bound", bound, want)
		}
		return nil
	})
}
