package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CohortSpec is a cohort, as declared under cohorts in the capacity repository.
type CohortSpec struct {
	// Parent names an enclosing Cohort: cohorts may nest. Empty: a root cohort.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Parent string `json:"parent,omitempty"`
}

// CohortStatus is what the scheduler observes of a cohort.
type CohortStatus struct {
	CommonStatus `json:",inline"`

	// Teams are the names of the teams directly in the cohort, sorted.
	// +optional
	// +listType=set
	Teams []string `json:"teams,omitempty"`
}

// Cohort is a group of teams that lend and borrow idle quota among themselves.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=allot
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cohort struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CohortSpec   `json:"spec,omitempty"`
	Status CohortStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the Cohort.
func (c *Cohort) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the status conditions of the Cohort.
func (c *Cohort) SetConditions(cs []metav1.Condition) { c.Status.Conditions = cs }

// CohortList is a list of Cohorts.
//
// +kubebuilder:object:root=true
type CohortList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cohort `json:"items"`
}
