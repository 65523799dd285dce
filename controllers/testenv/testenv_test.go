package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// The control plane starts, serves allot's CRDs, and a created node is Ready,
// untainted and has its GPUs.
func TestStart(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	var teams allotv1.TeamList
	if err := env.Client.List(ctx, &teams); err != nil {
		t.Fatalf("listing Teams (CRD not installed?): %v", err)
	}
	if _, err := testenv.CreateNode(ctx, env.Client, "n-0", 8, map[string]string{"allot.dev/pool": "p"}); err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "n-0"}, &n); err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("taints = %v, want none", n.Spec.Taints)
	}
	if got := n.Status.Allocatable[nodestate.ResourceGPU]; got.Value() != 8 {
		t.Errorf("allocatable GPUs = %v, want 8", got.String())
	}
}

// A namespace deleted while it holds objects is emptied and removed, as the
// namespace controller does in a cluster, and its name can be created again.
func TestFinalizeNamespaces(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.FinalizeNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "again"}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatalf("round %d: creating the namespace: %v", round, err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "again", Name: "data"}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "again", Name: "p"}}
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "none"}}
		pod.Spec.NodeName = "nowhere" // a bound pod waits for its kubelet to go, unless forced
		for _, o := range []client.Object{cm, pod} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := env.Client.Delete(ctx, ns); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 20*time.Second, "the namespace removed", func() error {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v): phase %s, finalizers %v", err, ns.Status.Phase, ns.Spec.Finalizers)
		})
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); !apierrors.IsNotFound(err) {
			t.Errorf("round %d: the ConfigMap outlived its namespace: %v", round, err)
		}
	}
}

// TestRestartAPIServer: an API server stopped and started again answers at
// the same address, to the same credentials, with the same data.
func TestRestartAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err == nil {
		t.Fatal("the stopped API server answered")
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	var got corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), &got); err != nil || got.UID != ns.UID {
		t.Fatalf("after the restart: %v, uid %q want %q", err, got.UID, ns.UID)
	}
}
