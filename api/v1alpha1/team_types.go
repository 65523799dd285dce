package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TeamSpec is a team's quota, as declared in teams/<team>.cue.
type TeamSpec struct {
	// CostCenter is the finance code the team's cost is charged to.
	// +optional
	CostCenter string `json:"costCenter,omitempty"`

	// Owners approve changes to the team's quota, e.g. "@robotics-leads".
	// +optional
	// +listType=atomic
	Owners []string `json:"owners,omitempty"`

	// Cohort names the Cohort the team borrows from and lends to; a team without
	// one borrows and lends nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Cohort string `json:"cohort,omitempty"`

	// Tiers the team may use; empty means every tier.
	// +optional
	// +listType=set
	Tiers []string `json:"tiers,omitempty"`

	// Quota holds the team's GPUs per flavor, fleet-wide, sorted by flavor
	// (empty for a team declared without quota: it can run nothing yet).
	// +listType=map
	// +listMapKey=flavor
	Quota []FlavorQuota `json:"quota"`

	// Budget caps the team's monthly cost.
	// +optional
	Budget *Budget `json:"budget,omitempty"`

	// Weight scales the team's fair share against other teams (default 1).
	// +optional
	// +kubebuilder:default="1"
	Weight Decimal `json:"weight,omitempty"`
}

// FlavorQuota is a team's GPUs of one flavor. An absent limit is unlimited.
type FlavorQuota struct {
	// Flavor is the GPU model or pool class, e.g. h100-80gb.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Flavor string `json:"flavor"`

	// Nominal GPUs are guaranteed to the team.
	// +kubebuilder:validation:Minimum=0
	Nominal int64 `json:"nominal"`

	// BorrowingLimit caps how far above nominal the team may go using its
	// cohort's idle quota; absent: unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`

	// LendingLimit caps how much of its idle nominal the team lends to its
	// cohort; absent: unlimited.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LendingLimit *int64 `json:"lendingLimit,omitempty"`
}

// Budget caps a team's spending.
type Budget struct {
	// MonthlyUSD is the most the team's capacity may cost per month, in USD.
	// +optional
	MonthlyUSD *Decimal `json:"monthlyUSD,omitempty"`
}

// TeamStatus is what the scheduler observes of a team.
type TeamStatus struct {
	CommonStatus `json:",inline"`

	// Flavors hold the team's usage per flavor.
	// +optional
	// +listType=map
	// +listMapKey=flavor
	Flavors []FlavorUsage `json:"flavors,omitempty"`

	// PendingWorkloads are the team's workloads waiting for admission.
	// +optional
	PendingWorkloads int64 `json:"pendingWorkloads,omitempty"`

	// AdmittedWorkloads are the team's workloads admitted and not finished.
	// +optional
	AdmittedWorkloads int64 `json:"admittedWorkloads,omitempty"`

	// Metered is the GPU time the team's workloads have used, per flavor and
	// tier, since the team was first scheduled for: allot's scheduler meters
	// it from its own bindings, or under Kueue the team status reconciler from
	// the team's ClusterQueue usage (tier ""), and keeps it here across
	// restarts.
	// +optional
	// +listType=atomic
	Metered []MeteredUsage `json:"metered,omitempty"`

	// MeteredAt is when Metered was last brought up to date.
	// +optional
	MeteredAt *metav1.Time `json:"meteredAt,omitempty"`
}

// MeteredUsage is the GPU time used in one flavor and tier.
type MeteredUsage struct {
	// Flavor is the GPU model or pool class.
	Flavor string `json:"flavor"`

	// Tier is the priority tier the pods ran in ("" when metered from
	// Kueue, whose queue usage has no priority).
	Tier string `json:"tier"`

	// GPUSeconds are GPUs times seconds bound, whole seconds.
	GPUSeconds int64 `json:"gpuSeconds"`
}

// FlavorUsage is a team's use of one flavor.
type FlavorUsage struct {
	// Flavor is the GPU model or pool class.
	Flavor string `json:"flavor"`

	// UsedGPUs are the GPUs of the team's admitted workloads.
	// +optional
	UsedGPUs int64 `json:"usedGPUs,omitempty"`

	// BorrowedGPUs are the part of UsedGPUs above the team's nominal, or used by
	// borrowOnly tiers: the cohort may reclaim them.
	// +optional
	BorrowedGPUs int64 `json:"borrowedGPUs,omitempty"`

	// LentGPUs are the team's idle nominal GPUs other teams of the cohort use.
	// +optional
	LentGPUs int64 `json:"lentGPUs,omitempty"`
}

// Team is a team's GPU quota: who pays, which cohort it shares with, which tiers
// it may use.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=allot
// +kubebuilder:printcolumn:name="Cohort",type=string,JSONPath=`.spec.cohort`
// +kubebuilder:printcolumn:name="Flavors",type=string,JSONPath=`.spec.quota[*].flavor`
// +kubebuilder:printcolumn:name="Nominal",type=string,JSONPath=`.spec.quota[*].nominal`
// +kubebuilder:printcolumn:name="Used",type=string,JSONPath=`.status.flavors[*].usedGPUs`
// +kubebuilder:printcolumn:name="Borrowed",type=string,JSONPath=`.status.flavors[*].borrowedGPUs`,priority=1
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.pendingWorkloads`
// +kubebuilder:printcolumn:name="Quota Applied",type=string,JSONPath=`.status.conditions[?(@.type=="QuotaApplied")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="QuotaApplied")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Team struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TeamSpec   `json:"spec,omitempty"`
	Status TeamStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the Team.
func (t *Team) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions sets the status conditions of the Team.
func (t *Team) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// TeamList is a list of Teams.
//
// +kubebuilder:object:root=true
type TeamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Team `json:"items"`
}
