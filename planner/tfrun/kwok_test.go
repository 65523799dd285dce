package tfrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/kwok"
	"github.com/allot-dev/allot/schema"
)

// hookEnv makes the test binary the node hook of the kwok module: terraform's
// local-exec runs it again with this variable set, and TestMain runs
// kwok.Main instead of the tests.
const hookEnv = "ALLOT_TEST_KWOK_HOOK"

func TestMain(m *testing.M) {
	if os.Getenv(hookEnv) == "1" {
		os.Exit(kwokHook())
	}
	code := m.Run()
	if cp.stop != nil {
		if err := cp.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

// cp is the control plane the kwok tests share, started by the first.
var cp struct {
	once sync.Once
	env  *testenv.Env
	stop func() error
	err  error
}

func controlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	cp.once.Do(func() { cp.env, cp.stop, cp.err = testenv.StartMain() })
	if cp.err != nil {
		t.Fatalf("testenv: %v", cp.err)
	}
	return cp.env
}

// kwokHook is the hook: kwok.Main, with the lab's controls (see lab): when
// HOOK_DIR/block-<node> exists it hangs, then fails without doing anything
// (so that, orphaned by a killed terraform, it touches nothing), and it is
// slow when slow-<node> exists.
func kwokHook() int {
	dir, node := os.Getenv("HOOK_DIR"), os.Getenv(terraform.EnvNode)
	if _, err := os.Stat(filepath.Join(dir, "block-"+node)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "blocked-"+node), nil, 0o644)
		time.Sleep(time.Minute)
		return 1
	}
	if _, err := os.Stat(filepath.Join(dir, "slow-"+node)); err == nil {
		time.Sleep(time.Second)
	}
	if err := kwok.Main(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// kwokLab is a lab whose hook is kwok's, against a real API server.
func kwokLab(t *testing.T) (*lab, client.Client, []Option) {
	t.Helper()
	l := newLab(t)
	env := controlPlane(t)
	kc := filepath.Join(l.hook, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return l, env.Client, []Option{
		WithVars(map[string]string{"command": self}),
		WithEnv(map[string]string{hookEnv: "1", "KUBECONFIG": kc}),
	}
}

// poolNodes returns the Node objects of pool, by name.
func poolNodes(t *testing.T, c client.Client, pool string) map[string]corev1.Node {
	t.Helper()
	var list corev1.NodeList
	if err := c.List(context.Background(), &list, client.MatchingLabels{contract.LabelPool: pool}); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Node{}
	for _, n := range list.Items {
		out[n.Name] = n
	}
	return out
}

// checkNodes checks that pool has exactly the nodes want, each Ready with its
// GPUs, labels and no not-ready taint, and that the state has them too.
func checkNodes(t *testing.T, l *lab, c client.Client, pool string, want []string) {
	t.Helper()
	nodes := poolNodes(t, c, pool)
	var got []string
	for name, n := range nodes {
		got = append(got, name)
		gpus := n.Status.Allocatable[nodestate.ResourceGPU]
		if !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}) || gpus.Value() != 8 || len(n.Spec.Taints) != 0 {
			t.Errorf("node %s is not a Ready node with 8 GPUs: conditions %v, GPUs %v, taints %v", name, n.Status.Conditions, gpus.Value(), n.Spec.Taints)
		}
		if n.Labels[contract.LabelFlavor] != "a100-40gb" || n.Labels[contract.LabelCluster] != "lab" || n.Labels[contract.TopologyLabel("host")] != name || n.Labels[contract.TopologyLabel("rack")] == "" {
			t.Errorf("node %s labels: %v", name, n.Labels)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Node objects of pool %s (-want +got):\n%s", pool, diff)
	}
	if diff := cmp.Diff(want, l.state()); diff != "" {
		t.Errorf("nodes in the state (-want +got):\n%s", diff)
	}
}

// TestKwokNodes drives the Node objects of a kwok pool in a real API server
// through the runner: grow, a node lost outside Terraform (drift, then
// replaced), a kill mid-apply and a restart, shrink and destroy.
func TestKwokNodes(t *testing.T) {
	ctx := context.Background()
	l, c, opts := kwokLab(t)
	observed := func() map[schema.PoolName]int64 {
		return map[schema.PoolName]int64{"a100": int64(len(poolNodes(t, c, "a100")))}
	}
	r, p := l.applied(ctx, map[string]int64{"a100": 3}, opts...)
	if cp := pool(p, "a100"); cp.NodesBefore != 0 || cp.NodesAfter != 3 {
		t.Errorf("summary of the growth: %+v", cp)
	}
	checkNodes(t, l, c, "a100", names("a100", 0, 1, 2))

	// A node is deleted outside Terraform: drift, corrected by replacing it.
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metaName("a100-1")}); err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, PlanOptions{Observed: observed()})
	if err != nil {
		t.Fatal(err)
	}
	if p.Drift == nil || !cmp.Equal(p.Drift.Pools, []PoolDrift{{Pool: "a100", State: 3, Observed: 2}}) {
		t.Fatalf("drift after a node was deleted: %v", p.Drift)
	}
	if err := p.Discard(); err != nil {
		t.Fatal(err)
	}
	p, err = r.Plan(ctx, PlanOptions{Observed: observed(), Replace: []string{terraform.NodeAddress("a100", "a100-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, p, ApplyOptions{CorrectDrift: true}); err != nil {
		t.Fatal(err)
	}
	checkNodes(t, l, c, "a100", names("a100", 0, 1, 2))

	// Killed while the hook of a100-2 runs (blockedApply grows from 1 to 4
	// nodes and blocks in a100-2's hook).
	l.size(map[string]int64{"a100": 1})
	l.converge(ctx, r)
	checkNodes(t, l, c, "a100", names("a100", 0))
	done := blockedApply(t, l, ctx, r)
	if err := syscall.Kill(terraformPID(t, l.dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a killed apply reported success")
	}
	if _, ok := poolNodes(t, c, "a100")["a100-2"]; ok {
		t.Fatal("a100-2 exists before the restart: the kill came too late to test anything")
	}
	l.remove("block-a100-2")
	r = l.runner(ctx, opts...)
	p, err = r.Plan(ctx, PlanOptions{Observed: observed()})
	if err != nil {
		t.Fatalf("plan after the kill: %v", err)
	}
	// The state has a100-2 (Terraform writes a node before its hook runs);
	// the cluster does not: drift, which the plan corrects by resuming it.
	if cp := pool(p, "a100"); cp.NodesBefore != 4 || cp.NodesAfter != 4 || cp.Resumed != 3 {
		t.Errorf("summary after the kill: %+v", cp)
	}
	if err := r.Apply(ctx, p, ApplyOptions{CorrectDrift: true}); err != nil {
		t.Fatalf("apply after the kill: %v", err)
	}
	checkNodes(t, l, c, "a100", names("a100", 0, 1, 2, 3))
	if p, err := r.Plan(ctx, PlanOptions{Observed: observed()}); err != nil || p.Drift != nil || p.Changes {
		t.Errorf("plan after the restart: drift %v, changes %v, err %v", p.Drift, p.Changes, err)
	} else if err := p.Discard(); err != nil {
		t.Fatal(err)
	}

	l.size(map[string]int64{"a100": 2})
	l.converge(ctx, r)
	checkNodes(t, l, c, "a100", names("a100", 0, 1))

	p, err = r.Plan(ctx, PlanOptions{Destroy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, p, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := poolNodes(t, c, "a100"); len(got) != 0 {
		t.Errorf("nodes left after destroy: %v", got)
	}
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// TestKwokHook calls the hook directly: creates and deletes are idempotent,
// and a create completes a node a run cut short left half made.
func TestKwokHook(t *testing.T) {
	ctx := context.Background()
	c := controlPlane(t).Client
	env := map[string]string{
		terraform.EnvAction: "create", terraform.EnvNode: "h-0", terraform.EnvGPUs: "8",
		terraform.EnvNodeLabels: `{"allot.dev/pool":"h","allot.dev/flavor":"h100-80gb"}`,
	}
	getenv := func(k string) string { return env[k] }
	for range 2 {
		if err := kwok.Hook(ctx, c, getenv); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	if n := poolNodes(t, c, "h"); len(n) != 1 || len(n["h-0"].Spec.Taints) != 0 || n["h-0"].Labels[contract.LabelFlavor] != "h100-80gb" {
		t.Errorf("nodes after two creates: %+v", n)
	}

	// Half made: the object exists, not Ready, still tainted.
	half := &corev1.Node{ObjectMeta: metaName("h-1")}
	half.Labels = map[string]string{contract.LabelPool: "h"}
	if err := c.Create(ctx, half); err != nil {
		t.Fatal(err)
	}
	env[terraform.EnvNode] = "h-1"
	if err := kwok.Hook(ctx, c, getenv); err != nil {
		t.Fatalf("create of a half-made node: %v", err)
	}
	n := poolNodes(t, c, "h")["h-1"]
	if gpus := n.Status.Allocatable[nodestate.ResourceGPU]; gpus.Value() != 8 || len(n.Spec.Taints) != 0 || len(n.Status.Conditions) == 0 {
		t.Errorf("half-made node not completed: %+v", n)
	}

	env[terraform.EnvAction] = "delete"
	for range 2 {
		if err := kwok.Hook(ctx, c, getenv); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, ok := poolNodes(t, c, "h")["h-1"]; ok {
		t.Error("h-1 still there after delete")
	}

	env[terraform.EnvAction] = "resize"
	if err := kwok.Hook(ctx, c, getenv); err == nil || !strings.Contains(err.Error(), `unknown ALLOT_ACTION "resize"`) {
		t.Errorf("unknown action: %v", err)
	}
}
