package runner_test

import (
	"context"
	"regexp"
	"slices"

	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
)

// cluster is one test's control plane, with a fake kubelet that finishes what
// the API server leaves to kubelets: a deleted pod that was bound goes away.
type cluster struct {
	t   testing.TB
	env *testenv.Env
	c   client.Client
	ns  string
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	env := testenv.Start(t)
	cl := &cluster{t: t, env: env, c: env.Client, ns: "jobs"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.ns}}
	if err := cl.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.kubelet(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return cl
}

// kubelet plays the part of every node's kubelet for deletions: a pod with a
// deletion timestamp is removed at once, as a kubelet does once its containers
// stopped.
func (cl *cluster) kubelet(ctx context.Context) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := cl.c.List(ctx, &pods); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil {
					_ = cl.c.Delete(ctx, p, client.GracePeriodSeconds(0))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sched is a running manager with the embedded scheduler.
type sched struct {
	metrics string
	stop    func()
	// base holds the counters as they stood when it started.
	base map[string]float64
}

type schedOptions struct {
	leaderElection bool
	identity       string
	core           *scheduler.Options
	notReadyGrace  time.Duration
	// cacheNamespaces, when set, are the only namespaces whose objects the
	// manager's cache shows.
	cacheNamespaces []string
	// runner, when set, is given the runner before it starts.
	runner func(*runner.Runner)
}

// start runs a manager with the scheduler until the test ends or stop is called.
func (cl *cluster) start(o schedOptions) *sched {
	cl.t.Helper()
	addr := freeAddr(cl.t)
	mo := ctrl.Options{
		Scheme:                 cl.env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: addr},
		HealthProbeBindAddress: "0",
	}
	if len(o.cacheNamespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]ctrlcache.Config{}
		for _, ns := range o.cacheNamespaces {
			mo.Cache.DefaultNamespaces[ns] = ctrlcache.Config{}
		}
	}
	if o.leaderElection {
		mo.LeaderElection = true
		mo.LeaderElectionID = "allot-scheduler-test"
		mo.LeaderElectionNamespace = "default"
		mo.LeaseDuration = ptr.To(3 * time.Second)
		mo.RenewDeadline = ptr.To(2 * time.Second)
		mo.RetryPeriod = ptr.To(200 * time.Millisecond)
		mo.LeaderElectionReleaseOnCancel = false
	}
	cfg := *cl.env.Config
	if o.identity != "" {
		cfg.UserAgent = o.identity
	}
	log := testLogger(cl.t)
	mo.Logger = log
	mgr, err := ctrl.NewManager(&cfg, mo)
	if err != nil {
		cl.t.Fatal(err)
	}
	r := runner.New(runner.Options{
		Core: o.core, CycleInterval: 5 * time.Millisecond, Resync: 100 * time.Millisecond,
		StatusInterval: 100 * time.Millisecond, SyncTimeout: 5 * time.Second, NotReadyGrace: o.notReadyGrace,
		StateNamespace: cl.ns, UnbindRetry: 2 * time.Second,
	})
	if o.runner != nil {
		o.runner(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		cl.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			cl.t.Logf("manager stopped: %v", err)
		}
	}
	cl.t.Cleanup(stop)
	base := map[string]float64{}
	if fams, err := ctrlmetrics.Registry.Gather(); err == nil {
		byName := map[string]*dto.MetricFamily{}
		for _, f := range fams {
			if f.GetType() == dto.MetricType_COUNTER {
				byName[f.GetName()] = f
			}
		}
		base = samples(byName)
	}
	return &sched{metrics: "http://" + addr + "/metrics", stop: stop, base: base}
}

// tiers creates the four tiers of the examples.
func (cl *cluster) tiers() {
	cl.t.Helper()
	for _, tr := range []allotv1.Tier{
		{ObjectMeta: metav1.ObjectMeta{Name: "production"}, Spec: allotv1.TierSpec{Priority: 500}},
		{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100, Preemptible: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "opportunist"}, Spec: allotv1.TierSpec{Priority: 0, Preemptible: true, BorrowOnly: true}},
	} {
		cl.create(&tr)
	}
}

func (cl *cluster) cohort(name string) {
	cl.create(&allotv1.Cohort{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// team creates a team with a nominal quota of one flavor in a cohort.
func (cl *cluster) team(name, cohort, flavor string, nominal int64) {
	cl.create(&allotv1.Team{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       allotv1.TeamSpec{Cohort: cohort, Quota: []allotv1.FlavorQuota{{Flavor: flavor, Nominal: nominal}}},
	})
}

// pool creates a Pool and its nodes, named <pool>-<i>, in racks of perRack.
func (cl *cluster) pool(name, flavor string, nodes, gpus, perRack int64) {
	cl.t.Helper()
	cl.create(&allotv1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: allotv1.PoolSpec{
			Cluster: "test", Flavor: flavor, GPUsPerNode: gpus,
			Nodes: allotv1.NodeBounds{Min: 0, Max: nodes}, NodesTarget: nodes,
			Topology: &allotv1.Topology{Levels: []allotv1.TopologyLevel{{Name: "rack"}, {Name: "host"}}},
			Price:    allotv1.Price{OnDemandPerNodeHour: "1"},
		},
	})
	for i := range nodes {
		labels := map[string]string{
			contract.LabelPool: name, contract.LabelFlavor: flavor,
			contract.TopologyLabelPrefix + "rack": "r" + strconv.FormatInt(i/perRack, 10),
			contract.TopologyLabelPrefix + "host": fmt.Sprintf("%s-%d", name, i),
		}
		if _, err := testenv.CreateNode(context.Background(), cl.c, fmt.Sprintf("%s-%d", name, i), gpus, labels); err != nil {
			cl.t.Fatal(err)
		}
	}
}

func (cl *cluster) create(o client.Object) {
	cl.t.Helper()
	if err := cl.c.Create(context.Background(), o); err != nil {
		cl.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// podSpec is what a test says of the pods of one workload.
type podSpec struct {
	team, tier string
	pods, gpus int64
	require    string
}

// submit creates the pods of a workload named name: a gang when pods > 1.
func (cl *cluster) submit(name string, s podSpec) []string {
	cl.t.Helper()
	var names []string
	for i := range s.pods {
		labels := map[string]string{contract.LabelTeam: s.team}
		if s.tier != "" {
			labels[contract.LabelTier] = s.tier
		}
		pn := name
		if s.pods > 1 {
			labels[contract.LabelGang] = name
			labels[contract.LabelGangSize] = strconv.FormatInt(s.pods, 10)
			pn = fmt.Sprintf("%s-%d", name, i)
		}
		if s.require != "" {
			labels[contract.LabelRequire] = s.require
		}
		gpus := *resource.NewQuantity(s.gpus, resource.DecimalSI)
		cl.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: pn, Labels: labels},
			Spec: corev1.PodSpec{
				SchedulerName: contract.SchedulerName,
				Containers: []corev1.Container{{Name: "train", Image: "trainer:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus}, Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus},
				}}},
			},
		})
		names = append(names, pn)
	}
	return names
}

// pods returns the test namespace's pods by name.
func (cl *cluster) pods() map[string]corev1.Pod {
	cl.t.Helper()
	var list corev1.PodList
	if err := cl.c.List(context.Background(), &list, client.InNamespace(cl.ns)); err != nil {
		cl.t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// nodesOf returns where each named pod is bound ("" if not bound or gone).
func (cl *cluster) nodesOf(names []string) []string {
	all := cl.pods()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = all[n].Spec.NodeName
	}
	return out
}

func bound(nodes []string) int {
	n := 0
	for _, x := range nodes {
		if x != "" {
			n++
		}
	}
	return n
}

// finish marks pods Succeeded, their containers terminated now, as their
// kubelet would.
func (cl *cluster) finish(names []string) {
	cl.t.Helper()
	for _, n := range names {
		var p corev1.Pod
		if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: n}, &p); err != nil {
			cl.t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}})
		}
		if err := cl.c.Status().Update(context.Background(), &p); err != nil {
			cl.t.Fatal(err)
		}
	}
}

// waitBound waits until every named pod is bound, and returns their nodes.
func (cl *cluster) waitBound(names []string) []string {
	cl.t.Helper()
	var nodes []string
	eventually(cl.t, 20*time.Second, fmt.Sprintf("pods %v bound", names), func() error {
		nodes = cl.nodesOf(names)
		if b := bound(nodes); b != len(names) {
			return fmt.Errorf("%d of %d bound: %v", b, len(names), nodes)
		}
		return nil
	})
	return nodes
}

// waitPending waits until a pod carries PodScheduled=False with a message
// containing want.
func (cl *cluster) waitPending(name, want string) string {
	cl.t.Helper()
	return cl.waitPendingMatch(name, regexp.MustCompile(regexp.QuoteMeta(want)))
}

// waitPendingMatch waits for pod name to be pending with a message want matches.
func (cl *cluster) waitPendingMatch(name string, want *regexp.Regexp) string {
	cl.t.Helper()
	return cl.waitPendingWithin(name, want, 20*time.Second)
}

// waitPendingWithin is waitPendingMatch with a deadline of d.
func (cl *cluster) waitPendingWithin(name string, want *regexp.Regexp, d time.Duration) string {
	cl.t.Helper()
	var msg string
	eventually(cl.t, d, "pod "+name+" pending with "+want.String(), func() error {
		p, ok := cl.pods()[name]
		if !ok {
			return fmt.Errorf("no pod %s", name)
		}
		if p.Spec.NodeName != "" {
			return fmt.Errorf("bound to %s", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
				if want.MatchString(msg) {
					return nil
				}
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
	return msg
}

func init() { ctrl.SetLogger(logr.Discard()) }

// testLogger keeps the scheduler's log (its last 2,000 lines) and prints it
// when the test fails: a stall is diagnosed from what the runner did.
func testLogger(t testing.TB) logr.Logger {
	var mu sync.Mutex
	var lines []string
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("the scheduler's log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
	})
	start := time.Now()
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if len(lines) == 2000 {
			lines = lines[1:]
		}
		lines = append(lines, fmt.Sprintf("%8.3fs %s %s", time.Since(start).Seconds(), prefix, args))
	}, funcr.Options{Verbosity: 2})
}

var eventually = testenv.Eventually

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// job creates a Job (no controller runs in the test: the test makes its pods
// with jobPod).
func (cl *cluster) job(name string, parallelism, completions int32) *batchv1.Job {
	cl.t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name}, Spec: batchv1.JobSpec{
		Parallelism: ptr.To(parallelism), Completions: ptr.To(completions), ManualSelector: ptr.To(true),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}},
	}}
	cl.create(job)
	return job
}

// jobPod creates a pod of the Job, as its controller would, asking gpus GPUs.
func (cl *cluster) jobPod(job *batchv1.Job, name string, gpus int64, labels map[string]string) string {
	cl.t.Helper()
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	cl.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "trainer:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: q}}}}},
	})
	return name
}

// watchDeletion starts watching for the deletion of the named pod; the
// function it returns waits for it and returns the pod as it was last.
func (cl *cluster) watchDeletion(name string) func() *corev1.Pod {
	cl.t.Helper()
	wc, err := client.NewWithWatch(cl.env.Config, client.Options{Scheme: cl.env.Scheme})
	if err != nil {
		cl.t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(cl.ns))
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.t.Cleanup(w.Stop)
	deleted := make(chan *corev1.Pod, 1)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted && p.Name == name {
				deleted <- p
				return
			}
		}
	}()
	return func() *corev1.Pod {
		cl.t.Helper()
		select {
		case p := <-deleted:
			return p
		case <-time.After(20 * time.Second):
			cl.t.Fatalf("pod %s was not deleted", name)
			return nil
		}
	}
}

// disrupted says whether a pod carries DisruptionTarget=True.
func disrupted(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue
	})
}
