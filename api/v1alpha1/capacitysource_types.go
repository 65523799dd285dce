package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacitySourceSpec says where the capacity repository is: a Git repository
// allot fetches itself, or a Flux GitRepository whose artifact it downloads.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.sourceRef)",message="exactly one of url and sourceRef must be set"
type CapacitySourceSpec struct {
	// URL of the Git repository (https://, ssh://, git@host:path or file://).
	// +optional
	URL string `json:"url,omitempty"`

	// Ref is the branch, tag or commit to follow; default: the branch main.
	// +optional
	Ref *GitReference `json:"ref,omitempty"`

	// SecretRef names a Secret in the CapacitySource's namespace with the
	// credentials for spec.url, under the same keys as Flux's GitRepository:
	// username and password, or bearerToken (HTTPS); identity and
	// known_hosts (SSH).
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// SourceRef names a Flux source (source.toolkit.fluxcd.io/v1
	// GitRepository, OCIRepository or Bucket) whose artifact holds the
	// capacity repository: a new artifact is applied at once.
	// +optional
	SourceRef *SourceReference `json:"sourceRef,omitempty"`

	// Path is the directory of the capacity repository inside the Git
	// repository; default: its root.
	// +optional
	Path string `json:"path,omitempty"`

	// Interval is how often the source is checked for a new revision.
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval metav1.Duration `json:"interval"`

	// Suspend stops reconciliation; what was applied stays in force.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Prune deletes the objects a revision no longer declares; default true.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`
}

// GitReference selects a revision; the most specific one set wins: commit,
// then semver, then tag, then branch.
type GitReference struct {
	// +optional
	Branch string `json:"branch,omitempty"`
	// +optional
	Tag string `json:"tag,omitempty"`
	// SemVer is a range of tags to follow, e.g. ">=1.2.0 <2.0.0": the
	// highest tag in it wins.
	// +optional
	SemVer string `json:"semver,omitempty"`
	// Commit is a full SHA-1 or SHA-256 commit ID.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{40}|[0-9a-f]{64})?$`
	Commit string `json:"commit,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SourceReference names a Flux source object.
type SourceReference struct {
	// Kind of the source.
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	Kind string `json:"kind"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the source; default: the CapacitySource's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// CapacitySourceStatus is what the capacity reconciler last did.
type CapacitySourceStatus struct {
	CommonStatus `json:",inline"`

	// LastAttemptedRevision is the last revision fetched, valid or not, e.g.
	// main@sha1:0123abc...
	// +optional
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`

	// LastAppliedRevision is the revision in force in the cluster.
	// +optional
	LastAppliedRevision string `json:"lastAppliedRevision,omitempty"`

	// Plan summarizes the plan of the last applied revision.
	// +optional
	Plan *PlanSummary `json:"plan,omitempty"`

	// Findings of the last attempted revision: the errors that stopped it,
	// and warnings, at most 50.
	// +optional
	// +listType=atomic
	Findings []Finding `json:"findings,omitempty"`

	// Inventory lists the objects the last applied revision owns, as
	// <kind>/<name>, sorted.
	// +optional
	// +listType=atomic
	Inventory []string `json:"inventory,omitempty"`
}

// PlanSummary summarizes a plan.
type PlanSummary struct {
	Teams int64 `json:"teams"`
	Pools int64 `json:"pools"`
	// Nodes is the sum of the pools' node targets.
	Nodes int64 `json:"nodes"`
	// GPUs is the sum of the pools' GPUs at their targets.
	GPUs int64 `json:"gpus"`
	// MonthlyUSD is the fleet's monthly cost, e.g. "1234567.89".
	MonthlyUSD Decimal `json:"monthlyUSD"`
}

// Finding is one validation or policy finding, at its place in the repository.
type Finding struct {
	// Severity is error or warning.
	Severity string `json:"severity"`
	// Rule is the stable name of the check, e.g. unknown-field.
	Rule string `json:"rule"`
	// File is relative to the capacity repository's root (spec.path).
	// +optional
	File string `json:"file,omitempty"`
	// +optional
	Line int64 `json:"line,omitempty"`
	// +optional
	Column  int64  `json:"column,omitempty"`
	Message string `json:"message"`
}

// CapacitySource makes a Git revision of a capacity repository true in the
// cluster: it validates and plans each revision with the same code as the CLI,
// and applies the valid ones in a safe order.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=allot,shortName=capsrc
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.lastAppliedRevision`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.plan.gpus`
// +kubebuilder:printcolumn:name="Monthly USD",type=string,JSONPath=`.status.plan.monthlyUSD`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CapacitySource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CapacitySourceSpec   `json:"spec,omitempty"`
	Status CapacitySourceStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the CapacitySource.
func (s *CapacitySource) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions sets the status conditions of the CapacitySource.
func (s *CapacitySource) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }

// GetRequeueAfter returns how long to wait before the next check.
func (s *CapacitySource) GetRequeueAfter() time.Duration { return s.Spec.Interval.Duration }

// PruneEnabled reports whether objects removed from Git are deleted.
func (s *CapacitySource) PruneEnabled() bool { return s.Spec.Prune == nil || *s.Spec.Prune }

// CapacitySourceList is a list of CapacitySources.
//
// +kubebuilder:object:root=true
type CapacitySourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacitySource `json:"items"`
}
