package hub_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// fleetSpec is one worker of a failure test: its price per node-hour, its
// 8-GPU nodes, and how the hub reaches it (reach rewrites its kubeconfig:
// through a proxy, say; nil: directly).
type fleetSpec struct {
	price string
	nodes int
	reach func(kc []byte, host string) []byte
}

// startFleet starts a hub API server and one API server per worker (no
// scheduler runs in them: the tests look at the copies), team ml with a
// quota of quota h100 GPUs everywhere, and on the hub each worker's Pool,
// kubeconfig Secret and Cluster (failoverAfter).
func startFleet(t *testing.T, ctx context.Context, specs map[string]fleetSpec, quota int64, failoverAfter time.Duration) (*testenv.Env, map[string]*fleetWorker) {
	t.Helper()
	hubEnv := testenv.Start(t)
	team := func() []client.Object {
		return []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
			&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
			&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: quota}}}},
		}
	}
	objs := append(team(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	workers := map[string]*fleetWorker{}
	for name, s := range specs {
		workers[name] = startWorker(t, ctx, name, s.nodes)
		env, kc := workers[name].env, workers[name].kc
		for _, o := range team() {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		if s.reach != nil {
			kc = s.reach(kc, env.Config.Host)
		}
		objs = append(objs,
			&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.PoolSpec{Cluster: name, Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 64}, NodesTarget: int64(s.nodes), Price: allotv1.Price{OnDemandPerNodeHour: allotv1.Decimal(s.price)}}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": kc}},
			&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: name}, FailoverAfter: &metav1.Duration{Duration: failoverAfter}}},
		)
	}
	for _, o := range objs {
		if err := hubEnv.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return hubEnv, workers
}

// startWorker starts a worker's API server (stopped when the test ends)
// with nodes 8-GPU nodes of flavor h100 in pool name, named name-0, ...
func startWorker(t *testing.T, ctx context.Context, name string, nodes int) *fleetWorker {
	t.Helper()
	env, stop, err := testenv.StartMain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	kc, err := env.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		if _, err := testenv.CreateNode(ctx, env.Client, fmt.Sprintf("%s-%d", name, i), 8, map[string]string{contract.LabelPool: name, contract.LabelFlavor: "h100"}); err != nil {
			t.Fatal(err)
		}
	}
	return &fleetWorker{env: env, kc: kc, stop: stop}
}

// gpuJob is a hub Job of ml: pods pods of gpus GPUs, its template labelled
// labels, its metadata annotated annotations.
func gpuJob(name string, pods int32, gpus int64, labels, annotations map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Annotations: annotations}, Spec: batchv1.JobSpec{
		ManagedBy: ptr.To(hub.ManagedBy), Parallelism: ptr.To(pods), Completions: ptr.To(pods),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			SchedulerName: contract.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "train", Image: "trainer", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}},
		}},
	}}
}

// copyIn is the copy of hub Job ml/name in worker w, or nil.
func copyIn(t *testing.T, ctx context.Context, w *fleetWorker, name string) *batchv1.Job {
	t.Helper()
	var cp batchv1.Job
	err := w.env.Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &cp)
	if err != nil {
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return nil
	}
	if cp.DeletionTimestamp != nil {
		return nil
	}
	return &cp
}

// tarpit is a TCP proxy to an API server that, once hung, answers nothing:
// it keeps every connection open, new or old, and moves no byte more, as a
// worker whose host froze (or a network that drops packets) does.
type tarpit struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	hung   bool
	conns  []net.Conn
}

// newTarpit listens on a loopback port and forwards to target (host:port)
// until hang is called; target "" hangs from the start.
func newTarpit(t *testing.T, target string) *tarpit {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tarpit{l: l, target: target, hung: target == ""}
	t.Cleanup(func() {
		_ = l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			hung := p.hung
			p.mu.Unlock()
			if !hung {
				go p.forward(c)
			}
		}
	}()
	return p
}

func (p *tarpit) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			p.mu.Lock()
			hung := p.hung
			p.mu.Unlock()
			if hung || err != nil {
				return // the other side is left open, unanswered
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pump(up, c)
	go pump(c, up)
}

// hang stops every byte from now on.
func (p *tarpit) hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = true
}

func (p *tarpit) addr() string { return p.l.Addr().String() }

// through rewrites a worker's kubeconfig to reach it through p.
func (p *tarpit) through(kc []byte, host string) []byte {
	return []byte(strings.ReplaceAll(string(kc), host, "https://"+p.addr()))
}

// TestHungWorkerStallsNoOtherCluster: a worker cluster whose API server
// accepts connections and never answers (its host froze) neither delays the
// probes of the other workers nor the routing of their jobs, and keeps its
// own jobs while within failoverAfter. Two more Clusters point at listeners
// that never answer from the start.
func TestHungWorkerStallsNoOtherCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hangs := map[string]*tarpit{}
	specs := map[string]fleetSpec{
		"good": {price: "30", nodes: 4},
		"frozen": {price: "10", nodes: 4, reach: func(kc []byte, host string) []byte {
			u, err := url.Parse(host)
			if err != nil {
				t.Fatal(err)
			}
			hangs["frozen"] = newTarpit(t, u.Host)
			return hangs["frozen"].through(kc, host)
		}},
	}
	hubEnv, workers := startFleet(t, ctx, specs, 64, time.Minute)
	c := hubEnv.Client
	// Two registered workers that never answered.
	for i := range 3 {
		name := fmt.Sprintf("tarpit-%d", i)
		kc := newTarpit(t, "").through(workers["good"].kc, workers["good"].env.Config.Host)
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"kubeconfig": kc}},
			&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: name}, FailoverAfter: &metav1.Duration{Duration: time.Minute}}},
		} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	const probeTimeout = time.Second
	mgr := newManager(t, hubEnv)
	ws := hub.NewWorkers()
	if err := (&hub.ClusterReconciler{Client: mgr.GetClient(), Namespace: ns, Interval: 200 * time.Millisecond, ProbeTimeout: probeTimeout, Workers: ws}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&hub.Router{Workers: ws, Interval: 200 * time.Millisecond, Log: testr.New(t)}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	startManager(t, ctx, mgr)

	// The probes of good are not queued behind those of the tarpits (a
	// second each): its last probe is never more than about an interval old.
	cluster := func(name string) *allotv1.Cluster {
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			t.Fatal(err)
		}
		return &cl
	}
	testenv.Eventually(t, 30*time.Second, "good reached", func() error {
		if cl := cluster("good"); cl.Status.LastSeen == nil {
			return fmt.Errorf("good not seen yet: %+v", cl.Status.Conditions)
		}
		return nil
	})
	var worst time.Duration
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		worst = max(worst, time.Since(cluster("good").Status.LastSeen.Time))
	}
	if worst > 2*probeTimeout {
		t.Errorf("good's last probe was %s old at worst, behind the probes of workers that never answer (timeout %s each)", worst, probeTimeout)
	}

	// Eight jobs run in the frozen cluster, which then freezes.
	const n = 8
	for i := range n {
		if err := c.Create(ctx, gpuJob(fmt.Sprintf("cheap-%d", i), 1, 1, map[string]string{contract.LabelCluster: "frozen"}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, "the jobs in frozen", func() error {
		for i := range n {
			if copyIn(t, ctx, workers["frozen"], fmt.Sprintf("cheap-%d", i)) == nil {
				return fmt.Errorf("no copy of cheap-%d in frozen (frozen: %+v)", i, cluster("frozen").Status.Conditions)
			}
		}
		return nil
	})
	hangs["frozen"].hang()
	start := time.Now()
	if err := c.Create(ctx, gpuJob("urgent", 1, 8, map[string]string{contract.LabelCluster: "good"}, nil)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "urgent routed to good", func() error {
		if copyIn(t, ctx, workers["good"], "urgent") == nil {
			return fmt.Errorf("no copy in good")
		}
		return nil
	})
	// A pass waits for at most one timeout of the frozen worker's, not one
	// per job it holds.
	if took := time.Since(start); took > 3*probeTimeout {
		t.Errorf("a job for good was routed %s after frozen froze (timeout %s): the frozen worker's %d jobs held up the pass", took.Round(time.Millisecond), probeTimeout, n)
	}
	// frozen keeps its jobs within failoverAfter.
	for i := range n {
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: fmt.Sprintf("cheap-%d", i)}, &j); err != nil {
			t.Fatal(err)
		}
		if j.Annotations[hub.AnnotationCluster] != "frozen" || j.Annotations[hub.AnnotationAttempt] != "1" {
			t.Errorf("cheap-%d: routed to %q attempt %q while frozen is within failoverAfter", i, j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationAttempt])
		}
	}
}

// directRouter is a Router over c with its own view of the workers (those
// of names, probed once now): what one hub, or a second one, knows.
func directRouter(t *testing.T, ctx context.Context, env *testenv.Env, c client.Client, names ...string) *hub.Router {
	t.Helper()
	r, probe := probedRouter(t, ctx, env, c)
	probe(names...)
	return r
}

// probedRouter is a Router over c with its own view of the workers, and
// probe, which probes the named workers into that view as the hub's
// ClusterReconciler does (a deleted Cluster is forgotten).
func probedRouter(t *testing.T, ctx context.Context, env *testenv.Env, c client.Client) (*hub.Router, func(names ...string)) {
	t.Helper()
	ws := hub.NewWorkers()
	rec := &hub.ClusterReconciler{Client: env.Client, Reader: env.Client, Namespace: ns, ProbeTimeout: 5 * time.Second, Workers: ws}
	probe := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: n}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &hub.Router{Client: c, Workers: ws, Scheme: env.Scheme, Log: testr.New(t)}, probe
}

// TestTheRoutingIsTheHubs: what decides where a Job runs is the hub's
// routing, whatever else writes the Job: a second hub (a leader that has
// not stopped yet, or that reads an older copy of the Job) routes no job
// already routed, so that it runs in no two clusters; a routing written on
// the Job by whoever submits it (hub.allot.dev/cluster, attempt, placement)
// bypasses neither the core nor the team's quota; and a Job deleted on the
// hub while it is being routed leaves no copy running.
func TestTheRoutingIsTheHubs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}, "west": {price: "30", nodes: 2}}, 16, time.Minute)
	c := hubEnv.Client
	live := func(cp *batchv1.Job) bool {
		if cp == nil {
			return false
		}
		fence, err := time.Parse(time.RFC3339, cp.Annotations[contract.AnnotationHubFence])
		return err == nil && fence.After(time.Now())
	}

	t.Run("a second hub with an older read", func(t *testing.T) {
		if err := c.Create(ctx, gpuJob("twice", 1, 8, nil, nil)); err != nil {
			t.Fatal(err)
		}
		var before batchv1.JobList
		if err := c.List(ctx, &before); err != nil {
			t.Fatal(err)
		}
		// The first hub sees both workers and routes the job to east.
		if err := directRouter(t, ctx, hubEnv, c, "east", "west").Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if !live(copyIn(t, ctx, workers["east"], "twice")) {
			t.Fatal("the first hub made no live copy in east")
		}
		// The second reads the Jobs as they were before (its cache lags),
		// and has reached only west.
		lagging := interceptor.NewClient(withWatch(t, hubEnv), interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if l, ok := list.(*batchv1.JobList); ok {
				before.DeepCopyInto(l)
				return nil
			}
			return cl.List(ctx, list, opts...)
		}})
		err := directRouter(t, ctx, hubEnv, lagging, "west").Pass(ctx)
		t.Logf("the second hub's pass: %v", err)
		if live(copyIn(t, ctx, workers["west"], "twice")) && live(copyIn(t, ctx, workers["east"], "twice")) {
			t.Error("ml/twice has a live copy in east and in west: it can run twice")
		}
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "twice"}, &j); err != nil {
			t.Fatal(err)
		}
		if j.Annotations[hub.AnnotationCluster] != "east" {
			t.Errorf("ml/twice is recorded routed to %q; its live copy is in east", j.Annotations[hub.AnnotationCluster])
		}
	})

	t.Run("a routing written by the submitter", func(t *testing.T) {
		// ml's quota is 16 GPUs, 8 of them used by ml/twice: a job of 16
		// that says it is routed to east already must wait like any other.
		forged := map[string]string{hub.AnnotationCluster: "east", hub.AnnotationAttempt: "1", hub.AnnotationPlacement: "east-0=1"}
		if err := c.Create(ctx, gpuJob("forged", 2, 8, nil, forged)); err != nil {
			t.Fatal(err)
		}
		r := directRouter(t, ctx, hubEnv, c, "east", "west")
		for range 3 {
			if err := r.Pass(ctx); err != nil {
				t.Logf("pass: %v", err)
			}
		}
		for name, w := range workers {
			if cp := copyIn(t, ctx, w, "forged"); cp != nil {
				t.Errorf("ml/forged, over ml's quota, has a copy in %s: the routing its submitter wrote was taken for the hub's", name)
			}
		}
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "forged"}, &j); err != nil {
			t.Fatal(err)
		}
		if p := j.Annotations[hub.AnnotationPending]; !strings.Contains(p, "OverQuota") {
			t.Errorf("ml/forged: pending %q, want OverQuota", p)
		}
	})

	t.Run("deleted while routed", func(t *testing.T) {
		if err := c.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "forged"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, gpuJob("gone", 1, 8, nil, nil)); err != nil {
			t.Fatal(err)
		}
		// The Job is deleted just after the hub recorded its routing, before
		// it made the copy.
		deleting := interceptor.NewClient(withWatch(t, hubEnv), interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := cl.Patch(ctx, obj, p, opts...); err != nil {
				return err
			}
			if obj.GetName() == "gone" && obj.GetAnnotations()[hub.AnnotationCluster] != "" {
				return cl.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "gone"}})
			}
			return nil
		}})
		r := directRouter(t, ctx, hubEnv, deleting, "east", "west")
		_ = r.Pass(ctx)
		testenv.Eventually(t, 30*time.Second, "no copy of the deleted job", func() error {
			if err := r.Pass(ctx); err != nil {
				return err
			}
			for name, w := range workers {
				if cp := copyIn(t, ctx, w, "gone"); cp != nil {
					return fmt.Errorf("a copy of the deleted ml/gone in %s (attempt %s)", name, cp.Annotations[hub.AnnotationAttempt])
				}
			}
			return nil
		})
	})
}

func withWatch(t *testing.T, env *testenv.Env) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
