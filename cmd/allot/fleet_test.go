package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
)

// TestFleetOutageAndReturn runs a fleet as it is deployed: a hub and two
// workers, each its own API server, each running allot manager (--hub; and
// --cluster NAME --quota-from-hub), as the binary starts it. A worker's API
// server stops with a job running there: no sooner than the fence of its
// copy, the job is routed to the other worker and runs there, counted once
// in its team's fleet-wide quota; when the worker's API server comes back
// with the old copy in it, the hub deletes that copy. A worker whose API
// server is down for less than failoverAfter (a flap) keeps its job: no
// failover, no second copy.
func TestFleetOutageAndReturn(t *testing.T) {
	const failoverAfter = 25 * time.Second // over two probes (every 10 s): a flap is seen, and outlived
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv := testenv.Start(t)
	c := hubEnv.Client
	team := func() []client.Object {
		return []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
			&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
			&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 16}}}},
		}
	}
	hubObjs := append(team(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allot-system"}})
	workers := map[string]*testenv.Env{}
	for name, price := range map[string]string{"east": "10", "west": "30"} {
		env := testenv.Start(t)
		workers[name] = env
		pool := &allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.PoolSpec{Cluster: name, Flavor: "h100", GPUsPerNode: 8,
			Nodes: allotv1.NodeBounds{Max: 2}, NodesTarget: 2, Price: allotv1.Price{OnDemandPerNodeHour: allotv1.Decimal(price)}}}
		for _, o := range append(team(), pool.DeepCopy()) {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if _, err := testenv.CreateNode(ctx, env.Client, fmt.Sprintf("%s-%d", name, i), 8, map[string]string{contract.LabelPool: name, contract.LabelFlavor: "h100"}); err != nil {
				t.Fatal(err)
			}
		}
		kc, err := env.Kubeconfig("")
		if err != nil {
			t.Fatal(err)
		}
		hubObjs = append(hubObjs, pool,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: name}, Data: map[string][]byte{"kubeconfig": kc}},
			&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: name}, FailoverAfter: &metav1.Duration{Duration: failoverAfter}}})
		startManagerProcess(t, ctx, env, "--cluster", name, "--quota-from-hub")
	}
	for _, o := range hubObjs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	startManagerProcess(t, ctx, hubEnv, "--hub", "--hub-namespace", "allot-system")

	submit := func(name string) {
		t.Helper()
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(hub.ManagedBy), Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "train", Image: "trainer", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(8, resource.DecimalSI)}}}}}},
		}}
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	hubJob := func(name string) *batchv1.Job {
		t.Helper()
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	copyIn := func(cluster, name string) (*batchv1.Job, error) {
		var cp batchv1.Job
		err := workers[cluster].Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &cp)
		if err != nil || cp.DeletionTimestamp != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return &cp, nil
	}
	routedTo := func(name, cluster, attempt string) {
		t.Helper()
		testenv.Eventually(t, 2*failoverAfter, fmt.Sprintf("ml/%s routed to %s (attempt %s)", name, cluster, attempt), func() error {
			j := hubJob(name)
			if j.Annotations[hub.AnnotationCluster] != cluster || j.Annotations[hub.AnnotationAttempt] != attempt {
				return fmt.Errorf("routed to %q attempt %q (pending %q)", j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt], j.Annotations[hub.AnnotationPending])
			}
			cp, err := copyIn(cluster, name)
			if err != nil || cp == nil {
				return fmt.Errorf("no copy in %s yet (%v)", cluster, err)
			}
			return nil
		})
	}
	// run makes the copy's pods in cluster, as its Job controller would (none
	// runs here), and waits for that worker's manager to bind them.
	run := func(cluster, name string) {
		t.Helper()
		pods, err := testenv.CreateJobPods(ctx, workers[cluster].Client, "ml", name)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("ml/%s's pods bound in %s", name, cluster), func() error {
			for _, n := range pods {
				var p corev1.Pod
				if err := workers[cluster].Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: n}, &p); err != nil {
					return err
				}
				if p.Spec.NodeName == "" || !strings.HasPrefix(p.Spec.NodeName, cluster+"-") {
					return fmt.Errorf("pod %s on %q", n, p.Spec.NodeName)
				}
			}
			return nil
		})
	}

	// The job runs in the cheaper worker.
	submit("train")
	routedTo("train", "east", "1")
	run("east", "train")

	// east's API server stops: the job moves to west, not before the fence of
	// its copy in east (the last the hub wrote there).
	cp, err := copyIn("east", "train")
	if err != nil || cp == nil {
		t.Fatalf("the copy in east: %v", err)
	}
	fence, err := time.Parse(time.RFC3339, cp.Annotations[contract.AnnotationHubFence])
	if err != nil {
		t.Fatal(err)
	}
	if err := workers["east"].StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	testenv.Eventually(t, 3*failoverAfter, "ml/train routed again after east is lost", func() error {
		j := hubJob("train")
		if j.Annotations[hub.AnnotationCluster] == "east" && j.Annotations[hub.AnnotationAttempt] == "1" {
			return fmt.Errorf("still routed to east, %s after its API server stopped", time.Since(stopped).Round(time.Second))
		}
		if now := time.Now(); now.Before(fence) {
			t.Fatalf("ml/train left east at %s, before the fence of its copy there (%s): it could start in two clusters", now.Format(time.RFC3339Nano), fence.Format(time.RFC3339Nano))
		}
		return nil
	})
	routedTo("train", "west", "2")
	run("west", "train")
	var cl allotv1.Cluster
	if err := c.Get(ctx, client.ObjectKey{Name: "east"}, &cl); err != nil || !strings.Contains(fmt.Sprint(cl.Status.Conditions), hub.ReasonLost) {
		t.Errorf("east's Cluster after the outage: %v, conditions %+v; want Lost", err, cl.Status.Conditions)
	}
	// Counted once in ml's fleet-wide 16 GPUs: one more job of 8 fits (west's
	// other node), a third waits for quota.
	submit("more")
	routedTo("more", "west", "1")
	submit("over")
	testenv.Eventually(t, 30*time.Second, "ml/over waits for quota", func() error {
		if j := hubJob("over"); j.Annotations[hub.AnnotationCluster] != "" || !strings.Contains(j.Annotations[hub.AnnotationPending], "OverQuota") {
			return fmt.Errorf("routed to %q, pending %q", j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationPending])
		}
		return nil
	})

	// east comes back with the copy of attempt 1 still in it: the hub deletes
	// it, and the job stays where it runs.
	if err := workers["east"].StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*failoverAfter, "the stale copy in east deleted", func() error {
		cp, err := copyIn("east", "train")
		if err != nil {
			return err
		}
		if cp != nil {
			return fmt.Errorf("the copy of attempt %s is still in east", cp.Annotations[hub.AnnotationAttempt])
		}
		return nil
	})
	if j := hubJob("train"); j.Annotations[hub.AnnotationCluster] != "west" || j.Annotations[hub.AnnotationAttempt] != "2" {
		t.Errorf("after east came back, ml/train is routed to %q attempt %q: want west 2", j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt])
	}
	if j := hubJob("over"); j.Annotations[hub.AnnotationCluster] != "" {
		t.Errorf("ml/over was routed to %s once east came back: ml/train counts twice", j.Annotations[hub.AnnotationCluster])
	}

	// Metering: each worker meters what ran in it, once. The stale copy's
	// pod in east ran there until the outage ended (its node kept it: that
	// is GPU time used); it goes with its copy (the garbage collector deletes
	// it and the kubelet stops it in a real cluster; neither runs here, so the
	// test deletes it at once), and east meters ml no more, while west goes on
	// metering the two jobs it runs. The pod went while east's manager was
	// still reconnecting its watches (client-go retries with a backoff of up to
	// a minute after an outage): it is metered until that manager sees it go,
	// which the test waits for below, through west's flap.
	var stale corev1.PodList
	if err := workers["east"].Client.List(ctx, &stale, client.InNamespace("ml")); err != nil {
		t.Fatal(err)
	}
	for i := range stale.Items {
		if err := workers["east"].Client.Delete(ctx, &stale.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}

	// west flaps: down for longer than a probe, back well before its
	// failoverAfter (made longer than a restart of an API server takes on a
	// loaded machine, from the probe before the stop). Its jobs stay, with
	// their copies; none goes to east.
	const flapFailoverAfter = 90 * time.Second
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: "west"}, &cl); err != nil {
			return err
		}
		cl.Spec.FailoverAfter = &metav1.Duration{Duration: flapFailoverAfter}
		return c.Update(ctx, &cl)
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second) // a probe reads it
	if err := workers["west"].StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	testenv.Eventually(t, 30*time.Second, "west seen unreachable", func() error {
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: "west"}, &cl); err != nil {
			return err
		}
		if !strings.Contains(fmt.Sprint(cl.Status.Conditions), "Unreachable") {
			return fmt.Errorf("west's conditions %+v", cl.Status.Conditions)
		}
		return nil
	})

	time.Sleep(2 * time.Second)
	if err := workers["west"].StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if flap := back.Sub(down); flap > flapFailoverAfter/2 {
		t.Fatalf("west's flap took %s, too long to be one (its failoverAfter is %s)", flap, flapFailoverAfter)
	}
	for time.Since(back) < failoverAfter { // probes after its return
		for _, name := range []string{"train", "more"} {
			if j := hubJob(name); j.Annotations[hub.AnnotationCluster] != "west" {
				t.Fatalf("ml/%s left west after a flap of %s: routed to %q attempt %q", name, back.Sub(down).Round(time.Second), j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt])
			}
			if cp, err := copyIn("east", name); err != nil || cp != nil {
				t.Fatalf("a copy of ml/%s in east after west flapped (%v)", name, err)
			}
		}
		time.Sleep(time.Second)
	}
	for _, name := range []string{"train", "more"} {
		if cp, err := copyIn("west", name); err != nil || cp == nil {
			t.Errorf("ml/%s's copy in west after the flap: %v", name, err)
		}
	}

	// Metered once: east, its pod gone, meters ml no more; west meters on.
	metered := func(cluster string) int64 {
		t.Helper()
		var team allotv1.Team
		if err := workers[cluster].Client.Get(ctx, client.ObjectKey{Name: "ml"}, &team); err != nil {
			t.Fatal(err)
		}
		var s int64
		for _, u := range team.Status.Metered {
			s += u.GPUSeconds
		}
		return s
	}
	testenv.Eventually(t, 30*time.Second, "east metering ml no more, west metering on", func() error {
		e1, w1 := metered("east"), metered("west")
		time.Sleep(3 * time.Second)
		e2, w2 := metered("east"), metered("west")
		switch {
		case e1 <= 0:
			return fmt.Errorf("east metered %d GPU-seconds of ml: ml/train ran there", e1)
		case e2 != e1:
			return fmt.Errorf("east metered ml %d then %d GPU-seconds, with none of its pods left", e1, e2)
		case w2 <= w1:
			return fmt.Errorf("west metered ml %d then %d GPU-seconds, with 2 jobs of 8 GPUs running", w1, w2)
		}
		return nil
	})
}

// startManagerProcess runs allot manager as the binary would, against env
// as its administrator, with args, until the test ends.
func startManagerProcess(t *testing.T, ctx context.Context, env *testenv.Env, args ...string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var stderr testenv.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runContext(ctx, append([]string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=false",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--git-cache-dir", t.TempDir(), "--status-interval", "500ms"}, args...), io.Discard, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if c := <-code; c != 0 || t.Failed() {
			t.Logf("allot manager %s exited %d; its stderr:\n%s", strings.Join(args, " "), c, stderr.String())
		}
	})
}
