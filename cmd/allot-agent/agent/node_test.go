package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/health"
	"github.com/allot-dev/allot/fleet/nodestate"
)

var (
	envOnce sync.Once
	envRun  *testenv.Env
	envErr  error
	envStop func() error
)

// apiServer starts one control plane for the package's node tests; without
// the binaries the test fails with the command that builds them.
func apiServer(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { envRun, envStop, envErr = testenv.StartMain() })
	if envErr != nil {
		t.Fatalf("testenv: %v", envErr)
	}
	return envRun
}

// stopAPIServer stops the control plane, if one was started.
func stopAPIServer() {
	if envStop != nil {
		_ = envStop()
	}
}

var nodes atomic.Int32

// gpuNode creates a Ready node of 8 GPUs with boot ID boot-1, a kubelet
// condition and a taint of someone else's, which the agent must leave alone.
// Its name is prefix and a number of its own: tests share the API server.
func gpuNode(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("%s-%d", prefix, nodes.Add(1))
	n, err := testenv.CreateNode(ctx, c, name, nvmltest.GPUs, map[string]string{contract.LabelCluster: "onprem-a"})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.BootID = "boot-1"
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"})
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "training", Effect: corev1.TaintEffectNoSchedule})
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	return name
}

func getNode(t *testing.T, c client.Client, name string) *corev1.Node {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// gpuEvents returns the agent's events of node name, oldest first.
func gpuEvents(t *testing.T, c client.Client, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Source.Component == Component {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTimestamp.Before(&out[j].LastTimestamp) })
	return out
}

// condition returns the node's condition of type typ.
func condition(n *corev1.Node, typ corev1.NodeConditionType) (corev1.NodeCondition, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

// TestAgentNode publishes on a node of a real API server: a healthy node, a
// fatal XID (condition, healthy-gpus annotation, taint, kept state, a Warning
// event), a steady poll that writes nothing, a restarted agent that remembers,
// and a reboot that clears it all, while the kubelet's condition and another
// taint stay.
func TestAgentNode(t *testing.T) {
	env := apiServer(t)
	c := env.Client
	name := gpuNode(t, c, "gpu-node")
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	pub := NewNode(c, name, 5*time.Minute, clk.Now)
	srv := nvmltest.New()
	a := New(NewReader(srv), nil, instant(), pub, Options{Now: clk.Now})
	ctx := context.Background()

	if cluster, err := pub.Cluster(ctx); err != nil || cluster != "onprem-a" {
		t.Errorf("Cluster = %q, %v", cluster, err)
	}
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	n := getNode(t, c, name)
	if cond, ok := condition(n, nodestate.ConditionGPUHealthy); !ok || cond.Status != corev1.ConditionTrue || cond.Reason != health.ReasonHealthy || cond.Message != "8 of 8 GPUs healthy" {
		t.Fatalf("healthy node condition %+v", cond)
	}
	if len(n.Spec.Taints) != 1 || n.Annotations[nodestate.AnnotationHealthyGPUs] != "" {
		t.Fatalf("healthy node: taints %v annotations %v", n.Spec.Taints, n.Annotations)
	}

	// A fatal XID on GPU 2.
	clk.Add(time.Minute)
	a.AddXID(health.XIDEvent{GPU: 2, UUID: nvmltest.UUIDOf(2), Code: 79, Time: clk.Now()})
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	n = getNode(t, c, name)
	cond, _ := condition(n, nodestate.ConditionGPUHealthy)
	if cond.Status != corev1.ConditionFalse || cond.Reason != "XID" || !strings.Contains(cond.Message, "7 of 8 GPUs healthy: GPU 2 XID: XID 79 (GPU has fallen off the bus) (fatal: until the node reboots)") {
		t.Errorf("faulty node condition %+v", cond)
	}
	if got := n.Annotations[nodestate.AnnotationHealthyGPUs]; got != "7" {
		t.Errorf("healthy-gpus annotation %q, want 7", got)
	}
	wantTaints := []corev1.Taint{{Key: "dedicated", Value: "training", Effect: corev1.TaintEffectNoSchedule}, {Key: nodestate.TaintGPUFault, Value: "XID", Effect: corev1.TaintEffectNoSchedule}}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0] != wantTaints[0] || n.Spec.Taints[1].Key != wantTaints[1].Key || n.Spec.Taints[1].Value != "XID" || n.Spec.Taints[1].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("taints %+v, want %+v", n.Spec.Taints, wantTaints)
	}
	if mp, ok := condition(n, corev1.NodeMemoryPressure); !ok || mp.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("the kubelet's condition changed: %+v", mp)
	}
	if st, ok := nodestate.ReadState(n); !ok || st.BootID != "boot-1" || len(st.Faults) != 1 || st.Faults[0].GPU != 2 {
		t.Errorf("kept state %+v %v", st, ok)
	}
	if got := nodestate.Read(n); got.Usable || got.Reason != nodestate.ReasonGPUFault {
		t.Errorf("the scheduler reads %+v", got)
	}

	// A steady poll writes nothing and records no event.
	rv := n.ResourceVersion
	clk.Add(time.Minute)
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := getNode(t, c, name); n.ResourceVersion != rv {
		t.Errorf("a steady poll wrote the node")
	}

	// A restarted agent remembers the fault although the GPUs read fine now.
	a = New(NewReader(srv), nil, instant(), pub, Options{Now: clk.Now})
	clk.Add(time.Minute)
	if rep, err := a.Poll(ctx); err != nil || rep.Healthy || !rep.Fatal {
		t.Fatalf("restarted agent: %v %s", err, rep.Message)
	}

	// The node reboots.
	n = getNode(t, c, name)
	n.Status.NodeInfo.BootID = "boot-2"
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	if _, err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	n = getNode(t, c, name)
	cond, _ = condition(n, nodestate.ConditionGPUHealthy)
	if cond.Status != corev1.ConditionTrue || cond.Reason != health.ReasonHealthy {
		t.Errorf("after the reboot: condition %+v", cond)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("after the reboot: taints %+v", n.Spec.Taints)
	}
	if v, ok := n.Annotations[nodestate.AnnotationHealthyGPUs]; ok {
		t.Errorf("after the reboot: annotation %s=%q stayed", nodestate.AnnotationHealthyGPUs, v)
	}
	// The kept state is the new boot's: no fault, the NVLink links seen up.
	if st, ok := nodestate.ReadState(n); !ok || st.BootID != "boot-2" || len(st.Faults) != 0 || st.NVLinksUp[7] != nvmltest.NVLinksPerGPU {
		t.Errorf("after the reboot: kept state %+v", st)
	}
	if got := nodestate.Read(n); !got.Usable || got.HealthyGPUs != 8 {
		t.Errorf("after the reboot the scheduler reads %+v", got)
	}

	// One event per change of health: healthy, XID, healthy again.
	evs := gpuEvents(t, c, name)
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+"/"+e.Reason)
	}
	if strings.Join(got, " ") != "Normal/AllChecksPassed Warning/XID Normal/AllChecksPassed" {
		t.Errorf("events %v", got)
	}
	if len(evs) == 3 && (evs[1].InvolvedObject.Kind != "Node" || !strings.Contains(evs[1].Message, "XID 79")) {
		t.Errorf("XID event %+v", evs[1])
	}
}

// TestAgentNodeMissing: a node that does not exist is an error that names it,
// and nothing is decided.
func TestAgentNodeMissing(t *testing.T) {
	env := apiServer(t)
	pub := NewNode(env.Client, "no-such-node", time.Minute, nil)
	a := New(NewReader(nvmltest.New()), nil, instant(), pub, Options{})
	if _, err := a.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), "reading node no-such-node") {
		t.Errorf("poll of a missing node: %v", err)
	}
	if err := pub.Publish(context.Background(), health.Report{Healthy: true, Reason: health.ReasonHealthy}, health.State{}); err == nil || !strings.Contains(err.Error(), "writing GPU health on node no-such-node") {
		t.Errorf("publish on a missing node: %v", err)
	}
}

// TestAgentNodeConflict: another writer changes the node's taints between the
// agent's read and its write; the optimistic lock makes the agent read again,
// and both taints are on the node.
func TestAgentNodeConflict(t *testing.T) {
	env := apiServer(t)
	name := gpuNode(t, env.Client, "gpu-node-conflict")
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	patches := 0
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			if patches == 1 {
				n := getNode(t, env.Client, name)
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule})
				if err := env.Client.Update(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			return c.Patch(ctx, obj, p, opts...)
		},
	})
	pub := NewNode(c, name, time.Minute, nil)
	rep := health.Report{Reason: "RowRemap", Message: "7 of 8 GPUs healthy: ...", Fatal: true, GPUs: 8, HealthyGPUs: 7,
		Faults: []health.Fault{{GPU: 1, Check: health.CheckRowRemap, Fatal: true, Phase: health.Active}}}
	if err := pub.Publish(context.Background(), rep, health.State{BootID: "boot-1", Faults: rep.Faults}); err != nil {
		t.Fatal(err)
	}
	n := getNode(t, env.Client, name)
	var keys []string
	for _, tt := range n.Spec.Taints {
		keys = append(keys, tt.Key+"="+tt.Value)
	}
	if strings.Join(keys, " ") != "dedicated=training maintenance= allot.dev/gpu-fault=RowRemap" || patches != 2 {
		t.Errorf("taints %v after %d patches, want the other writer's and the agent's after a retry", keys, patches)
	}
	if cond, _ := condition(n, nodestate.ConditionGPUHealthy); cond.Reason != "RowRemap" {
		t.Errorf("condition %+v", cond)
	}
}
