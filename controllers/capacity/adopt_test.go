package capacity_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
)

// adoptRepo declares tiers adopt-prod and adopt-batch and the given teams, with
// no GPUs (an empty kwok pool): only Namespaces, PriorityClasses and allot's
// objects are at stake.
func adoptRepo(teams ...string) string {
	s := `package capacity

clusters: "adopt-lab": {provider: "kwok"}
pools: "adopt-pool": {cluster: "adopt-lab", flavor: "adopt-gpu", gpusPerNode: 8, nodes: {min: 0, max: 1}, price: {onDemandPerNodeHour: 1}}
tiers: {
	"adopt-prod": {priority: 500}
	"adopt-batch": {priority: 100, preemptible: true}
}
`
	for i, t := range teams {
		s += fmt.Sprintf("teams: %q: {costCenter: \"CC-%d\", quota: \"adopt-gpu\": {nominal: 0}}\n", t, i)
	}
	return s
}

func findingsOf(s *allotv1.CapacitySource, rule string) []string {
	var out []string
	for _, f := range s.Status.Findings {
		if f.Rule == rule {
			out = append(out, f.Message)
		}
	}
	return out
}

func mine(o client.Object) bool { return o.GetLabels()[capacity.LabelSourceName] == "adopt" }

// TestAdoptingAnExistingCluster: allot leaves alone the Namespaces and
// PriorityClasses it did not create unless they are annotated for adoption,
// never prunes a Namespace that holds anything but allot's objects, and keeps
// what is annotated allot.dev/prune=disabled.
func TestAdoptingAnExistingCluster(t *testing.T) {
	ctx := context.Background()
	// Gone when the test ends, the source first (nothing applies after it).
	made := []client.Object{&allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: "adopt-src", Name: "adopt"}}}
	for _, n := range []string{"adopt-a", "adopt-b", "adopt-c", "adopt-d", "adopt-e"} {
		made = append(made, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, &allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	for _, n := range []string{"adopt-prod", "adopt-batch"} {
		made = append(made, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	deleteAtCleanup(t, made...)
	// What the cluster had before allot: namespaces adopt-a (in use, not
	// annotated) and adopt-b (annotated for adoption), PriorityClass adopt-prod.
	for name, ann := range map[string]map[string]string{"adopt-a": nil, "adopt-b": {capacity.AnnotationAdopt: "true"}} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann, Labels: map[string]string{"owner": "platform"}}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "adopt-prod"}, Value: 500, Description: "the platform team's"}
	if err := env.Client.Create(ctx, pc); err != nil {
		t.Fatal(err)
	}

	repo := newGitRepo(t)
	repo.write("fleet/capacity.cue", adoptRepo("adopt-a", "adopt-b", "adopt-c", "adopt-d", "adopt-e"))
	head := repo.commit("teams")
	newNamespace(t, "adopt-src")
	key := types.NamespacedName{Namespace: "adopt-src", Name: "adopt"}
	src := &allotv1.CapacitySource{}
	src.Namespace, src.Name = key.Namespace, key.Name
	src.Spec.URL, src.Spec.Path = "file://"+repo.dir, "fleet"
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	get := func(obj client.Object, name string) client.Object {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}

	t.Run("existing objects are left alone unless annotated", func(t *testing.T) {
		s := waitRevision(t, key, head, true)
		if ns := get(&corev1.Namespace{}, "adopt-a"); mine(ns) {
			t.Errorf("namespace adopt-a, not annotated, was taken over: labels %v", ns.GetLabels())
		}
		if ns := get(&corev1.Namespace{}, "adopt-b"); !mine(ns) || ns.GetLabels()["owner"] != "platform" {
			t.Errorf("namespace adopt-b, annotated, labels %v: want allot's beside the owner's", ns.GetLabels())
		}
		if pc := get(&schedulingv1.PriorityClass{}, "adopt-prod").(*schedulingv1.PriorityClass); mine(pc) || pc.Description != "the platform team's" {
			t.Errorf("PriorityClass adopt-prod was taken over: labels %v, description %q", pc.Labels, pc.Description)
		}
		if pc := get(&schedulingv1.PriorityClass{}, "adopt-batch"); !mine(pc) {
			t.Errorf("PriorityClass adopt-batch, new, not allot's: labels %v", pc.GetLabels())
		}
		got := findingsOf(s, "not-adopted")
		for _, want := range []string{"Namespace adopt-a", "PriorityClass adopt-prod"} {
			if !slices.ContainsFunc(got, func(m string) bool {
				return strings.HasPrefix(m, want+" exists and was not created by allot") && strings.Contains(m, "kubectl annotate "+strings.ToLower(strings.Fields(want)[0])+" "+strings.Fields(want)[1]+" allot.dev/adopt=true")
			}) {
				t.Errorf("not-adopted findings %q: want one for %s saying how to adopt it", got, want)
			}
		}
		if len(got) != 2 {
			t.Errorf("not-adopted findings %q, want 2", got)
		}
		if slices.Contains(s.Status.Inventory, "Namespace/adopt-a") || !slices.Contains(s.Status.Inventory, "Namespace/adopt-b") {
			t.Errorf("inventory %v: want adopt-b and not adopt-a", s.Status.Inventory)
		}
	})

	t.Run("annotated later, adopted", func(t *testing.T) {
		ns := get(&corev1.Namespace{}, "adopt-a")
		patch := client.MergeFrom(ns.DeepCopyObject().(client.Object))
		ns.SetAnnotations(map[string]string{capacity.AnnotationAdopt: "true"})
		if err := env.Client.Patch(ctx, ns, patch); err != nil {
			t.Fatal(err)
		}
		waitRevision(t, key, repo.commit("again"), true)
		eventually(t, 20*time.Second, "adopt-a adopted", func() error {
			if ns := get(&corev1.Namespace{}, "adopt-a"); !mine(ns) {
				return fmt.Errorf("labels %v", ns.GetLabels())
			}
			return nil
		})
	})

	t.Run("prune keeps what is in use or opted out", func(t *testing.T) {
		// adopt-b holds a ConfigMap (no pod), adopt-c only what Kubernetes puts
		// everywhere, adopt-d opts out of pruning, adopt-e is empty.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "adopt-b", Name: "data"}}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "adopt-c", Name: "default"}}
		for _, o := range []client.Object{cm, sa} {
			if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
		ns := get(&corev1.Namespace{}, "adopt-d")
		patch := client.MergeFrom(ns.DeepCopyObject().(client.Object))
		ns.SetAnnotations(map[string]string{capacity.AnnotationPrune: "disabled"})
		if err := env.Client.Patch(ctx, ns, patch); err != nil {
			t.Fatal(err)
		}
		repo.write("fleet/capacity.cue", adoptRepo("adopt-a"))
		s := waitRevision(t, key, repo.commit("only adopt-a"), true)
		for _, name := range []string{"adopt-b", "adopt-d"} {
			var ns corev1.Namespace
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil || ns.DeletionTimestamp != nil {
				t.Errorf("namespace %s: err=%v deleting=%v, want kept", name, err, ns.DeletionTimestamp)
			}
		}
		for _, name := range []string{"adopt-c", "adopt-e"} {
			eventually(t, 20*time.Second, "namespace "+name+" pruned", func() error {
				var ns corev1.Namespace
				err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &ns)
				if apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp != nil {
					return nil
				}
				return fmt.Errorf("still there: %v", err)
			})
		}
		if got := findingsOf(s, "namespace-kept"); len(got) != 1 || !strings.Contains(got[0], "namespace adopt-b") || !strings.Contains(got[0], "ConfigMap data") {
			t.Errorf("namespace-kept findings %q: want one naming adopt-b's ConfigMap data", got)
		}
		if got := findingsOf(s, "prune-skipped"); len(got) != 1 || !strings.Contains(got[0], "Namespace adopt-d") || !strings.Contains(got[0], "allot.dev/prune=disabled") {
			t.Errorf("prune-skipped findings %q: want one for adopt-d", got)
		}
		// The Teams go whatever their namespaces do.
		for _, name := range []string{"adopt-b", "adopt-c", "adopt-d", "adopt-e"} {
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &allotv1.Team{}); !apierrors.IsNotFound(err) {
				t.Errorf("Team %s: err = %v, want NotFound (pruned)", name, err)
			}
		}
	})
}
