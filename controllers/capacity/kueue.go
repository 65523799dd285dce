package capacity

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	allotschema "github.com/allot-dev/allot/schema"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=clusterqueues;localqueues;resourceflavors;cohorts;topologies;workloadpriorityclasses,verbs=get;list;watch;create;update;patch;delete

// kueueObjects returns the Kueue objects of the cluster this manager runs in
// (the only one, when --cluster is not set).
func kueueObjects(cfg *allotschema.Config, plan *planner.Plan, cluster allotschema.ClusterName) (*rkueue.Objects, error) {
	all, err := rkueue.Build(cfg, plan)
	if err != nil {
		return nil, err
	}
	if cluster == "" {
		if len(all) != 1 {
			return nil, fmt.Errorf("with Kueue, a repository of %d clusters needs the manager's --cluster", len(all))
		}
		return all[0], nil
	}
	for _, o := range all {
		if o.Cluster == cluster {
			return o, nil
		}
	}
	return nil, fmt.Errorf("no cluster %s", cluster)
}

// kueueFindings are the rules of cfg Kueue only approximates: errors unless
// their tier, team or pool accepts them (approximate: true), or lenient.
func kueueFindings(cfg *allotschema.Config, lenient bool) allotschema.Findings {
	fs := rkueue.Findings(cfg)
	if lenient {
		return fs
	}
	return fs.Strict()
}

// withKueue adds Kueue's objects to the steps, in the same safe order: the
// flavors, topologies, priority classes and cohorts with the prerequisites,
// and each team's ClusterQueue (its quota) and LocalQueues right after its
// Team, in the step that lowers or raises that team's quota: a quota is
// never raised before the capacity behind it grows, nor the capacity shrunk
// before the quota is lowered. owner labels them as the source's. stale are the Kueue objects the source
// applied that the revision no longer declares: a removed team's queues are
// deleted with the lowered quotas (before any capacity shrinks), the other
// kinds last, with the rest of what is pruned.
func withKueue(steps []Step, o *rkueue.Objects, owner map[string]string, stale []client.Object) ([]Step, error) {
	objs, err := o.Unstructured()
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		// Marked with the source that owns them, as allot's own objects
		// are: a revision that no longer declares them prunes them.
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		maps.Copy(l, owner)
		u.SetLabels(l)
	}
	var pre []client.Object
	perTeam := map[string][]client.Object{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace": // the allot renderer's, already in the prerequisites
		case "ClusterQueue", "LocalQueue":
			team := u.GetLabels()[allotv1.LabelTeam]
			perTeam[team] = append(perTeam[team], u)
		default:
			pre = append(pre, u)
		}
	}
	if len(steps) == 0 || steps[0].Phase != PhasePrerequisites {
		steps = append([]Step{{Phase: PhasePrerequisites}}, steps...)
	}
	steps[0].Apply = append(steps[0].Apply, pre...)
	for i := range steps {
		var apply []client.Object
		for _, obj := range steps[i].Apply {
			apply = append(apply, obj)
			if t, ok := obj.(*allotv1.Team); ok {
				apply = append(apply, perTeam[t.Name]...)
			}
		}
		steps[i].Apply = apply
	}
	var queues, rest []client.Object
	for _, obj := range stale {
		switch obj.GetObjectKind().GroupVersionKind().Kind {
		case "ClusterQueue", "LocalQueue":
			queues = append(queues, obj)
		default:
			rest = append(rest, obj)
		}
	}
	if len(queues) > 0 {
		i := slices.IndexFunc(steps, func(s Step) bool { return s.Phase == PhaseLowerQuotas })
		if i < 0 {
			i = 1 // right after the prerequisites
			steps = slices.Insert(steps, i, Step{Phase: PhaseLowerQuotas})
		}
		steps[i].Delete = append(steps[i].Delete, queues...)
	}
	if len(rest) > 0 {
		if steps[len(steps)-1].Phase != PhasePrune {
			steps = append(steps, Step{Phase: PhasePrune})
		}
		steps[len(steps)-1].Delete = append(steps[len(steps)-1].Delete, rest...)
	}
	return steps, nil
}

// kueueKinds are the kinds of Kueue objects a CapacitySource applies.
var kueueKinds = []string{"ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort", "Topology", "WorkloadPriorityClass"}

// staleKueue lists the Kueue objects src applied (its ownership labels) that
// o no longer has, in a stable order.
func (r *Reconciler) staleKueue(ctx context.Context, src *allotv1.CapacitySource, o *rkueue.Objects) ([]client.Object, error) {
	objs, err := o.Unstructured()
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, u := range objs {
		want[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = true
	}
	var stale []client.Object
	for _, kind := range kueueKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: kind + "List"})
		if err := r.reader().List(ctx, list, client.MatchingLabels{LabelSourceName: src.Name, LabelSourceNamespace: src.Namespace}); err != nil {
			if meta.IsNoMatchError(err) {
				continue // Kueue's CRDs are not installed: nothing of it to prune
			}
			return nil, fmt.Errorf("listing the %ss the source applied: %w", kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if !want[kind+"/"+u.GetNamespace()+"/"+u.GetName()] {
				stale = append(stale, u)
			}
		}
	}
	return stale, nil
}
