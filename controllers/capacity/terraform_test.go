package capacity_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler/runner"
)

// kwokRepo is a capacity repository with one kwok pool of 8-GPU nodes and one
// team whose nominal quota sizes it.
func kwokRepo(nominal int) string {
	return fmt.Sprintf(`package capacity

clusters: lab: {provider: "kwok"}

pools: a: {
	cluster:     "lab"
	flavor:      "h100"
	gpusPerNode: 8
	nodes: {min: 0, max: 8}
	topology: {levels: ["rack", "host"], hostsPerRack: 4}
	price: {onDemandPerNodeHour: 10}
}

tiers: production: {priority: 500}

teams: alpha: {
	costCenter: "CC-1"
	owners: ["@alpha"]
	quota: h100: {nominal: %d}
}
`, nominal)
}

// Issue 5 end to end: the manager with Terraform (the real binary, the kwok
// module whose hooks create and delete Node objects) and the scheduler. A
// quota raise grows the pool first and raises the quota once the nodes are
// Ready, and the scheduler uses them; a quota cut lowers the quota first, and
// the shrink that would remove nodes running work waits for an approval. At no
// moment does the quota exceed the Ready capacity.
func TestTerraformOrderedApply(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := tenv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}

	startTerraform(t, tenv, &capacity.Terraform{Env: map[string]string{"KUBECONFIG": kubeconfig}, ReadyTimeout: time.Minute},
		runner.New(runner.Options{CycleInterval: 5 * time.Millisecond, Resync: 100 * time.Millisecond}).SetupWithManager)

	// The invariant, sampled all along: the team's quota never exceeds the
	// GPUs of Ready nodes.
	var mu sync.Mutex
	var violations []string
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			var team allotv1.Team
			var nodes corev1.NodeList
			if c.Get(watchCtx, client.ObjectKey{Name: "alpha"}, &team) == nil && c.List(watchCtx, &nodes) == nil {
				ready := int64(0)
				for i := range nodes.Items {
					if nodestate.Read(&nodes.Items[i]).Usable {
						ready++
					}
				}
				if q := team.Spec.Quota[0].Nominal; q > ready*8 {
					mu.Lock()
					violations = append(violations, fmt.Sprintf("quota %d with %d Ready nodes", q, ready))
					mu.Unlock()
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	repo := newGitRepo(t)
	repo.write("capacity.cue", kwokRepo(16))
	head := repo.commit("alpha: 16 GPUs")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	key := kwokSource(t, c, repo, head)

	// Raise: 16 -> 32 GPUs needs 2 more nodes, made before the quota goes up.
	repo.write("capacity.cue", kwokRepo(32))
	head = repo.commit("alpha: 32 GPUs")
	waitApplied(t, c, key, head)
	waitNodes(t, c, "a-0", "a-1", "a-2", "a-3")
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "a-3"}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Labels["topology.allot.dev/rack"] == "" || n.Status.Allocatable.Name(nodestate.ResourceGPU, resource.DecimalSI).Value() != 8 {
		t.Errorf("node a-3 made by the kwok hook lacks its labels or GPUs: %v %v", n.Labels, n.Status.Allocatable)
	}
	// The scheduler uses the new nodes: a gang of 4 x 8 GPUs fills them all.
	gang := submitGang(t, c, "gitops", "big", 4, 8)
	bound := map[string]bool{}
	eventually(t, 30*time.Second, "the gang bound on the 4 nodes", func() error {
		for _, name := range gang {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: "gitops", Name: name}, &p); err != nil {
				return err
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound", name)
			}
			bound[p.Spec.NodeName] = true
		}
		if len(bound) != 4 {
			return fmt.Errorf("nodes %v", bound)
		}
		return nil
	})

	// Cut: 32 -> 8 GPUs. The quota comes down first; the shrink would remove
	// nodes running the gang, and waits for an approval naming it.
	repo.write("capacity.cue", kwokRepo(8))
	head = repo.commit("alpha: 8 GPUs")
	var msg string
	eventually(t, 60*time.Second, "the shrink refused", func() error {
		s := &allotv1.CapacitySource{}
		if err := c.Get(ctx, key, s); err != nil {
			return err
		}
		msg = conditions.GetMessage(s, allotv1.ReadyCondition)
		if !strings.Contains(msg, "remove nodes that run workloads") {
			return fmt.Errorf("ready: %s", msg)
		}
		return nil
	})
	var team allotv1.Team
	if err := c.Get(ctx, client.ObjectKey{Name: "alpha"}, &team); err != nil {
		t.Fatal(err)
	}
	if team.Spec.Quota[0].Nominal != 8 {
		t.Errorf("the quota was not lowered before the shrink: %d", team.Spec.Quota[0].Nominal)
	}
	waitNodes(t, c, "a-0", "a-1", "a-2", "a-3") // nothing removed yet
	id := regexp.MustCompile(capacity.AnnotationApproveDisruption + `=([0-9a-f]+)`).FindStringSubmatch(msg)
	if id == nil {
		t.Fatalf("the refusal names no disruption ID: %s", msg)
	}
	s := &allotv1.CapacitySource{}
	if err := c.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	// A merge patch, not an update: the reconciler writes the status meanwhile.
	approve := client.MergeFrom(s.DeepCopy())
	s.Annotations = map[string]string{capacity.AnnotationApproveDisruption: id[1]}
	if err := c.Patch(ctx, s, approve); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c, key, head)
	waitNodes(t, c, "a-0")

	// The pool goes from Git (the team moves to a new L4 pool, and the policy
	// allows disruption): the new pool is grown, and the removed one is shrunk
	// to nothing by Terraform, its delete hooks removing its Node objects,
	// rather than dropped with its nodes left behind.
	repo.write("capacity.cue", `package capacity

clusters: lab: {provider: "kwok"}

pools: b: {
	cluster:     "lab"
	flavor:      "l4"
	gpusPerNode: 8
	nodes: {min: 0, max: 8}
	price: {onDemandPerNodeHour: 2}
}

tiers: production: {priority: 500}

teams: alpha: {
	costCenter: "CC-1"
	owners: ["@alpha"]
	quota: l4: {nominal: 8}
}

policy: allowDisruption: true
`)
	head = repo.commit("alpha moves to L4; pool a goes")
	waitApplied(t, c, key, head)
	waitNodes(t, c, "b-0")

	stopWatch()
	<-watched
	mu.Lock()
	if len(violations) > 0 {
		t.Errorf("the quota exceeded the Ready capacity %d times, first: %s", len(violations), violations[0])
	}
	mu.Unlock()

	// A node Terraform made is lost outside it (deleted by hand), with no new
	// revision: the drift check of the next reconcile makes it again.
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b-0"}}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, c, "b-0")
	waitEvent(t, c, key, "Drift", "pool b has 0 nodes, its target is 1")
	waitEvent(t, c, key, "NodesLost", "b_nodes")
	// A node made outside Terraform is drift it cannot remove: reported as a
	// finding, the revision still applied.
	if _, err := testenv.CreateNode(ctx, c, "b-extra", 8, map[string]string{contract.LabelPool: "b"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "a pool-drift finding", func() error {
		s := &allotv1.CapacitySource{}
		if err := c.Get(ctx, key, s); err != nil {
			return err
		}
		for _, f := range s.Status.Findings {
			if f.Rule == "pool-drift" && strings.Contains(f.Message, "pool b has 2 nodes, its target is 1") {
				if !conditions.IsReady(s) {
					return fmt.Errorf("not ready: %s", conditions.GetMessage(s, allotv1.ReadyCondition))
				}
				return nil
			}
		}
		return fmt.Errorf("findings %+v", s.Status.Findings)
	})
	waitNodes(t, c, "b-0", "b-extra")

	// The Pool object is deleted by hand: the next reconcile makes it again
	// (its pool looks grown from nothing; its nodes are there and Ready).
	if err := c.Delete(ctx, &allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pool b made again", func() error {
		return c.Get(ctx, client.ObjectKey{Name: "b"}, &allotv1.Pool{})
	})
	waitNodes(t, c, "b-0", "b-extra")

	// A lost node is seen by its name, though the extra node keeps the
	// pool's count at its target.
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b-0"}}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, c, "b-0", "b-extra") // (a second Drift event joins the first's series)
}

// waitEvent waits for an event on the source with the reason and a note
// containing want.
func waitEvent(t *testing.T, c client.Client, key types.NamespacedName, reason, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "event "+reason, func() error {
		var evs eventsv1.EventList
		if err := c.List(context.Background(), &evs, client.InNamespace(key.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == key.Name && e.Reason == reason && strings.Contains(e.Note, want) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s with %q", len(evs.Items), reason, want)
	})
}

// startTerraform runs a second CapacitySource reconciler in this process
// (the suite runs one), on tenv, with Terraform tf (its Reader, Dir and
// Recorder filled in, and its Hook unless set: this test binary, see
// TestMain) and the other parts setups add; it stops when the test ends.
func startTerraform(t *testing.T, tenv *testenv.Env, tf *capacity.Terraform, setups ...func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(tenv.Config, ctrl.Options{Scheme: tenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	tf.Reader, tf.Dir, tf.Recorder = mgr.GetAPIReader(), t.TempDir(), mgr.GetEventRecorder("allot-capacity")
	if tf.Hook == "" {
		tf.Hook = os.Args[0]
	}
	r := &capacity.Reconciler{
		Client:   mgr.GetClient(),
		Fetcher:  capacity.Sources{Git: &capacity.GitFetcher{Dir: t.TempDir()}},
		Recorder: mgr.GetEventRecorder("allot-capacity"),
		Capacity: tf,
	}
	setups = append(setups, r.SetupWithManager)
	for _, setup := range setups {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// kwokSource creates the CapacitySource gitops/lab of repo's main branch,
// checked every second, and waits until head, a kwokRepo(16), is applied:
// the pool's two nodes are there.
func kwokSource(t *testing.T, c client.Client, repo *gitRepo, head string) types.NamespacedName {
	t.Helper()
	key := types.NamespacedName{Namespace: "gitops", Name: "lab"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL = "file://" + repo.dir
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := c.Create(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c, key, head)
	waitNodes(t, c, "a-0", "a-1")
	return key
}

func waitApplied(t *testing.T, c client.Client, key types.NamespacedName, rev string) {
	t.Helper()
	eventually(t, 90*time.Second, "revision "+rev+" applied", func() error {
		s := &allotv1.CapacitySource{}
		if err := c.Get(context.Background(), key, s); err != nil {
			return err
		}
		if !strings.HasSuffix(s.Status.LastAppliedRevision, rev) || !conditions.IsReady(s) {
			return fmt.Errorf("applied %q: %s", s.Status.LastAppliedRevision, conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
}

// waitNodes waits until the Node objects are exactly names.
func waitNodes(t *testing.T, c client.Client, names ...string) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("nodes %v", names), func() error {
		var nodes corev1.NodeList
		if err := c.List(context.Background(), &nodes); err != nil {
			return err
		}
		var got []string
		for _, n := range nodes.Items {
			got = append(got, n.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			return fmt.Errorf("nodes %v", got)
		}
		return nil
	})
}

func submitGang(t *testing.T, c client.Client, ns, name string, pods, gpus int64) []string {
	t.Helper()
	var names []string
	for i := range pods {
		q := *resource.NewQuantity(gpus, resource.DecimalSI)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{
				contract.LabelTeam: "alpha", contract.LabelGang: name, contract.LabelGangSize: fmt.Sprint(pods)}},
			Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: q}}}}},
		}
		if err := c.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	return names
}
