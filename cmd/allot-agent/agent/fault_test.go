package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/cmd/allot-agent/agent"
	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/controllers/pool"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/health"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler/runner"
)

func init() { ctrl.SetLogger(logr.Discard()) }

// Issue 6, end to end on a real API server: a fatal XID on one node of a
// running gang, seen by the NVML agent (on go-nvml's DGX A100 mock), gives the
// node its condition and taint; the pool's healthy capacity drops and
// CapacityReady turns False; the gang is evicted whole and placed again on
// healthy nodes, its restart counted; after a reboot the node returns.
func TestFatalXIDOnAGangNode(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const ns = "train"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "production"}, Spec: allotv1.TierSpec{Priority: 500}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "a100", Nominal: 32}}}},
		&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "dgx"}, Spec: allotv1.PoolSpec{
			Cluster: "lab", Flavor: "a100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 4}, NodesTarget: 4, SpareNodes: 1,
			Price: allotv1.Price{OnDemandPerNodeHour: "1"},
		}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		name := fmt.Sprintf("dgx-%d", i)
		n, err := testenv.CreateNode(ctx, c, name, 8, map[string]string{contract.LabelPool: "dgx"})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.BootID = "boot-1"
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}

	// The manager's parts under test: Pool health and the scheduler.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}) // a second run in this process
	if err != nil {
		t.Fatal(err)
	}
	if err := (&pool.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("allot-pool")}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := runner.New(runner.Options{CycleInterval: 5 * time.Millisecond, Resync: 100 * time.Millisecond, StatusInterval: 200 * time.Millisecond}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	go kubeletAndJobController(ctx, c, ns)

	// A Job of 2 pods of 8 GPUs: a gang.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{
				Name: "train", Image: "trainer:1", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}},
			}}},
		}},
	}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	first := waitGang(t, c, ns, nil)
	waitPool(t, c, true, 32)

	// The agent on one of the gang's nodes: healthy, then a fatal XID 79 (GPU
	// fell off the bus) on GPU 3.
	var victim string
	var firstPods []string
	for pod, n := range first {
		victim, firstPods = n, append(firstPods, pod)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	srv := nvmltest.New()
	a := agent.New(agent.NewReader(srv), nil, health.DefaultThresholds(), agent.NewNode(c, victim, 5*time.Minute, clock), agent.Options{Now: clock})
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	a.AddXID(health.XIDEvent{GPU: 3, UUID: nvmltest.UUIDOf(3), Code: 79, Time: now})
	rep, err := a.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Healthy || !rep.Fatal {
		t.Fatalf("XID 79 did not make a fatal report: %+v", rep)
	}

	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: victim}, &n); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodestate.TaintGPUFault }) {
		t.Errorf("node %s has no %s taint: %v", victim, nodestate.TaintGPUFault, n.Spec.Taints)
	}
	if cond := nodeCondition(&n, nodestate.ConditionGPUHealthy); cond == nil || cond.Status != corev1.ConditionFalse {
		t.Errorf("node %s GPUHealthy = %+v, want False", victim, cond)
	}
	// The pool: 3 usable nodes, 24 healthy GPUs; it needs 24 (4 less 1 spare).
	p := waitPool(t, c, true, 24)
	if !slices.Equal(p.Status.UnhealthyNodes, []string{victim}) {
		t.Errorf("unhealthy nodes %v, want [%s]", p.Status.UnhealthyNodes, victim)
	}

	// The gang: evicted whole, made again by its Job, placed off the failed node.
	second := waitGang(t, c, ns, firstPods)
	for pod, node := range second {
		if node == victim {
			t.Errorf("pod %s placed again on the failed node %s", pod, victim)
		}
	}
	waitEvent(t, c, ns, "restart 1, requeued ahead of its tier")

	// A second fault leaves the pool below what its quotas need.
	var other string
	for _, node := range second {
		other = node
	}
	taintNode(t, c, other)
	p = waitPool(t, c, false, 16)
	if msg := conditions.GetMessage(p, allotv1.CapacityReadyCondition); !strings.Contains(msg, "16 healthy GPUs of 24 needed") {
		t.Errorf("CapacityReady message %q", msg)
	}

	// Recovery of the first node: it rebooted (a new boot ID).
	if err := c.Get(ctx, client.ObjectKey{Name: victim}, &n); err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.BootID = "boot-2"
	if err := c.Status().Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	if rep, err := a.Poll(ctx); err != nil || !rep.Healthy {
		t.Fatalf("after a reboot: %+v, %v", rep, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: victim}, &n); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodestate.TaintGPUFault }) {
		t.Errorf("node %s kept its fault taint after a reboot", victim)
	}
	waitPool(t, c, true, 24)
}

// kubeletAndJobController plays the two parts envtest lacks: a deleted pod
// goes at once (kubelet), and a Job has its parallelism of live pods (the Job
// controller), made from its template with a controller reference.
func kubeletAndJobController(ctx context.Context, c client.Client, ns string) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			live := map[string]int32{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil {
					_ = c.Delete(ctx, p, client.GracePeriodSeconds(0))
					continue
				}
				if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
					live[ref.Name]++
				}
			}
			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs, client.InNamespace(ns)); err == nil {
				for _, j := range jobs.Items {
					for range *j.Spec.Parallelism - live[j.Name] {
						pod := &corev1.Pod{ObjectMeta: *j.Spec.Template.ObjectMeta.DeepCopy(), Spec: *j.Spec.Template.Spec.DeepCopy()}
						pod.Namespace, pod.GenerateName = ns, j.Name+"-"
						pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(&j, batchv1.SchemeGroupVersion.WithKind("Job"))}
						_ = c.Create(ctx, pod)
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitGang waits until the Job's 2 live pods, none of them in old, are bound,
// and returns their nodes by pod name.
func waitGang(t *testing.T, c client.Client, ns string, old []string) map[string]string {
	t.Helper()
	var out map[string]string
	testenv.Eventually(t, 30*time.Second, "the gang bound whole", func() error {
		var pods corev1.PodList
		if err := c.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		out = map[string]string{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || slices.Contains(old, p.Name) {
				continue
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound", p.Name)
			}
			out[p.Name] = p.Spec.NodeName
		}
		if len(out) != 2 {
			return fmt.Errorf("bound pods %v", out)
		}
		return nil
	})
	return out
}

// waitPool waits for the Pool's status to show healthy GPUs and CapacityReady.
func waitPool(t *testing.T, c client.Client, ready bool, healthy int64) *allotv1.Pool {
	t.Helper()
	p := &allotv1.Pool{}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("pool with %d healthy GPUs, CapacityReady=%v", healthy, ready), func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Name: "dgx"}, p); err != nil {
			return err
		}
		if p.Status.HealthyGPUs != healthy || conditions.IsTrue(p, allotv1.CapacityReadyCondition) != ready {
			return fmt.Errorf("healthy %d, CapacityReady %q", p.Status.HealthyGPUs, conditions.GetMessage(p, allotv1.CapacityReadyCondition))
		}
		return nil
	})
	return p
}

func waitEvent(t *testing.T, c client.Client, ns, want string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "an event saying "+want, func() error {
		var evs eventsv1.EventList
		if err := c.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		var notes []string
		for _, e := range evs.Items {
			if strings.Contains(e.Note, want) {
				return nil
			}
			notes = append(notes, e.Note)
		}
		return fmt.Errorf("events %q", notes)
	})
}

func taintNode(t *testing.T, c client.Client, name string) {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodestate.TaintGPUFault, Value: "xid-79", Effect: corev1.TaintEffectNoSchedule})
	if err := c.Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
