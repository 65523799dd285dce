package capacity_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/pool"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler/runner"
	"github.com/fluxcd/pkg/runtime/conditions"
)

// repairRepo is kwokRepo(16) (2 nodes of 8 GPUs, nodes.max 8) with the
// repair given.
func repairRepo(repair string) string {
	return kwokRepo(16) + "pools: a: repair: " + repair + "\n"
}

// Issue 46 end to end, with the real API server, the real terraform and the
// kwok module: a node of a pool with repair turns unhealthy while a gang
// runs on it; after the grace a replacement node is made through Terraform
// (a failed apply first, which keeps the last good size and is retried);
// the broken node stays while the gang is on it, and once the gang left it is
// retired and deleted by its hook, its replacement keeping its seat. The pool
// never goes beyond nodes.max, and ends at its planned size.
func TestRepairReplacesABrokenNode(t *testing.T) {
	c, reg, secret := startRepair(t, nil, nil)
	ctx := context.Background()

	repo := newGitRepo(t)
	// A node unusable for 2 seconds is replaced, one at a time.
	repo.write("capacity.cue", repairRepo(`{after: "2s", maxNodes: 1}`))
	head := repo.commit("pool a with repair")
	key := kwokSource(t, c, repo, head)

	// Never more nodes than nodes.max, sampled all along.
	most := watchMostNodes(t, c)

	// A gang's pod runs on a-1 (bound by hand: no scheduler here).
	gang := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "gang-0"},
		Spec: corev1.PodSpec{NodeName: "a-1", Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}}}}},
	}
	if err := c.Create(ctx, gang); err != nil {
		t.Fatal(err)
	}
	// Terraform's node hooks fail from now on (their kubeconfig is wrong).
	good := string(secret.Data["KUBECONFIG"])
	if good == "" {
		t.Fatalf("the Secret holds no kubeconfig: %v", secret.Data)
	}
	setKubeconfig(t, c, secret, filepath.Join(t.TempDir(), "no-such-kubeconfig"))

	// a-1 gets a fatal GPU fault.
	setFault(t, c, "a-1", true)

	// After the grace, repair holds a replacement, but making it fails: the
	// pool keeps its last good size, and the source says why.
	eventually(t, 30*time.Second, "one replacement held", func() error {
		if s := statusOf(t, c, "a"); s.ReplacementNodes != 1 {
			return fmt.Errorf("repair status %+v", s)
		}
		return nil
	})
	eventually(t, 60*time.Second, "the replacement's apply failed", func() error {
		msg := conditions.GetMessage(getSourceOf(t, c, key), allotv1.ReadyCondition)
		if !strings.Contains(msg, "node hook failed") {
			return fmt.Errorf("ready: %s", msg)
		}
		return nil
	})
	waitNodes(t, c, "a-0", "a-1")

	// With the kubeconfig fixed, the retry makes it; a-1 stays.
	setKubeconfig(t, c, secret, good)
	waitNodes(t, c, "a-0", "a-1", "a-2")
	p := getPool(t, c, "a")
	if p.Status.Repair == nil || p.Status.Repair.ReplacementNodes != 1 || !strings.Contains(p.Status.Repair.Message, "a-1 lost") {
		t.Fatalf("pool status repair = %+v, want 1 replacement node for a-1", p.Status.Repair)
	}
	waitPoolEvent(t, c, "a", string(elastic.ActionReplace), "a-1 lost")
	if p.Spec.NodesTarget != 2 {
		t.Errorf("the Pool's planned target changed: %d", p.Spec.NodesTarget)
	}

	// The gang leaves a-1: it is retired, cordoned, and deleted by its hook;
	// a-2 keeps its seat and the replacement is returned to the plan.
	if err := c.Delete(ctx, gang); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, c, "a-0", "a-2")
	waitPoolEvent(t, c, "a", string(elastic.ActionRetire), "a-1")
	eventually(t, 30*time.Second, "the replacement returned to the plan", func() error {
		p := getPool(t, c, "a")
		// a-1 is gone: its record with it.
		if p.Status.Repair == nil || p.Status.Repair.ReplacementNodes != 0 || len(p.Status.Repair.Nodes) != 0 {
			return fmt.Errorf("repair status %+v", p.Status.Repair)
		}
		return nil
	})
	// And it stays so: the source applies its revision again and again
	// (every second) without making a-1 or a third node again.
	waitApplied(t, c, key, head)
	time.Sleep(3 * time.Second)
	waitNodes(t, c, "a-0", "a-2")
	if m := most(); m != 3 {
		t.Errorf("the pool peaked at %d nodes; want 3: one replacement beside the broken node", m)
	}
	const want = `
# HELP allot_pool_repair_actions_total Repair and burst actions taken, by pool and action (ReplacementAdded, ReplacementReturned, NodeRetired, NodeFlapping, ReplacementAtMax, BurstScaledUp, BurstScaledDown, BurstAtMax).
# TYPE allot_pool_repair_actions_total counter
allot_pool_repair_actions_total{action="NodeRetired",pool="a"} 1
allot_pool_repair_actions_total{action="ReplacementAdded",pool="a"} 1
# HELP allot_pool_replacement_nodes Replacement nodes a pool holds beyond its planned size for lost nodes (spec.repair).
# TYPE allot_pool_replacement_nodes gauge
allot_pool_replacement_nodes{pool="a"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "allot_pool_repair_actions_total", "allot_pool_replacement_nodes"); err != nil {
		t.Error(err)
	}
}

// A node that fails, recovers and fails again within the flap window is
// retired once: cordoned, deleted by its hook, its seat filled by a new node;
// it is not replaced and taken back each time.
func TestRepairRetiresAFlappingNode(t *testing.T) {
	c, _, _ := startRepair(t, nil, nil)
	repo := newGitRepo(t)
	repo.write("capacity.cue", repairRepo(`{after: "10m", flaps: 2, flapWindow: "1h"}`))
	head := repo.commit("pool a with repair")
	kwokSource(t, c, repo, head)

	// A status that claims a-0 retired, a node a-9 kept and a hundred
	// replacements deletes nothing and makes at most repair.maxNodes (1).
	most := watchMostNodes(t, c)
	p := getPool(t, c, "a")
	base := p.DeepCopy()
	p.Status.Repair = &allotv1.PoolRepairStatus{ReplacementNodes: 100, Nodes: []allotv1.PoolNodeRecord{
		{Name: "a-0", Retired: true}, {Name: "a-9", Retired: true, Kept: true}}}
	if err := c.Status().Patch(context.Background(), p, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	waitNodes(t, c, "a-0", "a-1")
	eventually(t, 60*time.Second, "the forged claims dropped from the status", func() error {
		if s := statusOf(t, c, "a"); s.ReplacementNodes != 0 || len(s.Nodes) != 0 {
			return fmt.Errorf("the claims stayed on the status: %+v", s)
		}
		return nil
	})
	if m := most(); m > 3 {
		t.Errorf("the pool peaked at %d nodes on a forged status; repair.maxNodes allows 3", m)
	}

	failures := func(want int, unusable bool) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("a-1 with %d failure(s) on record", want), func() error {
			for _, n := range statusOf(t, c, "a").Nodes {
				if n.Name == "a-1" && len(n.Failures) == want && (n.UnusableSince != nil) == unusable {
					return nil
				}
			}
			return fmt.Errorf("records %+v", statusOf(t, c, "a").Nodes)
		})
	}
	setFault(t, c, "a-1", true)
	failures(1, true)
	setFault(t, c, "a-1", false)
	failures(1, false)
	setFault(t, c, "a-1", true)
	waitPoolEvent(t, c, "a", string(elastic.ActionFlapping), "a-1 became unusable 2 times")
	waitNodes(t, c, "a-0", "a-2")
	time.Sleep(3 * time.Second)
	waitNodes(t, c, "a-0", "a-2")
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs); err != nil {
		t.Fatal(err)
	}
	flapped := 0
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Pool" && e.Reason == string(elastic.ActionFlapping) {
			flapped++
		}
		if e.Regarding.Kind == "Pool" && e.Reason == string(elastic.ActionReplace) {
			t.Errorf("a replacement for a retired node whose seat is refilled: %s", e.Note)
		}
	}
	if flapped != 1 {
		t.Errorf("%d NodeFlapping events, want 1", flapped)
	}
}

// startRepair starts the manager with Terraform (the kwok module, its
// kubeconfig in the Secret gitops/tf-env, returned) and the Pool reconciler
// on a new API server with the namespace gitops; with sched, allot's
// scheduler too, whose demand the Pool reconciler takes, and with now, the
// Pool reconciler's clock.
func startRepair(t *testing.T, sched *runner.Runner, now func() time.Time) (client.Client, *prometheus.Registry, *corev1.Secret) {
	tenv, secret := kwokEnv(t)
	c := tenv.Client
	reg := prometheus.NewRegistry()
	pools := &pool.Reconciler{Metrics: pool.NewMetrics(reg), Recheck: 200 * time.Millisecond, Now: now}
	setups := []func(ctrl.Manager) error{func(mgr ctrl.Manager) error {
		pools.Client, pools.Reader, pools.Recorder = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("allot-pool")
		return pools.SetupWithManager(mgr)
	}}
	if sched != nil {
		pools.Demand = sched.Demand
		setups = append(setups, sched.SetupWithManager)
	}
	startTerraform(t, tenv, &capacity.Terraform{EnvSecret: client.ObjectKeyFromObject(secret), ReadyTimeout: time.Minute}, setups...)
	return c, reg, secret
}

// kwokEnv starts a new API server with the namespace gitops and the Secret
// gitops/tf-env, whose KUBECONFIG (of that API server) Terraform's kwok
// hooks read.
func kwokEnv(t *testing.T) (*testenv.Env, *corev1.Secret) {
	t.Helper()
	tenv := testenv.Start(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := tenv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := tenv.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "tf-env"}, StringData: map[string]string{"KUBECONFIG": kubeconfig}}
	if err := tenv.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return tenv, secret
}

// setKubeconfig points Terraform's hooks at kubeconfig.
func setKubeconfig(t *testing.T, c client.Client, secret *corev1.Secret, kubeconfig string) {
	t.Helper()
	secret.StringData = map[string]string{"KUBECONFIG": kubeconfig}
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// setFault sets or clears the fatal GPU fault taint of a node.
func setFault(t *testing.T, c client.Client, node string, fault bool) {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	base := n.DeepCopy()
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == nodestate.TaintGPUFault })
	if fault {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: nodestate.TaintGPUFault, Effect: corev1.TaintEffectNoSchedule})
	}
	if err := c.Patch(context.Background(), &n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func statusOf(t *testing.T, c client.Client, pool string) allotv1.PoolRepairStatus {
	if s := getPool(t, c, pool).Status.Repair; s != nil {
		return *s
	}
	return allotv1.PoolRepairStatus{}
}

// watchMostNodes samples the number of Node objects until the test ends and
// returns a func that says the most seen.
func watchMostNodes(t *testing.T, c client.Client) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	most := make(chan int, 1)
	most <- 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var nodes corev1.NodeList
			if c.List(ctx, &nodes) == nil {
				m := <-most
				most <- max(m, len(nodes.Items))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int { m := <-most; most <- m; return m }
}

func getPool(t *testing.T, c client.Client, name string) *allotv1.Pool {
	t.Helper()
	p := &allotv1.Pool{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPoolEvent waits for an event of the Pool name with reason and a note
// containing want.
func waitPoolEvent(t *testing.T, c client.Client, name, reason, want string) {
	t.Helper()
	eventually(t, 30*time.Second, "pool event "+reason, func() error {
		var evs eventsv1.EventList
		if err := c.List(context.Background(), &evs); err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Pool" && e.Regarding.Name == name {
				if e.Reason == reason && strings.Contains(e.Note, want) {
					return nil
				}
				seen = append(seen, e.Reason+": "+e.Note)
			}
		}
		slices.Sort(seen)
		return fmt.Errorf("pool events %v", seen)
	})
}
