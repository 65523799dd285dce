package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/api/contract"
	v1alpha1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/schema"
)

var (
	namespaceType     = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	priorityClassType = metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"}
)

func allotType(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind}
}

// namespace is where a team's workloads run: it is named after the team. The cost
// centre is a label when it is a valid label value (so namespaces can be selected
// by it), and always an annotation, verbatim.
func namespace(t *schema.Team) corev1.Namespace {
	return corev1.Namespace{
		TypeMeta: namespaceType,
		ObjectMeta: meta(string(t.Name), map[string]string{
			v1alpha1.LabelTeam:       string(t.Name),
			v1alpha1.LabelCostCenter: t.CostCenter,
			v1alpha1.LabelCohort:     string(t.Cohort),
		}, map[string]string{
			v1alpha1.AnnotationCostCenter: t.CostCenter,
			v1alpha1.AnnotationOwners:     strings.Join(t.Owners, ","),
		}),
	}
}

// priorityClass is the tier's PriorityClass, named after the tier, with the
// tier's priority. A borrowOnly tier only ever runs on idle capacity that others
// may reclaim, so its pods never preempt (preemptionPolicy Never); every other
// tier may preempt lower ones (the default policy): allot's scheduler decides
// which victims its rules allow.
func priorityClass(t *schema.Tier) schedulingv1.PriorityClass {
	policy := corev1.PreemptLowerPriority
	if t.BorrowOnly {
		policy = corev1.PreemptNever
	}
	return schedulingv1.PriorityClass{
		TypeMeta:         priorityClassType,
		ObjectMeta:       meta(string(t.Name), map[string]string{v1alpha1.LabelTier: string(t.Name)}, nil),
		Value:            int32(t.Priority),
		PreemptionPolicy: &policy,
		Description:      tierDescription(t),
	}
}

func tierDescription(t *schema.Tier) string {
	if t.Description != "" {
		return t.Description
	}
	var traits []string
	if t.Preemptible {
		traits = append(traits, "preemptible")
	}
	if t.BorrowOnly {
		traits = append(traits, "borrow-only")
	}
	s := fmt.Sprintf("allot tier %s (priority %d", t.Name, t.Priority)
	if len(traits) > 0 {
		s += ", " + strings.Join(traits, ", ")
	}
	return s + ")"
}

func tier(t *schema.Tier) v1alpha1.Tier {
	return v1alpha1.Tier{
		TypeMeta:   allotType("Tier"),
		ObjectMeta: meta(string(t.Name), map[string]string{v1alpha1.LabelTier: string(t.Name)}, nil),
		Spec: v1alpha1.TierSpec{
			Priority:          int32(t.Priority),
			Preemptible:       t.Preemptible,
			BorrowOnly:        t.BorrowOnly,
			Description:       t.Description,
			PriorityClassName: string(t.Name),
		},
	}
}

func cohort(c *schema.Cohort) v1alpha1.Cohort {
	return v1alpha1.Cohort{
		TypeMeta:   allotType("Cohort"),
		ObjectMeta: meta(string(c.Name), nil, nil),
		Spec:       v1alpha1.CohortSpec{Parent: string(c.Parent)},
	}
}

func team(t *schema.Team) v1alpha1.Team {
	spec := v1alpha1.TeamSpec{
		CostCenter: t.CostCenter,
		Owners:     slices.Clone(t.Owners),
		Cohort:     string(t.Cohort),
		Weight:     v1alpha1.Decimal(t.Weight.String()),
		Quota:      []v1alpha1.FlavorQuota{}, // `quota: {}` is valid: an empty list, never null
	}
	for _, tier := range t.Tiers {
		spec.Tiers = append(spec.Tiers, string(tier))
	}
	for _, f := range slices.Sorted(maps.Keys(t.Quota)) {
		q := t.Quota[f]
		spec.Quota = append(spec.Quota, v1alpha1.FlavorQuota{
			Flavor:         string(f),
			Nominal:        q.Nominal,
			BorrowingLimit: clonePtr(q.BorrowingLimit),
			LendingLimit:   clonePtr(q.LendingLimit),
		})
	}
	if t.BudgetMonthlyUSD != nil {
		d := v1alpha1.Decimal(t.BudgetMonthlyUSD.String())
		spec.Budget = &v1alpha1.Budget{MonthlyUSD: &d}
	}
	return v1alpha1.Team{
		TypeMeta: allotType("Team"),
		ObjectMeta: meta(string(t.Name), map[string]string{
			v1alpha1.LabelTeam:       string(t.Name),
			v1alpha1.LabelCostCenter: t.CostCenter,
			v1alpha1.LabelCohort:     string(t.Cohort),
		}, map[string]string{
			v1alpha1.AnnotationNamespaces: strings.Join(slices.Sorted(slices.Values(t.Namespaces)), ","),
		}),
		Spec: spec,
	}
}

func pool(p *schema.Pool, provider schema.Provider, target int64) v1alpha1.Pool {
	spec := v1alpha1.PoolSpec{
		Cluster:     string(p.Cluster),
		Provider:    string(provider),
		Flavor:      string(p.Flavor),
		MachineType: p.MachineType,
		GPUsPerNode: p.GPUsPerNode,
		Nodes:       v1alpha1.NodeBounds{Min: p.MinNodes, Max: p.MaxNodes},
		NodesTarget: target,
		Price: v1alpha1.Price{
			OnDemandPerNodeHour: v1alpha1.Decimal(p.Price.OnDemandPerNodeHour.String()),
			CommittedNodes:      p.Price.CommittedNodes,
		},
		SpareNodes: p.SpareNodes,
	}
	if p.Price.HasCommittedPrice {
		d := v1alpha1.Decimal(p.Price.CommittedPerNodeHour.String())
		spec.Price.CommittedPerNodeHour = &d
	}
	if !p.Headroom.IsZero() {
		spec.Headroom = v1alpha1.Decimal(p.Headroom.String())
	}
	if r := p.Repair; r != nil {
		spec.Repair = &v1alpha1.PoolRepair{After: metav1.Duration{Duration: r.After}, MaxNodes: r.MaxNodes, Broken: string(r.Broken),
			Flaps: r.Flaps, FlapWindow: metav1.Duration{Duration: r.FlapWindow}}
	}
	if b := p.Burst; b != nil {
		spec.Burst = &v1alpha1.PoolBurst{MaxNodes: b.MaxNodes, IdleAfter: metav1.Duration{Duration: b.IdleAfter}}
	}
	if p.Topology != nil {
		spec.Topology = &v1alpha1.Topology{}
		for _, l := range p.Topology.Levels {
			level := v1alpha1.TopologyLevel{Name: l}
			if s := p.Topology.Sizes[l]; s > 0 {
				level.DomainSize = &s
			}
			spec.Topology.Levels = append(spec.Topology.Levels, level)
		}
	}
	return v1alpha1.Pool{
		TypeMeta: allotType("Pool"),
		ObjectMeta: meta(string(p.Name), map[string]string{
			contract.LabelPool:    string(p.Name),
			contract.LabelFlavor:  string(p.Flavor),
			contract.LabelCluster: string(p.Cluster),
		}, nil),
		Spec: spec,
	}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
