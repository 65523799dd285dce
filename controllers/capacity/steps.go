package capacity

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner/render/kube"
)

// State is what a source owns in the cluster now: its objects by kind and name.
type State struct {
	Namespaces      map[string]*corev1.Namespace
	PriorityClasses map[string]*schedulingv1.PriorityClass
	Cohorts         map[string]*allotv1.Cohort
	Tiers           map[string]*allotv1.Tier
	Pools           map[string]*allotv1.Pool
	Teams           map[string]*allotv1.Team
}

// TargetChange is a Pool whose node target changes.
type TargetChange struct {
	// Pool is the desired object (for a pool being removed: the current one with
	// a target of 0).
	Pool *allotv1.Pool
	// From and To are the node targets before and after.
	From, To int64
}

// Phase names a step of the apply order.
type Phase string

// The phases, in the order they run.
const (
	PhasePrerequisites Phase = "prerequisites" // namespaces, priority classes, cohorts, tiers
	PhaseLowerQuotas   Phase = "lower-quotas"  // teams whose quotas only go down; removed teams
	PhaseGrowCapacity  Phase = "grow-capacity" // pools that grow or are new
	PhaseRaiseQuotas   Phase = "raise-quotas"  // every other team
	PhaseShrink        Phase = "shrink-capacity"
	PhasePrune         Phase = "prune" // what no team or pool needs any more
)

// Step is one phase: objects to apply and delete, and pool size changes that
// must be made real (by a Capacity) in it.
type Step struct {
	Phase  Phase
	Apply  []client.Object
	Delete []client.Object
	// Resize are the pools of this step whose node target changes.
	Resize []TargetChange
}

// Steps orders the change from cur to want so that no quota is ever raised
// before the capacity behind it exists, and no capacity shrinks while a quota
// still counts on it: lower quotas, grow capacity, raise quotas, shrink
// capacity, then prune. prune false keeps what want no longer declares. Steps
// is pure; steps with nothing to do are left out.
func Steps(cur State, want *kube.Objects, prune bool) []Step {
	var steps []Step
	add := func(s Step) {
		if len(s.Apply)+len(s.Delete)+len(s.Resize) > 0 {
			steps = append(steps, s)
		}
	}

	pre := Step{Phase: PhasePrerequisites}
	pre.Apply = append(pre.Apply, ptrs(want.Namespaces)...)
	pre.Apply = append(pre.Apply, ptrs(want.PriorityClasses)...)
	pre.Apply = append(pre.Apply, ptrs(want.Cohorts)...)
	pre.Apply = append(pre.Apply, ptrs(want.Tiers)...)
	add(pre)

	lower, raise := Step{Phase: PhaseLowerQuotas}, Step{Phase: PhaseRaiseQuotas}
	for i := range want.Teams {
		t := &want.Teams[i]
		if old, ok := cur.Teams[t.Name]; ok && onlyLowers(old.Spec.Quota, t.Spec.Quota) {
			lower.Apply = append(lower.Apply, t)
		} else {
			raise.Apply = append(raise.Apply, t)
		}
	}
	if prune {
		lower.Delete = missing(cur.Teams, want.Teams)
	}

	grow, shrink := Step{Phase: PhaseGrowCapacity}, Step{Phase: PhaseShrink}
	for i := range want.Pools {
		p := &want.Pools[i]
		old, ok := cur.Pools[p.Name]
		switch {
		case !ok:
			grow.Apply = append(grow.Apply, p)
			grow.Resize = append(grow.Resize, TargetChange{Pool: p, To: p.Spec.NodesTarget})
		case p.Spec.NodesTarget > old.Spec.NodesTarget:
			grow.Apply = append(grow.Apply, p)
			grow.Resize = append(grow.Resize, TargetChange{Pool: p, From: old.Spec.NodesTarget, To: p.Spec.NodesTarget})
		case p.Spec.NodesTarget < old.Spec.NodesTarget:
			shrink.Apply = append(shrink.Apply, p)
			shrink.Resize = append(shrink.Resize, TargetChange{Pool: p, From: old.Spec.NodesTarget, To: p.Spec.NodesTarget})
		default:
			shrink.Apply = append(shrink.Apply, p)
		}
	}
	if prune {
		for _, name := range sortedKeys(cur.Pools) {
			if !slices.ContainsFunc(want.Pools, func(p allotv1.Pool) bool { return p.Name == name }) {
				old := cur.Pools[name]
				shrink.Delete = append(shrink.Delete, old)
				shrink.Resize = append(shrink.Resize, TargetChange{Pool: old, From: old.Spec.NodesTarget, To: 0})
			}
		}
	}
	add(lower)
	add(grow)
	add(raise)
	add(shrink)

	if prune {
		p := Step{Phase: PhasePrune}
		p.Delete = append(p.Delete, missing(cur.Tiers, want.Tiers)...)
		p.Delete = append(p.Delete, missing(cur.Cohorts, want.Cohorts)...)
		p.Delete = append(p.Delete, missing(cur.PriorityClasses, want.PriorityClasses)...)
		p.Delete = append(p.Delete, missing(cur.Namespaces, want.Namespaces)...)
		add(p)
	}
	return steps
}

// onlyLowers reports whether going from old to new lowers some quota and raises
// none (a flavor that disappears is lowered to 0; a limit that is removed is
// raised to unlimited).
func onlyLowers(old, new []allotv1.FlavorQuota) bool {
	lowered := false
	for _, n := range new {
		i := slices.IndexFunc(old, func(o allotv1.FlavorQuota) bool { return o.Flavor == n.Flavor })
		if i < 0 {
			return false
		}
		o := old[i]
		if n.Nominal > o.Nominal || limitRaised(o.BorrowingLimit, n.BorrowingLimit) || limitRaised(o.LendingLimit, n.LendingLimit) {
			return false
		}
		if n.Nominal < o.Nominal || limitLowered(o.BorrowingLimit, n.BorrowingLimit) || limitLowered(o.LendingLimit, n.LendingLimit) {
			lowered = true
		}
	}
	for _, o := range old {
		if !slices.ContainsFunc(new, func(n allotv1.FlavorQuota) bool { return n.Flavor == o.Flavor }) {
			lowered = true
		}
	}
	return lowered
}

// limitRaised reports whether a limit goes up (nil is unlimited).
func limitRaised(old, new *int64) bool {
	return old != nil && (new == nil || *new > *old)
}

func limitLowered(old, new *int64) bool { return limitRaised(new, old) }

// missing returns the objects of cur, by name, that want does not declare.
func missing[T any, P interface {
	*T
	client.Object
}](cur map[string]P, want []T) []client.Object {
	var out []client.Object
	for _, name := range sortedKeys(cur) {
		if !slices.ContainsFunc(want, func(t T) bool { return P(&t).GetName() == name }) {
			out = append(out, cur[name])
		}
	}
	return out
}

func ptrs[T any, P interface {
	*T
	client.Object
}](s []T) []client.Object {
	out := make([]client.Object, len(s))
	for i := range s {
		out[i] = P(&s[i])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
