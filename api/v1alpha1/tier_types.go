package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TierSpec is a priority tier, as declared under tiers in the capacity repository.
type TierSpec struct {
	// Priority orders tiers, higher first; unique across tiers. It is also the
	// value of the tier's PriorityClass.
	// +kubebuilder:validation:Minimum=-1000000000
	// +kubebuilder:validation:Maximum=1000000000
	Priority int32 `json:"priority"`

	// Preemptible workloads may be preempted by higher tiers of their team.
	// +optional
	Preemptible bool `json:"preemptible,omitempty"`

	// BorrowOnly workloads always count as borrowed, even inside their team's
	// nominal quota, so any team of the cohort may reclaim what they use.
	// +optional
	BorrowOnly bool `json:"borrowOnly,omitempty"`

	// Description is shown on the PriorityClass.
	// +optional
	Description string `json:"description,omitempty"`

	// PriorityClassName names the PriorityClass rendered for the tier.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// TierStatus is what the controller observes of a tier.
type TierStatus struct {
	CommonStatus `json:",inline"`
}

// Tier is a priority tier: it orders admission and preemption, and has a
// PriorityClass of the same priority.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=allot
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Preemptible",type=boolean,JSONPath=`.spec.preemptible`
// +kubebuilder:printcolumn:name="BorrowOnly",type=boolean,JSONPath=`.spec.borrowOnly`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TierSpec   `json:"spec,omitempty"`
	Status TierStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the Tier.
func (t *Tier) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions sets the status conditions of the Tier.
func (t *Tier) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// TierList is a list of Tiers.
//
// +kubebuilder:object:root=true
type TierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tier `json:"items"`
}
