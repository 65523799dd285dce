package capacity

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner/render/kube"
	allotschema "github.com/allot-dev/allot/schema"
)

// Adopting an existing cluster: team names become Namespaces and tiers become
// PriorityClasses, which a cluster may already have. allot takes over only what
// it created, or what a person marked for it.
const (
	// AnnotationAdopt ("true") on an existing Namespace or PriorityClass lets a
	// CapacitySource that declares it take it over. Without it, an object of that
	// name that this source did not create is left alone (finding "not-adopted").
	AnnotationAdopt = "allot.dev/adopt"
	// AnnotationPrune ("disabled") on any object allot applied keeps it when the
	// revision no longer declares it (finding "prune-skipped"). allot stops
	// managing it; Pools are sized by Terraform and are not covered.
	AnnotationPrune = "allot.dev/prune"
	// AnnotationFluxPrune is Flux's own opt-out, honoured as AnnotationPrune:
	// kustomize.toolkit.fluxcd.io/prune: disabled.
	AnnotationFluxPrune = "kustomize.toolkit.fluxcd.io/prune"
)

// pruneDisabled are the annotations (or labels) that keep an object from
// being pruned.
var pruneDisabled = map[string]string{AnnotationPrune: "disabled", AnnotationFluxPrune: "disabled"}

// Secrets are left out on purpose: the manager reads no Secret but its own
// (docs/security.md), so a Namespace no longer declared is kept unless the
// platform team grants it list on Secrets there (see keepOnPrune).
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;configmaps;services;serviceaccounts,verbs=list
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=list

// adopt drops from objs the Namespaces and PriorityClasses that exist in the
// cluster, are not the source's (cur) and are not annotated for adoption, and
// returns a finding per object left alone.
func (r *Reconciler) adopt(ctx context.Context, cur State, objs *kube.Objects) ([]allotv1.Finding, error) {
	var out []allotv1.Finding
	var err error
	objs.Namespaces, err = keepAdoptable(ctx, r.reader(), cur.Namespaces, objs.Namespaces, &out)
	if err != nil {
		return nil, err
	}
	objs.PriorityClasses, err = keepAdoptable(ctx, r.reader(), cur.PriorityClasses, objs.PriorityClasses, &out)
	return out, err
}

func keepAdoptable[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Reader, mine map[string]P, want []T, out *[]allotv1.Finding) ([]T, error) {
	kept := want[:0]
	for _, w := range want {
		name := P(&w).GetName()
		if _, ok := mine[name]; ok {
			kept = append(kept, w)
			continue
		}
		existing := P(new(T))
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, existing); {
		case apierrors.IsNotFound(err):
			kept = append(kept, w)
			continue
		case err != nil:
			return nil, fmt.Errorf("checking whether %s %s exists: %w", kindOf(existing), name, err)
		}
		kind := kindOf(existing)
		if src := existing.GetLabels()[LabelSourceName]; src != "" {
			*out = append(*out, allotv1.Finding{Severity: string(allotschema.SeverityWarning), Rule: "not-adopted",
				Message: fmt.Sprintf("%s %s belongs to CapacitySource %s/%s: left alone; declare it in one source only",
					kind, name, existing.GetLabels()[LabelSourceNamespace], src)})
			continue
		}
		if existing.GetAnnotations()[AnnotationAdopt] == "true" {
			kept = append(kept, w)
			continue
		}
		*out = append(*out, allotv1.Finding{Severity: string(allotschema.SeverityWarning), Rule: "not-adopted",
			Message: fmt.Sprintf("%s %s exists and was not created by allot: left alone; to let allot manage it, run kubectl annotate %s %s %s=true",
				kind, name, strings.ToLower(kind), name, AnnotationAdopt)})
	}
	return kept, nil
}

// reader is where the prune checks read: uncached when the manager gave one.
func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// namespaceContents are the kinds whose objects keep a Namespace from being
// pruned. Anything labelled as the source's is allot's and does not count,
// nor do what Kubernetes puts in every Namespace (the default ServiceAccount,
// the kube-root-ca.crt ConfigMap).
var namespaceContents = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "batch", Version: "v1", Kind: "CronJob"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
}

// builtIn is what Kubernetes creates in every Namespace.
var builtIn = map[string][]string{"ServiceAccount": {"default"}, "ConfigMap": {"kube-root-ca.crt"}}

// keepOnPrune says why obj, which the revision no longer declares, must not be
// deleted (nil when it may be): it opts out of pruning ("prune-skipped"), or it
// is a Namespace holding something allot did not put there or whose contents
// allot may not list ("namespace-kept").
func (r *Reconciler) keepOnPrune(ctx context.Context, src *allotv1.CapacitySource, obj client.Object) (*allotv1.Finding, error) {
	kept := func(rule, format string, args ...any) (*allotv1.Finding, error) {
		return &allotv1.Finding{Severity: string(allotschema.SeverityWarning), Rule: rule, Message: fmt.Sprintf(format, args...)}, nil
	}
	if _, pool := obj.(*allotv1.Pool); !pool {
		for k, v := range pruneDisabled {
			if obj.GetAnnotations()[k] == v {
				return kept("prune-skipped", "%s %s is no longer declared but has %s=disabled: kept, and no longer managed", kindOf(obj), obj.GetName(), k)
			}
		}
	}
	if _, ok := obj.(*corev1.Namespace); !ok {
		return nil, nil
	}
	for _, gvk := range namespaceContents {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := r.reader().List(ctx, &l, client.InNamespace(obj.GetName()))
		if meta.IsNoMatchError(err) { // not served here: none of them
			continue
		}
		if apierrors.IsForbidden(err) {
			return kept("namespace-kept", "namespace %s is no longer declared, but allot may not list its %ss to see whether it is empty: it is kept", obj.GetName(), gvk.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %ss of namespace %s: %w", gvk.Kind, obj.GetName(), err)
		}
		for _, o := range l.Items {
			if slices.Contains(builtIn[gvk.Kind], o.Name) || o.Labels[LabelSourceName] == src.Name && o.Labels[LabelSourceNamespace] == src.Namespace {
				continue
			}
			return kept("namespace-kept", "namespace %s is no longer declared but still holds %s %s: it is kept until that is gone", obj.GetName(), gvk.Kind, o.Name)
		}
	}
	return nil, nil
}
