package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// as is a client that acts as user, with the pod rights of a team's
// developer in namespace ns (a Role of its own, as a cluster's admin grants),
// once the API server authorizes by them: its authorizer learns roles from
// a cache, after they are created.
func (cl *cluster) as(user, ns string) client.Client {
	cl.t.Helper()
	name := strings.NewReplacer(":", "-").Replace(user)
	cl.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}})
	cl.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	cfg := rest.CopyConfig(cl.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: cl.env.Scheme})
	if err != nil {
		cl.t.Fatal(err)
	}
	eventually(cl.t, 20*time.Second, user+"'s role in force", func() error {
		return c.List(context.Background(), &corev1.PodList{}, client.InNamespace(ns))
	})
	return c
}

// The admission policy of config/admission/accounting.yaml keeps what allot
// accounts a pod by as the pod was created: a tenant may not change, add or
// remove any allot.dev (or subdomain) label or annotation of an allot pod, in
// any namespace, nor create one carrying what only allot writes (what it was
// bound as, the hub's annotations); other labels stay the tenant's, and
// allot's own identity may. The scheduler's bind, which writes what the pod
// was bound as, goes through.
func TestAdmissionPolicyKeepsAccounting(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	cl.pool("a", "h100", 1, 8, 1)
	cl.applyYAML("config/admission/tenancy.yaml")
	cl.applyYAML("config/admission/accounting.yaml")
	ctx := context.Background()
	tenant := cl.as("alice", "alpha")
	pod := func(name string, labels, annotations map[string]string) *corev1.Pod {
		gpus := *resource.NewQuantity(4, resource.DecimalSI)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "alpha", Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{Name: "train", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus}}}}},
		}
	}
	labels := map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production", contract.LabelGang: "g",
		contract.LabelGangSize: "1", contract.LabelRequire: "rack", "app": "trainer"}
	if err := tenant.Create(ctx, pod("run", labels, nil)); err != nil {
		t.Fatal(err)
	}
	update := func(c client.Client, f func(*corev1.Pod), opts ...client.UpdateOption) error {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "alpha", Name: "run"}, &p); err != nil {
			return err
		}
		f(&p)
		return c.Update(ctx, &p, opts...)
	}
	eventually(t, 20*time.Second, "the accounting policy in force", func() error {
		if err := update(tenant, func(p *corev1.Pod) { p.Labels[contract.LabelTeam] = "beta" }, client.DryRunAll); err == nil {
			return errors.New("the tenant relabelled its pod's team")
		}
		return nil
	})

	for name, tc := range map[string]struct {
		f    func(*corev1.Pod)
		want string
	}{
		"team changed":        {func(p *corev1.Pod) { p.Labels[contract.LabelTeam] = "beta" }, contract.LabelTeam},
		"team removed":        {func(p *corev1.Pod) { delete(p.Labels, contract.LabelTeam) }, contract.LabelTeam},
		"tier raised":         {func(p *corev1.Pod) { p.Labels[contract.LabelTier] = "research" }, contract.LabelTier},
		"gang left":           {func(p *corev1.Pod) { delete(p.Labels, contract.LabelGang) }, contract.LabelGang},
		"gang size changed":   {func(p *corev1.Pod) { p.Labels[contract.LabelGangSize] = "8" }, contract.LabelGangSize},
		"flavor added":        {func(p *corev1.Pod) { p.Labels[contract.LabelFlavor] = "a100" }, contract.LabelFlavor},
		"cluster added":       {func(p *corev1.Pod) { p.Labels[contract.LabelCluster] = "mars" }, contract.LabelCluster},
		"placement changed":   {func(p *corev1.Pod) { p.Labels[contract.LabelRequire] = "host" }, contract.LabelRequire},
		"a subdomain's label": {func(p *corev1.Pod) { p.Labels["hub.allot.dev/job"] = "x" }, "hub.allot.dev/job"},
		"bound-as written":    {func(p *corev1.Pod) { p.Annotations = map[string]string{contract.AnnotationBoundAs: `{}`} }, contract.AnnotationBoundAs},
		"a hub annotation": {func(p *corev1.Pod) {
			p.Annotations = map[string]string{"hub.allot.dev/fence-until": "2099-01-01T00:00:00Z"}
		}, "hub.allot.dev/fence-until"},
		"labels of both kinds": {func(p *corev1.Pod) { p.Labels[contract.LabelTeam], p.Labels["app"] = "beta", "x" }, contract.LabelTeam},
	} {
		err := update(tenant, tc.f)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want refused (Forbidden) naming %s", name, err, tc.want)
		}
	}
	if err := update(tenant, func(p *corev1.Pod) { p.Labels["app"] = "evaluator" }); err != nil {
		t.Errorf("a label of the tenant's own refused: %v", err)
	}
	for key, v := range map[string]string{contract.AnnotationBoundAs: `{"gang":"alpha/pod/x","team":"beta","tier":"production","pods":1}`, "hub.allot.dev/placement": "x"} {
		err := tenant.Create(ctx, pod("forged", map[string]string{contract.LabelTeam: "alpha"}, map[string]string{key: v}))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), key) {
			t.Errorf("a pod created with annotation %s: got %v, want refused", key, err)
		}
	}

	// The scheduler binds it, writing what it was bound as.
	cl.start(schedOptions{})
	cl.in("alpha", func() { cl.waitBound([]string{"run"}) })
	var p corev1.Pod
	if err := cl.c.Get(ctx, client.ObjectKey{Namespace: "alpha", Name: "run"}, &p); err != nil {
		t.Fatal(err)
	}
	var as map[string]any
	if err := json.Unmarshal([]byte(p.Annotations[contract.AnnotationBoundAs]), &as); err != nil ||
		as["gang"] != "alpha/gang/g" || as["team"] != "alpha" || as["tier"] != "production" || as["pods"] != float64(1) {
		t.Errorf("bound as %q (%v)", p.Annotations[contract.AnnotationBoundAs], err)
	}
	if err := update(tenant, func(p *corev1.Pod) { delete(p.Annotations, contract.AnnotationBoundAs) }); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant removed what its pod was bound as: %v", err)
	}

	// allot's identity (ClusterRole allot-pod-accounting) may.
	manager := cl.as("system:serviceaccount:allot-system:allot-manager", "alpha")
	if err := update(manager, func(p *corev1.Pod) { p.Labels[contract.LabelRequire] = "host" }); err != nil {
		t.Errorf("allot's identity refused: %v", err)
	}
}
