package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/planner/render/terraform"
)

// Capacity is what a simulated node offers besides its GPUs.
var Capacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("192"),
	corev1.ResourceMemory: resource.MustParse("2Ti"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// Main runs one hook call with the API server of KUBECONFIG (or the
// in-cluster configuration when it is unset); getenv reads the environment.
func Main(ctx context.Context, getenv func(string) string) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = getenv("KUBECONFIG")
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("kwok hook: kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("kwok hook: %w", err)
	}
	return Hook(ctx, c, getenv)
}

// Hook runs one hook call: ALLOT_ACTION create or delete of the node
// ALLOT_NODE, with the labels of ALLOT_NODE_LABELS and ALLOT_GPUS GPUs.
func Hook(ctx context.Context, c client.Client, getenv func(string) string) error {
	name := getenv(terraform.EnvNode)
	if name == "" {
		return fmt.Errorf("kwok hook: %s is not set", terraform.EnvNode)
	}
	switch action := getenv(terraform.EnvAction); action {
	case "create":
		labels := map[string]string{}
		if s := getenv(terraform.EnvNodeLabels); s != "" {
			if err := json.Unmarshal([]byte(s), &labels); err != nil {
				return fmt.Errorf("kwok hook: node %s: %s: %w", name, terraform.EnvNodeLabels, err)
			}
		}
		gpus, err := strconv.ParseInt(getenv(terraform.EnvGPUs), 10, 64)
		if err != nil {
			return fmt.Errorf("kwok hook: node %s: %s: %w", name, terraform.EnvGPUs, err)
		}
		if err := Create(ctx, c, name, labels, gpus); err != nil {
			return fmt.Errorf("kwok hook: creating node %s: %w", name, err)
		}
	case "delete":
		err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kwok hook: deleting node %s: %w", name, err)
		}
	default:
		return fmt.Errorf("kwok hook: node %s: unknown %s %q", name, terraform.EnvAction, action)
	}
	return nil
}

// Create makes the node name exist with labels and gpus GPUs, Ready and
// without the not-ready taint the API server's admission puts on new nodes.
// A node that exists is completed, not replaced.
func Create(ctx context.Context, c client.Client, name string, labels map[string]string, gpus int64) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(ctx, n); apierrors.IsAlreadyExists(err) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
	if !ready {
		capacity := Capacity.DeepCopy()
		capacity[nodestate.ResourceGPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", Message: "kwok node of allot", LastHeartbeatTime: now, LastTransitionTime: now}}
		if err := c.Status().Update(ctx, n); err != nil {
			return err
		}
	}
	if i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }); i >= 0 {
		n.Spec.Taints = slices.Delete(n.Spec.Taints, i, i+1)
		return c.Update(ctx, n)
	}
	return nil
}
