package testenv_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
