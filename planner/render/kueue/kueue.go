package kueue

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/allot-dev/allot/api/contract"
	v1alpha1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/kube"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Objects are one cluster's Kueue objects (and the team namespaces the
// LocalQueues live in), each kind sorted by name.
type Objects struct {
	Cluster                 schema.ClusterName
	Namespaces              []corev1.Namespace
	Topologies              []Topology
	ResourceFlavors         []ResourceFlavor
	WorkloadPriorityClasses []WorkloadPriorityClass
	Cohorts                 []Cohort
	ClusterQueues           []ClusterQueue
	LocalQueues             []LocalQueue
}

// Manifest file names, in apply order: what the queues refer to first
// (namespaces, topologies, flavors, priority classes, cohorts), then the
// ClusterQueues (the quotas), then the LocalQueues that point at them.
const (
	NamespacesFile              = "10-namespaces.yaml"
	TopologiesFile              = "20-topologies.yaml"
	ResourceFlavorsFile         = "30-resourceflavors.yaml"
	WorkloadPriorityClassesFile = "40-workloadpriorityclasses.yaml"
	CohortsFile                 = "50-cohorts.yaml"
	ClusterQueuesFile           = "60-clusterqueues.yaml"
	LocalQueuesFile             = "70-localqueues.yaml"
)

// FileNames returns the name of every manifest file Manifests may write, in
// apply order.
func FileNames() []string {
	return []string{NamespacesFile, TopologiesFile, ResourceFlavorsFile, WorkloadPriorityClassesFile,
		CohortsFile, ClusterQueuesFile, LocalQueuesFile}
}

// Build returns the Kueue objects of every Kubernetes cluster of cfg (not
// those Slurm runs), in cluster name order; each team's quota is split among
// the clusters as plan places its flavors (planner.ForCluster), so a team's nominal quotas of a flavor over
// all clusters add up to its quota.
func Build(cfg *schema.Config, plan *planner.Plan) ([]*Objects, error) {
	k, err := kube.Build(cfg, plan) // checks the team namespaces and tier names
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.CohortNames() {
		if errs := validation.IsDNS1123Label(string(name)); len(errs) > 0 {
			return nil, fmt.Errorf("cohort %s: not a Kueue cohort name: %s", name, strings.Join(errs, "; "))
		}
	}
	for _, f := range cfg.Flavors() {
		if errs := validation.IsDNS1123Subdomain(string(f)); len(errs) > 0 {
			return nil, fmt.Errorf("flavor %s: not a ResourceFlavor name: %s", f, strings.Join(errs, "; "))
		}
	}
	var out []*Objects
	for _, cluster := range cfg.ClusterNames() {
		if cfg.Clusters[cluster].Scheduler == schema.SchedulerSlurm {
			continue
		}
		o := &Objects{Cluster: cluster, Namespaces: k.Namespaces}
		cc := planner.ForCluster(cfg, plan, cluster)
		flavors := clusterFlavors(cfg, cluster)
		for _, f := range flavors {
			rf, topo := flavor(cfg, cluster, f)
			o.ResourceFlavors = append(o.ResourceFlavors, rf)
			if topo != nil {
				o.Topologies = append(o.Topologies, *topo)
			}
		}
		for _, name := range cfg.TierNames() {
			o.WorkloadPriorityClasses = append(o.WorkloadPriorityClasses, priorityClass(cfg.Tiers[name]))
		}
		slices.SortFunc(o.WorkloadPriorityClasses, func(a, b WorkloadPriorityClass) int { return strings.Compare(a.Name, b.Name) })
		for _, name := range cfg.CohortNames() {
			c := cfg.Cohorts[name]
			o.Cohorts = append(o.Cohorts, Cohort{TypeMeta: typeMeta("Cohort"), ObjectMeta: meta(string(name), nil),
				Spec: CohortSpec{ParentName: string(c.Parent)}})
		}
		for _, name := range cfg.TeamNames() {
			cq, err := clusterQueue(cfg, cc.Teams[name], flavors)
			if err != nil {
				return nil, err
			}
			o.ClusterQueues = append(o.ClusterQueues, cq)
			for _, ns := range teamNamespaces(cfg.Teams[name]) {
				o.LocalQueues = append(o.LocalQueues, LocalQueue{
					TypeMeta:   typeMeta("LocalQueue"),
					ObjectMeta: meta(string(name), map[string]string{v1alpha1.LabelTeam: string(name)}),
					Spec:       LocalQueueSpec{ClusterQueue: string(name)},
				})
				o.LocalQueues[len(o.LocalQueues)-1].Namespace = ns
			}
		}
		slices.SortFunc(o.LocalQueues, func(a, b LocalQueue) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		out = append(out, o)
	}
	return out, nil
}

// Manifests returns the YAML manifests of o, keyed by file name; a kind
// without objects has no file.
func Manifests(o *Objects) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, f := range []struct {
		file string
		objs []any
	}{
		{NamespacesFile, anys(o.Namespaces)},
		{TopologiesFile, anys(o.Topologies)},
		{ResourceFlavorsFile, anys(o.ResourceFlavors)},
		{WorkloadPriorityClassesFile, anys(o.WorkloadPriorityClasses)},
		{CohortsFile, anys(o.Cohorts)},
		{ClusterQueuesFile, anys(o.ClusterQueues)},
		{LocalQueuesFile, anys(o.LocalQueues)},
	} {
		if len(f.objs) == 0 {
			continue
		}
		b, err := kube.YAMLDocuments(f.objs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
		out[f.file] = b
	}
	return out, nil
}

// Unstructured returns o's objects in apply order (what they refer to before
// them: namespaces, topologies, flavors, priority classes, cohorts, then the
// ClusterQueues and LocalQueues), as the API server reads them.
func (o *Objects) Unstructured() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, objs := range [][]any{
		anys(o.Namespaces), anys(o.Topologies), anys(o.ResourceFlavors), anys(o.WorkloadPriorityClasses),
		anys(o.Cohorts), anys(o.ClusterQueues), anys(o.LocalQueues),
	} {
		for _, obj := range objs {
			b, err := json.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("encoding %T: %w", obj, err)
			}
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(b, &u.Object); err != nil {
				return nil, fmt.Errorf("decoding %T: %w", obj, err)
			}
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
			out = append(out, u)
		}
	}
	return out, nil
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// clusterFlavors returns the flavors of the cluster's pools, sorted.
func clusterFlavors(cfg *schema.Config, cluster schema.ClusterName) []schema.Flavor {
	var out []schema.Flavor
	for _, name := range cfg.PoolNames() {
		if p := cfg.Pools[name]; p.Cluster == cluster && !slices.Contains(out, p.Flavor) {
			out = append(out, p.Flavor)
		}
	}
	slices.Sort(out)
	return out
}

// flavor is the ResourceFlavor of f in cluster: its nodes carry allot's flavor
// label (every pool's nodes do); Kueue adds the GPU taint's toleration to the
// pods it admits where the provider taints GPU nodes (allot's EKS node groups,
// GKE's GPU node pools). When the flavor's pools there share one topology, the
// flavor names its Topology (named after the flavor): the levels' node labels.
func flavor(cfg *schema.Config, cluster schema.ClusterName, f schema.Flavor) (ResourceFlavor, *Topology) {
	rf := ResourceFlavor{TypeMeta: typeMeta("ResourceFlavor"), ObjectMeta: meta(string(f), nil),
		Spec: ResourceFlavorSpec{NodeLabels: map[string]string{contract.LabelFlavor: string(f)}}}
	switch cfg.Clusters[cluster].Provider {
	case schema.ProviderEKS, schema.ProviderGKE:
		rf.Spec.Tolerations = []corev1.Toleration{{Key: terraform.GPUTaint.Key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule}}
	}
	levels, ok := sharedLevels(cfg, cluster, f)
	if !ok || len(levels) == 0 {
		return rf, nil
	}
	t := &Topology{TypeMeta: typeMeta("Topology"), ObjectMeta: meta(string(f), nil)}
	for _, l := range levels {
		t.Spec.Levels = append(t.Spec.Levels, TopologyLevel{NodeLabel: contract.TopologyLabel(l)})
	}
	rf.Spec.TopologyName = t.Name
	return rf, t
}

// sharedLevels returns the topology levels of f's pools in cluster, and false
// when they differ (one ResourceFlavor names one Topology).
func sharedLevels(cfg *schema.Config, cluster schema.ClusterName, f schema.Flavor) ([]string, bool) {
	var levels []string
	first := true
	for _, p := range cfg.PoolsOf(f) {
		if p.Cluster != cluster {
			continue
		}
		var l []string
		if p.Topology != nil {
			l = p.Topology.Levels
		}
		if first {
			levels, first = l, false
		} else if !slices.Equal(levels, l) {
			return nil, false
		}
	}
	return levels, true
}

func priorityClass(t *schema.Tier) WorkloadPriorityClass {
	desc := t.Description
	if desc == "" {
		desc = fmt.Sprintf("allot tier %s", t.Name)
	}
	return WorkloadPriorityClass{TypeMeta: typeMeta("WorkloadPriorityClass"),
		ObjectMeta: meta(string(t.Name), map[string]string{v1alpha1.LabelTier: string(t.Name)}),
		Value:      int32(t.Priority), Description: desc}
}

// clusterQueue is team t's quota in one cluster (t is its part, from
// planner.ForCluster): a flavor the team has quota of and the cluster has
// pools of, with its nominal quota and, in a cohort, its limits. Preemption
// follows allot's rules as far as Kueue can say them (see Findings): a team
// within its nominal reclaims what others borrow, whatever its tier (Any); a
// borrowing workload preempts nobody (Never); within the team a higher tier
// preempts lower ones only if every tier that can be preempted so is
// preemptible.
func clusterQueue(cfg *schema.Config, t *schema.Team, flavors []schema.Flavor) (ClusterQueue, error) {
	spec := ClusterQueueSpec{
		CohortName: string(t.Cohort),
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: teamNamespaces(t),
		}}},
		QueueingStrategy: BestEffortFIFO,
		Preemption: Preemption{ReclaimWithinCohort: PreemptNever, WithinClusterQueue: PreemptNever,
			BorrowWithinCohort: BorrowWithinCohort{Policy: PreemptNever}},
	}
	if t.Cohort != "" {
		spec.Preemption.ReclaimWithinCohort = PreemptAny
	}
	if withinTeam(cfg, t).lowerPriority {
		spec.Preemption.WithinClusterQueue = PreemptLowerPriority
	}
	if !t.Weight.IsZero() && t.Weight.Cmp(quantity.MustParse("1")) != 0 {
		w, err := resource.ParseQuantity(t.Weight.String())
		if err != nil {
			return ClusterQueue{}, fmt.Errorf("team %s: weight %s: %w", t.Name, t.Weight, err)
		}
		spec.FairSharing = &FairSharing{Weight: w}
	}
	group := ResourceGroup{CoveredResources: []corev1.ResourceName{ResourceGPU}}
	for _, f := range flavors {
		q, ok := t.Quota[f]
		if !ok {
			continue
		}
		rq := ResourceQuota{Name: ResourceGPU, NominalQuota: gpus(q.Nominal)}
		if t.Cohort != "" { // Kueue allows limits only in a cohort; alone, a team neither borrows nor lends
			if q.BorrowingLimit != nil {
				rq.BorrowingLimit = ptr(gpus(*q.BorrowingLimit))
			}
			if q.LendingLimit != nil {
				rq.LendingLimit = ptr(gpus(min(*q.LendingLimit, q.Nominal))) // one cannot lend more than one has
			}
		}
		group.Flavors = append(group.Flavors, FlavorQuotas{Name: string(f), Resources: []ResourceQuota{rq}})
	}
	if len(group.Flavors) > 0 {
		spec.ResourceGroups = []ResourceGroup{group}
	}
	return ClusterQueue{TypeMeta: typeMeta("ClusterQueue"),
		ObjectMeta: meta(string(t.Name), map[string]string{v1alpha1.LabelTeam: string(t.Name),
			v1alpha1.LabelCohort: string(t.Cohort)}),
		Spec: spec}, nil
}

// teamNamespaces returns the team's own namespace and its others, sorted.
func teamNamespaces(t *schema.Team) []string {
	ns := append([]string{string(t.Name)}, t.Namespaces...)
	slices.Sort(ns)
	return slices.Compact(ns)
}

func gpus(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }

func ptr[T any](v T) *T { return &v }

// meta names an object; every one carries app.kubernetes.io/managed-by: allot.
func meta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByAllot}
	for k, v := range labels {
		if v != "" && len(validation.IsValidLabelValue(v)) == 0 {
			l[k] = v
		}
	}
	return metav1.ObjectMeta{Name: name, Labels: l}
}
