package main

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/scheduler/runner"
)

// The manager's and the agent's service accounts, with the RBAC (and the
// admission policy) of config/ and nothing else, can do their jobs and cannot
// do what they must not: read Secrets, create pods in an arbitrary namespace
// (or bound to a node), touch Leases other than the manager's own.
func TestServiceAccountRights(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	admin := env.Client
	testenv.ApplyManifests(t, admin, "config/rbac/role.yaml", "config/manager/rbac_binding.yaml", "config/rbac/pod_creation_policy.yaml", "config/agent/rbac.yaml")
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	manager := as("system:serviceaccount:allot-system:allot-manager")
	agent := as("system:serviceaccount:allot-system:allot-agent")

	// A team namespace the CapacitySource reconciler applied, one it did
	// not, a Secret in each, another component's Lease, a GPU node.
	team := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "robotics", Labels: map[string]string{capacity.LabelSourceName: "fleet", capacity.LabelSourceNamespace: "allot-system"}}}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "payments"}}
	for _, o := range []client.Object{
		team, other,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "db"}, StringData: map[string]string{"password": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "other"}, StringData: map[string]string{"token": "x"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "allot-terraform-env"}, StringData: map[string]string{"TF_VAR_project": "acme"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "capacity-git"}, StringData: map[string]string{"password": "x"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "someone-else"}},
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testenv.CreateNode(ctx, admin, "gpu-0", 8, nil); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "train-"},
			Spec: corev1.PodSpec{SchedulerName: "allot", NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}}
	}
	mergePatch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))
	lease := func(ns, name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}}
	get := func(c client.Client, ns, name string, o client.Object) error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	}

	// Its job: each must succeed.
	can := map[string]func() error{
		"manager: its leader Lease, 1 taken":   func() error { return manager.Create(ctx, lease("allot-system", "allot-manager")) },
		"manager: its leader Lease, 2 renewed": func() error { return manager.Patch(ctx, lease("allot-system", "allot-manager"), mergePatch) },
		"manager: reads its Terraform Secret":  func() error { return get(manager, "allot-system", "allot-terraform-env", &corev1.Secret{}) },
		"manager: its record of unbound pods, 1 made": func() error {
			return manager.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: runner.UnboundRecord}})
		},
		"manager: its record of unbound pods, 2 updated": func() error {
			var s corev1.Secret
			if err := get(manager, "allot-system", runner.UnboundRecord, &s); err != nil {
				return err
			}
			s.Data = map[string][]byte{"uid": []byte("{}")}
			return manager.Update(ctx, &s)
		},
		"manager: reads its Git Secret":     func() error { return get(manager, "allot-system", "capacity-git", &corev1.Secret{}) },
		"manager: lists nodes":              func() error { return manager.List(ctx, &corev1.NodeList{}) },
		"manager: lists pods":               func() error { return manager.List(ctx, &corev1.PodList{}) },
		"manager: makes a team's pod again": func() error { return manager.Create(ctx, pod("robotics", "")) },
		"manager: applies a Team": func() error {
			return manager.Create(ctx, &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "robotics"},
				Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}}})
		},
		"manager: reviews a scraper's token": func() error {
			return manager.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "x"}})
		},
		"agent: reads its node":                func() error { return get(agent, "", "gpu-0", &corev1.Node{}) },
		"agent: patches its node":              func() error { return agent.Patch(ctx, node, mergePatch) },
		"agent: patches its node's conditions": func() error { return agent.Status().Patch(ctx, node, mergePatch) },
	}
	// What it must not do: each must be refused (RBAC or admission).
	cannot := map[string]func() error{
		"manager: reads a Secret of another namespace":   func() error { return get(manager, "payments", "db", &corev1.Secret{}) },
		"manager: lists Secrets":                         func() error { return manager.List(ctx, &corev1.SecretList{}) },
		"manager: reads another Secret of its namespace": func() error { return get(manager, "allot-system", "other", &corev1.Secret{}) },
		"manager: updates another Secret of its namespace": func() error {
			return manager.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "allot-system", Name: "other"}, StringData: map[string]string{"token": "y"}})
		},
		"manager: creates a pod in an arbitrary namespace": func() error { return manager.Create(ctx, pod("payments", "")) },
		"manager: creates a pod bound to a node":           func() error { return manager.Create(ctx, pod("robotics", "gpu-0")) },
		"manager: patches another Lease of its namespace":  func() error { return manager.Patch(ctx, lease("allot-system", "someone-else"), mergePatch) },
		"manager: patches a Lease of kube-system":          func() error { return manager.Patch(ctx, lease("kube-system", "kube-scheduler"), mergePatch) },
		"manager: creates a Lease in kube-system":          func() error { return manager.Create(ctx, lease("kube-system", "allot-manager")) },
		"manager: deletes its leader Lease":                func() error { return manager.Delete(ctx, lease("allot-system", "allot-manager")) },
		"agent: reads a Secret":                            func() error { return get(agent, "allot-system", "allot-terraform-env", &corev1.Secret{}) },
		"agent: creates a pod":                             func() error { return agent.Create(ctx, pod("robotics", "")) },
		"agent: patches a Lease":                           func() error { return agent.Patch(ctx, lease("allot-system", "allot-manager"), mergePatch) },
		"agent: lists nodes":                               func() error { return agent.List(ctx, &corev1.NodeList{}) },
		"agent: deletes a node":                            func() error { return agent.Delete(ctx, node) },
		"agent: writes a Team": func() error {
			return agent.Create(ctx, &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "agents"},
				Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}}})
		},
	}
	for _, name := range sortedNames(can) {
		if err := can[name](); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range sortedNames(cannot) {
		// The admission policy takes a moment to be in force after it is
		// created.
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for err = cannot[name](); err == nil && time.Now().Before(deadline); err = cannot[name]() {
			time.Sleep(200 * time.Millisecond)
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want it forbidden", name, err)
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
