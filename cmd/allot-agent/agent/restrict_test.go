package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/health"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// applyConfig creates the objects of manifests of the repository's config/.
func applyConfig(t *testing.T, c client.Client, paths ...string) {
	t.Helper()
	for _, p := range paths {
		f, err := os.Open(filepath.Join(testenv.Root(), p))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", p, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(context.Background(), &u); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("%s: creating %s %s: %v", p, u.GetKind(), u.GetName(), err)
			}
		}
		f.Close()
	}
}

// agentClient is a client with the token the API server gives the agent's
// pod on node (a TokenRequest bound to that pod, as the DaemonSet's projected
// token is), or, node "", a token bound to no pod.
func agentClient(t *testing.T, env *testenv.Env, node string) client.Client {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "allot-agent"}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}
	if node != "" {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", GenerateName: "allot-agent-"},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "allot-agent",
				Containers: []corev1.Container{{Name: "agent", Image: "allot:test"}}},
		}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("a token of the agent: %v", err)
	}
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptrTo[T any](v T) *T { return &v }

// The agent's service account may write its own node only, and there only
// what the agent owns (config/agent/node_policy.yaml, enforced by the API
// server): with the token bound to its pod on node own, the agent publishes
// a fatal fault on own (taint, annotation, condition, event); the same
// publish on node other, any other change on own (a label, another taint,
// unschedulable, the GPUs it advertises, another condition), an event on
// other, and any write with a token that names no node are refused.
func TestAgentWritesItsOwnNodeOnly(t *testing.T) {
	env := apiServer(t)
	c := env.Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "allot-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applyConfig(t, c, "config/agent/rbac.yaml", "config/agent/node_policy.yaml")
	own, other := gpuNode(t, c, "own"), gpuNode(t, c, "other")
	agent := agentClient(t, env, own)
	label := func(name string) error {
		n := getNode(t, c, name)
		orig := n.DeepCopy()
		n.Labels["stolen"] = "yes"
		return agent.Patch(ctx, n, client.MergeFrom(orig))
	}
	testenv.Eventually(t, 20*time.Second, "the agent's node policy in force", func() error {
		if err := label(other); err == nil {
			return errors.New("the agent relabelled another node")
		}
		return nil
	})

	fatal := health.Report{Healthy: false, Fatal: true, Reason: "XID79", Message: "GPU 3 fell off the bus", GPUs: 8, HealthyGPUs: 7}
	refused := func(what, want string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want refused with %q", what, err, want)
		}
	}
	refused("publishing on another node", "may write its own node only, not node "+other,
		NewNode(agent, other, time.Minute, nil).Publish(ctx, fatal, health.State{}))
	if n := getNode(t, c, other); len(n.Spec.Taints) != 1 || n.Annotations[nodestate.AnnotationHealthyGPUs] != "" {
		t.Errorf("another node changed: taints %v, annotations %v", n.Spec.Taints, n.Annotations)
	}
	if err := NewNode(agent, own, time.Minute, nil).Publish(ctx, fatal, health.State{}); err != nil {
		t.Fatalf("publishing on its own node: %v", err)
	}
	n := getNode(t, c, own)
	if cond, _ := condition(n, nodestate.ConditionGPUHealthy); cond.Status != corev1.ConditionFalse || n.Annotations[nodestate.AnnotationHealthyGPUs] != "7" ||
		len(n.Spec.Taints) != 2 || len(gpuEvents(t, c, own)) != 1 {
		t.Fatalf("its own node: condition %+v, annotations %v, taints %v, events %d", cond, n.Annotations, n.Spec.Taints, len(gpuEvents(t, c, own)))
	}

	change := func(status bool, f func(*corev1.Node)) error {
		n := getNode(t, c, own)
		orig := n.DeepCopy()
		f(n)
		if status {
			return agent.Status().Patch(ctx, n, client.MergeFrom(orig))
		}
		return agent.Patch(ctx, n, client.MergeFrom(orig))
	}
	const onlyOwn = "the agent may change the annotations allot.dev/healthy-gpus"
	for name, tc := range map[string]struct {
		status bool
		f      func(*corev1.Node)
		want   string
	}{
		"a label":              {false, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.present"] = "false" }, onlyOwn},
		"another annotation":   {false, func(n *corev1.Node) { n.Annotations = map[string]string{"x": "y"} }, onlyOwn},
		"another's taint gone": {false, func(n *corev1.Node) { n.Spec.Taints = n.Spec.Taints[1:] }, onlyOwn},
		"unschedulable":        {false, func(n *corev1.Node) { n.Spec.Unschedulable = true }, onlyOwn},
		"more GPUs": {true, func(n *corev1.Node) {
			n.Status.Capacity[nodestate.ResourceGPU] = resource.MustParse("64")
			n.Status.Allocatable[nodestate.ResourceGPU] = resource.MustParse("64")
		}, "the GPUHealthy condition only"},
		"the kubelet's condition": {true, func(n *corev1.Node) {
			for i := range n.Status.Conditions {
				if n.Status.Conditions[i].Type == corev1.NodeMemoryPressure {
					n.Status.Conditions[i].Status = corev1.ConditionTrue
				}
			}
		}, "the GPUHealthy condition only"},
	} {
		refused(name, tc.want, change(tc.status, tc.f))
	}
	if err := label(own); err == nil {
		t.Error("the agent relabelled its own node")
	}

	event := func(node string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node}, Reason: "XID79", Message: "m", Type: corev1.EventTypeWarning}
	}
	refused("an event on another node", "not node "+other, agent.Create(ctx, event(other)))
	if err := agent.Create(ctx, event(own)); err != nil {
		t.Errorf("an event on its own node: %v", err)
	}

	unbound := agentClient(t, env, "")
	refused("a token bound to no pod", "names no node", NewNode(unbound, own, time.Minute, nil).Publish(ctx, health.Report{Healthy: true, Reason: health.ReasonHealthy, GPUs: 8, HealthyGPUs: 8}, health.State{}))
}
