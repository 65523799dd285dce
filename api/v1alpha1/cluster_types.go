package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterSpec registers a worker cluster with the hub (allot manager --hub):
// how to reach its API server, and how long it may be unreachable before its
// jobs go to other clusters.
type ClusterSpec struct {
	// KubeconfigSecretRef names the Secret, in the hub manager's own namespace,
	// whose key holds a kubeconfig for the worker's API server. Only inline
	// credentials are accepted (token, client certificate and key, CA data):
	// a kubeconfig that runs a command (exec, auth-provider) or reads a file
	// is refused.
	KubeconfigSecretRef SecretKeyRef `json:"kubeconfigSecretRef"`

	// FailoverAfter is how long the worker may stay unreachable before the hub
	// counts it lost and routes its jobs to other clusters. Default 5m.
	// +optional
	FailoverAfter *metav1.Duration `json:"failoverAfter,omitempty"`
}

// SecretKeyRef names a key of a Secret in the hub manager's namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key defaults to "kubeconfig".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ClusterStatus is what the hub last saw of the worker.
type ClusterStatus struct {
	// Conditions: Reachable (the hub reached the worker's API server at its
	// last probe) and Ready (False with reason Unreachable while within
	// failoverAfter, when the worker keeps its jobs, and Lost after it, when
	// its jobs go to other clusters).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastSeen is when a probe last reached the worker.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// UnreachableSince is when the probes started failing; empty while
	// reachable.
	// +optional
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
	// Nodes and GPUs the worker's API server listed at the last probe (nodes
	// with nvidia.com/gpu allocatable, and their GPUs).
	// +optional
	Nodes int64 `json:"nodes,omitempty"`
	// +optional
	GPUs int64 `json:"gpus,omitempty"`
	// ServerVersion is the worker's Kubernetes version.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Cluster is a worker cluster registered with the hub.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=allot
// +kubebuilder:printcolumn:name="Reachable",type=string,JSONPath=`.status.conditions[?(@.type=="Reachable")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.gpus`
// +kubebuilder:printcolumn:name="Last seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec   `json:"spec,omitempty"`
	Status ClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the Cluster.
func (c *Cluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the status conditions of the Cluster.
func (c *Cluster) SetConditions(cs []metav1.Condition) { c.Status.Conditions = cs }

// ClusterList is a list of Clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}
