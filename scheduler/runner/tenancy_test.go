package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// tenancy creates what a capacity repository renders for two teams: Team
// alpha, which may use the production tier only, with its namespace, and Team
// beta, which also owns the namespace "shared"; each with 8 GPUs of h100.
func (cl *cluster) tenancy() {
	cl.t.Helper()
	quota := []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}
	cl.create(&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: allotv1.TeamSpec{Tiers: []string{"production"}, Quota: quota}})
	cl.create(&allotv1.Team{
		ObjectMeta: metav1.ObjectMeta{Name: "beta", Annotations: map[string]string{allotv1.AnnotationNamespaces: "shared"}},
		Spec:       allotv1.TeamSpec{Quota: quota},
	})
	cl.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Labels: map[string]string{allotv1.LabelTeam: "alpha"}}})
	cl.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}})
}

// in runs f with the cluster's namespace set to ns.
func (cl *cluster) in(ns string, f func()) {
	old := cl.ns
	cl.ns = ns
	defer func() { cl.ns = old }()
	f()
}

// A pod's team is its namespace's: in a team's namespace a pod that names
// another team, or a tier its team may not use, is refused with a pending
// reason; one that names no team runs on the namespace's team; a namespace the
// capacity repository maps to a team is that team's.
func TestNamespaceBelongsToTeam(t *testing.T) {
	cl := tenants(t)
	cl.in("alpha", func() {
		cl.submit("stolen", podSpec{team: "beta", tier: "production", pods: 1, gpus: 8})
		cl.submit("research", podSpec{team: "alpha", tier: "research", pods: 1, gpus: 8})
		cl.waitPending("stolen", "names team beta (label allot.dev/team) but namespace alpha belongs to team alpha")
		cl.waitEvent("stolen", "Unschedulable", "namespace alpha belongs to team alpha")
		cl.waitPending("research", "asks for tier research, which team alpha may not use")
		cl.waitBound(cl.submit("own", podSpec{tier: "production", pods: 1, gpus: 8}))
	})
	cl.in("shared", func() {
		cl.waitBound(cl.submit("mapped", podSpec{pods: 1, gpus: 8}))
	})
	cl.in("alpha", func() {
		if p := cl.pods()["stolen"]; p.Spec.NodeName != "" {
			t.Errorf("pod stolen bound to %s on another team's quota", p.Spec.NodeName)
		}
	})
}

// applyYAML creates the objects of a manifest of config/ (typed by kind).
func (cl *cluster) applyYAML(path string) {
	cl.t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), path))
	if err != nil {
		cl.t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			cl.t.Fatalf("%s: %v", path, err)
		}
		var o client.Object
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			o = &admissionv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			o = &admissionv1.ValidatingAdmissionPolicyBinding{}
		case "ClusterRole":
			o = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			o = &rbacv1.ClusterRoleBinding{}
		default:
			cl.t.Fatalf("%s: unexpected kind %q", path, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), o); err != nil {
			cl.t.Fatalf("%s: %v", path, err)
		}
		cl.create(o)
	}
}

// The admission policy shipped in config/admission refuses, in a team's
// namespace, an allot pod that names another team or a tier the team may not
// use; it lets through the rest, and pods of other schedulers.
func TestAdmissionPolicyRefusesOtherTeams(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	cl.applyYAML("config/admission/tenancy.yaml")
	pod := func(name, scheduler string, labels map[string]string) *corev1.Pod {
		gpus := *resource.NewQuantity(8, resource.DecimalSI)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "alpha", Name: name, Labels: labels},
			Spec: corev1.PodSpec{SchedulerName: scheduler, Containers: []corev1.Container{{Name: "train", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus}}}}},
		}
	}
	ctx := context.Background()
	eventually(t, 20*time.Second, "the tenancy policy in force", func() error {
		err := cl.c.Create(ctx, pod("probe", contract.SchedulerName, map[string]string{contract.LabelTeam: "beta"}), client.DryRunAll)
		if err == nil {
			return errors.New("a pod of team beta admitted in namespace alpha")
		}
		return nil
	})
	for name, tc := range map[string]struct {
		scheduler string
		labels    map[string]string
		refused   string
		node      string // spec.nodeName at creation
	}{
		"another team":                {contract.SchedulerName, map[string]string{contract.LabelTeam: "beta"}, "names another team than the namespace's (alpha)", ""},
		"a tier the team may not use": {contract.SchedulerName, map[string]string{contract.LabelTier: "research"}, "team alpha may not use tier research (its tiers: production)", ""},
		"its own team and tier":       {contract.SchedulerName, map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production"}, "", ""},
		"no labels":                   {contract.SchedulerName, nil, "", ""},
		"another scheduler's pod":     {"default-scheduler", map[string]string{contract.LabelTeam: "beta"}, "", ""},
		// Bound at creation, it would run outside the team's quota.
		"bound at creation": {contract.SchedulerName, map[string]string{contract.LabelTeam: "alpha"},
			"spec.nodeName is set (n1): an allot pod is created unbound", "n1"},
	} {
		p := pod(strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), "'", ""), tc.scheduler, tc.labels)
		p.Spec.NodeName = tc.node
		err := cl.c.Create(ctx, p)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.refused != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: got %v, want refused (Forbidden) with %q", name, err, tc.refused)
		}
	}
	// A namespace no team owns is not the policy's business.
	cl.in("shared", func() {
		p := pod("elsewhere", contract.SchedulerName, map[string]string{contract.LabelTeam: "alpha"})
		p.Namespace = "shared"
		if err := cl.c.Create(ctx, p); err != nil {
			t.Errorf("pod in an unlabelled namespace refused: %v", err)
		}
	})
}
