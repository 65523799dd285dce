package capacity

import (
	"context"
	"fmt"
	"strings"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/predicates"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// sourceRefIndex indexes CapacitySources by the Flux source they name, as
// <kind>/<namespace>/<name>.
const sourceRefIndex = ".spec.sourceRef"

// SetupWithManager registers the reconciler: it watches CapacitySources, and
// the Flux sources they name (those whose CRDs the cluster serves), so that a
// new artifact is applied at once rather than at the next interval.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.FieldManager == "" {
		r.FieldManager = DefaultFieldManager
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &allotv1.CapacitySource{}, sourceRefIndex, func(o client.Object) []string {
		if k := sourceRefKey(o.(*allotv1.CapacitySource)); k != "" {
			return []string{k}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing CapacitySources by spec.sourceRef: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&allotv1.CapacitySource{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}, approvalChanged))).
		Named("capacitysource").
		Watches(&allotv1.Pool{}, handler.EnqueueRequestsFromMapFunc(sourceOfPool), builder.WithPredicates(repairChanged))
	for _, kind := range FluxSourceKinds {
		gk := schema.GroupKind{Group: sourcev1.GroupVersion.Group, Kind: kind}
		if _, err := mgr.GetRESTMapper().RESTMapping(gk, sourcev1.GroupVersion.Version); err != nil {
			if meta.IsNoMatchError(err) {
				// No Flux here (or not this kind): a CapacitySource
				// naming one says so in its Ready condition.
				mgr.GetLogger().Info("not watching Flux sources of this kind: the cluster does not serve it", "kind", kind)
				continue
			}
			return fmt.Errorf("looking up %s: %w", gk, err)
		}
		obj, _ := NewFluxSource(kind)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.requestsFor(kind)), builder.WithPredicates(artifactChanged))
	}
	return b.Complete(r)
}

// sourceRefKey is the index key of the Flux source src names; "" for none.
func sourceRefKey(src *allotv1.CapacitySource) string {
	ref := src.Spec.SourceRef
	if ref == nil {
		return ""
	}
	ns := ref.Namespace
	if ns == "" {
		ns = src.Namespace
	}
	return ref.Kind + "/" + ns + "/" + ref.Name
}

// requestsFor maps a Flux source of kind to the CapacitySources naming it.
func (r *Reconciler) requestsFor(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list allotv1.CapacitySourceList
		key := kind + "/" + o.GetNamespace() + "/" + o.GetName()
		if err := r.Client.List(ctx, &list, client.MatchingFields{sourceRefIndex: key}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the CapacitySources of a Flux source", "source", key)
			return nil
		}
		reqs := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			reqs[i].NamespacedName = client.ObjectKeyFromObject(&list.Items[i])
		}
		return reqs
	}
}

// artifactChanged passes a Flux source whose artifact is new: another
// revision, or the same revision with another digest.
var artifactChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return artifactOf(e.Object) != nil },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := artifactOf(e.ObjectOld), artifactOf(e.ObjectNew)
		return after != nil && (before == nil || before.Revision != after.Revision || before.Digest != after.Digest || before.URL != after.URL)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func artifactOf(o client.Object) *fluxmeta.Artifact {
	if s, ok := o.(interface{ GetArtifact() *fluxmeta.Artifact }); ok {
		return s.GetArtifact()
	}
	return nil
}

// sourceOfPool maps a Pool to the CapacitySource that applied it (its
// labels).
func sourceOfPool(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[LabelSourceName] == "" || l[LabelSourceNamespace] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: l[LabelSourceNamespace], Name: l[LabelSourceName]}}}
}

// repairChanged passes a Pool whose repair or burst (fleet/elastic) changed
// what Terraform makes: the replacement or burst nodes held, or the retired
// nodes.
var repairChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld.(*allotv1.Pool), e.ObjectNew.(*allotv1.Pool)
		return repairKey(before.Status.Repair) != repairKey(after.Status.Repair) || burstNodes(before.Status.Burst) != burstNodes(after.Status.Burst)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// repairKey sums up what of a repair status Terraform reads.
func repairKey(s *allotv1.PoolRepairStatus) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d", s.ReplacementNodes)
	for _, n := range s.Nodes {
		if n.Retired {
			fmt.Fprintf(&b, " %s:%t", n.Name, n.Kept)
		}
	}
	return b.String()
}

func burstNodes(s *allotv1.PoolBurstStatus) int64 {
	if s == nil {
		return 0
	}
	return s.BurstNodes
}

// approvalChanged lets a new disruption approval or lock release start a
// reconcile at once.
var approvalChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		return before[AnnotationApproveDisruption] != after[AnnotationApproveDisruption] ||
			before[AnnotationForceUnlock] != after[AnnotationForceUnlock]
	},
}
