package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/api/contract"
)

// Labels and annotations allot sets on the objects it renders.
const (
	// LabelManagedBy marks every object allot renders and owns; server-side apply
	// and pruning select on it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByAllot is the value of LabelManagedBy.
	ManagedByAllot = "allot"
	// LabelTeam names the team a Namespace (or a Team) belongs to.
	LabelTeam = contract.LabelTeam
	// LabelCostCenter names the team's cost centre when it is a valid label value.
	LabelCostCenter = "allot.dev/cost-center"
	// LabelCohort names the cohort of a Team.
	LabelCohort = "allot.dev/cohort"
	// LabelTier names the tier a PriorityClass (or a Tier) stands for.
	LabelTier = contract.LabelTier
	// AnnotationCostCenter carries the cost centre verbatim, whatever its characters.
	AnnotationCostCenter = "allot.dev/cost-center"
	// AnnotationOwners carries the team's owners, comma-separated.
	AnnotationOwners = "allot.dev/owners"
	// AnnotationNamespaces lists, on a Team, the namespaces other than its own
	// that belong to it (comma-separated): their pods run on its quota.
	AnnotationNamespaces = "allot.dev/namespaces"
)

// Condition types the allot controllers set. Ready summarizes the others;
// Reconciling and Stalled are present only when True (kstatus). The domain
// conditions are positive polarity: True is the good state.
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
	// QuotaAppliedCondition: the Team's quota is in force in the scheduler.
	QuotaAppliedCondition = "QuotaApplied"
	// CapacityReadyCondition: the Pool has its target number of Ready nodes.
	CapacityReadyCondition = "CapacityReady"
	// PlanAppliedCondition: the Pool's Terraform plan for its target is applied.
	PlanAppliedCondition = "PlanApplied"
	// GPUHealthyCondition: every GPU of the Pool's nodes reports healthy.
	GPUHealthyCondition = "GPUHealthy"
	// StateUnlockedCondition: no stale Terraform state lock stands in the
	// CapacitySource's way. False names the lock that has been held longer
	// than the manager's --terraform-stale-lock-age, which only the
	// annotation allot.dev/force-unlock=<lock ID> releases. Present once such
	// a lock was seen.
	StateUnlockedCondition = "StateUnlocked"
	// ReachableCondition: the hub reached the worker Cluster's API server at
	// its last probe.
	ReachableCondition = "Reachable"
)

// CommonStatus is the part of every allot status the Flux runtime helpers read.
type CommonStatus struct {
	// ObservedGeneration is the last generation the controller reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions hold the latest observations of the object's state.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// LastHandledReconcileAt is the last value of the
	// reconcile.fluxcd.io/requestedAt annotation the controller handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// Decimal is an exact decimal number written as a string, e.g. "55.04" or
// "0.1": prices and fractions are never floats.
// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
// +kubebuilder:validation:MaxLength=40
type Decimal string
