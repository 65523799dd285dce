package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/scheduler/runner"
)

// fleetWorker is a worker cluster of the fleet test: its own API server.
type fleetWorker struct {
	env  *testenv.Env
	kc   []byte
	stop func() error
}

// TestFleetRoutesJobs runs a hub and two workers, each a real API server
// (issue 17): the hub routes its Jobs by cost with capacity in both (the
// other being the better fit), by fit when the cheap cluster is full, to the
// cluster a job pins; a team's quota is
// fleet-wide (a team runs all its quota in one cluster, and no more); the
// worker's status is mirrored back; a worker cut off from the hub longer than
// its failoverAfter loses its jobs to the other (those that fit there; the
// rest wait), and when it is reached again
// its stale copy is deleted.
func TestFleetRoutesJobs(t *testing.T) {
	hubEnv := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	workers := map[string]*fleetWorker{}
	for name, nodes := range map[string]int{"cheap": 6, "dear": 5} {
		workers[name] = startWorker(t, ctx, name, nodes)
		env := workers[name].env
		// What the worker's capacity controller applies with --cluster and
		// --quota-from-hub: its pool, the teams' whole quotas.
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cv"}},
			&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
			&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 64}}}},
			&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "cv"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 24}}}},
			&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.PoolSpec{Cluster: name, Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 8}, NodesTarget: 8, Price: allotv1.Price{OnDemandPerNodeHour: "1"}}},
		} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		startWorkerScheduler(t, ctx, env, name)
	}
	c := hubEnv.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cv"}},
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 64}}}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "cv"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 24}}}},
	}
	for name, price := range map[string]string{"cheap": "10", "dear": "30"} {
		objs = append(objs,
			&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.PoolSpec{Cluster: name, Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 8}, NodesTarget: 8, Price: allotv1.Price{OnDemandPerNodeHour: allotv1.Decimal(price)}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": workers[name].kc}},
			&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: name}, FailoverAfter: &metav1.Duration{Duration: 2 * time.Second}}},
		)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	mgr := newManager(t, hubEnv)
	ws := hub.NewWorkers()
	if err := (&hub.ClusterReconciler{Client: mgr.GetClient(), Namespace: ns, Interval: 200 * time.Millisecond, ProbeTimeout: time.Second, Workers: ws}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics := hub.NewMetrics(reg)
	if err := (&hub.Router{Workers: ws, Interval: 200 * time.Millisecond, Metrics: metrics}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	startManager(t, ctx, mgr)

	hubJob := func(team, name string, pods int32, labels map[string]string) {
		t.Helper()
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name}, Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(hub.ManagedBy), Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				SchedulerName: contract.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "train", Image: "trainer", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(8, resource.DecimalSI)}}}},
			}},
		}}
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	getHub := func(team, name string) *batchv1.Job {
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: team, Name: name}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	// routedTo waits until the hub Job is routed to cluster (attempt) and its
	// copy is there, pinned.
	routedTo := func(team, name, cluster, attempt string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s routed to %s", team, name, cluster), func() error {
			j := getHub(team, name)
			if got := j.Annotations[hub.AnnotationCluster]; got != cluster || j.Annotations[hub.AnnotationAttempt] != attempt {
				return fmt.Errorf("routed to %q attempt %q (pending: %q)", got, j.Annotations[hub.AnnotationAttempt], j.Annotations[hub.AnnotationPending])
			}
			var cp batchv1.Job
			if err := workers[cluster].env.Client.Get(ctx, client.ObjectKey{Namespace: team, Name: name}, &cp); err != nil {
				return err
			}
			fence, err := time.Parse(time.RFC3339, cp.Annotations[contract.AnnotationHubFence])
			if err != nil || time.Until(fence) <= 0 || time.Until(fence) > 2*time.Second {
				return fmt.Errorf("copy in %s: fence %q, want within failoverAfter (2s) from now", cluster, cp.Annotations[contract.AnnotationHubFence])
			}
			if cp.Spec.Template.Labels[contract.LabelCluster] != cluster || cp.Labels[hub.LabelHubJob] != string(j.UID) || cp.Annotations[hub.AnnotationAttempt] != attempt || cp.Spec.ManagedBy != nil {
				return fmt.Errorf("copy in %s: labels %v, template labels %v, annotations %v, managedBy %v", cluster, cp.Labels, cp.Spec.Template.Labels, cp.Annotations, cp.Spec.ManagedBy)
			}
			return nil
		})
	}

	// By cost: both have room, and the dear cluster is the better fit (fewer
	// free GPUs); the cheap one takes it.
	hubJob("ml", "a", 1, nil)
	routedTo("ml", "a", "cheap", "1")
	if why := getHub("ml", "a").Annotations[hub.AnnotationWhy]; !strings.Contains(why, "routed to cheap: the cheapest") || !strings.Contains(why, "$1.25 per GPU-hour, 48 of 48 GPUs free") ||
		!strings.Contains(why, "not dear: $3.75 per GPU-hour, dearer (40 of 40 GPUs free)") {
		t.Errorf("ml/a: why %q", why)
	}
	// Pinned: the cheap cluster has room, the job names the dear one.
	hubJob("ml", "c", 1, map[string]string{contract.LabelCluster: "dear"})
	routedTo("ml", "c", "dear", "1")
	// The cheap cluster's last 40 GPUs.
	hubJob("ml", "b", 5, nil)
	routedTo("ml", "b", "cheap", "1")
	// By fit: the cheap cluster is full. And the quota is fleet-wide: cv's 24
	// GPUs all in one cluster (a split of its quota by the clusters' capacity
	// would give the dear cluster 10 of them)...
	hubJob("cv", "d", 3, nil)
	routedTo("cv", "d", "dear", "1")
	if why := getHub("cv", "d").Annotations[hub.AnnotationWhy]; !strings.Contains(why, "not cheap: 0 of 48 GPUs free, fewer than 24 ($1.25 per GPU-hour)") {
		t.Errorf("cv/d: why %q", why)
	}
	// Each worker's own manager binds the pods of its copies (made here as
	// the worker's Job controller would), on its nodes.
	for _, j := range []struct{ cluster, team, name string }{{"cheap", "ml", "a"}, {"dear", "cv", "d"}} {
		for _, node := range runCopy(t, ctx, workers[j.cluster].env.Client, j.team, j.name) {
			if !strings.HasPrefix(node, j.cluster+"-") {
				t.Errorf("a pod of %s/%s was bound to %s, not a node of %s", j.team, j.name, node, j.cluster)
			}
		}
	}
	// ... and no more.
	hubJob("cv", "e", 1, nil)
	testenv.Eventually(t, 30*time.Second, "cv/e waits for quota", func() error {
		j := getHub("cv", "e")
		if p := j.Annotations[hub.AnnotationPending]; !strings.Contains(p, "quota") || j.Annotations[hub.AnnotationCluster] != "" {
			return fmt.Errorf("cluster %q, pending %q", j.Annotations[hub.AnnotationCluster], p)
		}
		return nil
	})

	// A Job of the same name in the worker that the hub did not make: the
	// copy cannot be made there. The hub says so on its Job, and leaves the
	// worker's Job alone (even once its own Job is gone).
	dear := workers["dear"].env.Client
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "x"}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "other", Image: "other"}}}},
	}}
	if err := dear.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	hubJob("ml", "x", 1, map[string]string{contract.LabelCluster: "dear"})
	testenv.Eventually(t, 30*time.Second, "ml/x says its copy cannot be made", func() error {
		j := getHub("ml", "x")
		if c := j.Annotations[hub.AnnotationConflict]; j.Annotations[hub.AnnotationCluster] != "dear" || !strings.Contains(c, "cluster dear has a Job ml/x this hub did not make") {
			return fmt.Errorf("cluster %q, conflict %q", j.Annotations[hub.AnnotationCluster], c)
		}
		return nil
	})
	if err := c.Delete(ctx, getHub("ml", "x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // five passes
	var still batchv1.Job
	if err := dear.Get(ctx, client.ObjectKeyFromObject(foreign), &still); err != nil || still.UID != foreign.UID || still.DeletionTimestamp != nil {
		t.Fatalf("the worker's own Job ml/x was touched by the hub: %v, deleting %v", err, still.DeletionTimestamp)
	}

	// The worker's status comes back to the hub.
	cheap := workers["cheap"].env.Client
	var cp batchv1.Job
	// The hub renews the copy's fence as it goes: read again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cheap.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "a"}, &cp); err != nil {
			return err
		}
		cp.Status.Active, cp.Status.StartTime = 1, &metav1.Time{Time: time.Now().Truncate(time.Second)}
		return cheap.Status().Update(ctx, &cp)
	}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "status mirrored", func() error {
		if j := getHub("ml", "a"); j.Status.Active != 1 || j.Status.StartTime == nil {
			return fmt.Errorf("hub status %+v", j.Status)
		}
		return nil
	})

	// The hub loses the cheap worker (its kubeconfig points nowhere): after
	// failoverAfter, ml/a goes to the dear cluster as attempt 2...
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cheap"}, &sec); err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	sec.Data["kubeconfig"] = []byte(strings.ReplaceAll(string(workers["cheap"].kc), workers["cheap"].env.Config.Host, "https://"+addr))
	if err := c.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	routedTo("ml", "a", "dear", "2")
	testenv.Eventually(t, 30*time.Second, "ml/b waits: it fits in no reachable cluster", func() error {
		j := getHub("ml", "b")
		if p := j.Annotations[hub.AnnotationPending]; j.Annotations[hub.AnnotationCluster] != "" || !strings.Contains(p, "InsufficientNodes") {
			return fmt.Errorf("cluster %q, pending %q", j.Annotations[hub.AnnotationCluster], p)
		}
		return nil
	})
	// ... while its copy of attempt 1 is still in the cheap worker, which the
	// hub cannot reach. Reached again, the stale copy is deleted.
	if err := cheap.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "a"}, &cp); err != nil {
		t.Fatalf("the stale copy should still be there while the hub cannot reach it: %v", err)
	}
	// Its fence passed before the job moved: the worker's manager does not
	// start it (TestHubFence in scheduler/runner).
	if fence, err := time.Parse(time.RFC3339, cp.Annotations[contract.AnnotationHubFence]); err != nil || fence.After(time.Now()) {
		t.Errorf("the stale copy's fence %q has not passed though its job moved", cp.Annotations[contract.AnnotationHubFence])
	}
	// Counted before the cheap worker is back (ml/b goes there then).
	for _, m := range []struct {
		name, cluster string
		want          float64
	}{{"allot_hub_jobs_routed_total", "cheap", 2}, {"allot_hub_jobs_routed_total", "dear", 4}, {"allot_hub_failovers_total", "cheap", 2}} {
		if got := testenv.Metric(t, reg, m.name, map[string]string{"cluster": m.cluster}); got != m.want {
			t.Errorf("%s{cluster=%s} = %v, want %v", m.name, m.cluster, got, m.want)
		}
	}
	sec.Data["kubeconfig"] = workers["cheap"].kc
	if err := c.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "stale copy deleted", func() error {
		var j batchv1.Job
		err := cheap.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "a"}, &j)
		if err == nil && j.DeletionTimestamp == nil {
			return fmt.Errorf("copy of attempt %s still in the cheap cluster", j.Annotations[hub.AnnotationAttempt])
		}
		return client.IgnoreNotFound(err)
	})
	if j := getHub("ml", "a"); j.Annotations[hub.AnnotationCluster] != "dear" || j.Annotations[hub.AnnotationAttempt] != "2" {
		t.Errorf("after the worker came back, ml/a is routed to %q attempt %q: want dear, 2", j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt])
	}
	// ml/b, which waited for room, fits in the cheap worker again.
	routedTo("ml", "b", "cheap", "2")
}

// startWorkerScheduler runs a worker's embedded scheduler, as its allot
// manager --cluster NAME does.
func startWorkerScheduler(t *testing.T, ctx context.Context, env *testenv.Env, cluster string) {
	t.Helper()
	mgr := newManager(t, env)
	r := runner.New(runner.Options{Cluster: cluster, CycleInterval: 5 * time.Millisecond, Resync: 100 * time.Millisecond, SyncTimeout: 5 * time.Second})
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	startManager(t, ctx, mgr)
}

// runCopy makes the pods of the hub's copy ns/name in a worker, as the
// worker's Job controller would (none runs in the test), and returns the
// nodes the worker's scheduler binds them to.
func runCopy(t *testing.T, ctx context.Context, c client.Client, ns, name string) []string {
	t.Helper()
	pods, err := testenv.CreateJobPods(ctx, c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("pods of %s/%s bound", ns, name), func() error {
		nodes = nodes[:0]
		for _, n := range pods {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &p); err != nil {
				return err
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound: %+v", n, p.Status.Conditions)
			}
			nodes = append(nodes, p.Spec.NodeName)
		}
		return nil
	})
	return nodes
}
