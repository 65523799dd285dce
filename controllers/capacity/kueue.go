package capacity

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/schema"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=clusterqueues;localqueues;resourceflavors;cohorts;topologies;workloadpriorityclasses,verbs=get;list;watch;create;update;patch

// kueueObjects returns the Kueue objects of the cluster this manager runs in
// (the only one, when --cluster is not set).
func kueueObjects(cfg *schema.Config, plan *planner.Plan, cluster schema.ClusterName) (*rkueue.Objects, error) {
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

// withKueue adds Kueue's objects to the steps, in the same safe order: the
// flavors, topologies, priority classes and cohorts with the prerequisites,
// and each team's ClusterQueue (its quota) and LocalQueues right after its
// Team, in the step that lowers or raises that team's quota: a quota is
// never raised before the capacity behind it grows, nor the capacity shrunk
// before the quota is lowered. Kueue objects of removed teams are not pruned.
func withKueue(steps []Step, o *rkueue.Objects) ([]Step, error) {
	objs, err := o.Unstructured()
	if err != nil {
		return nil, err
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
	return steps, nil
}
