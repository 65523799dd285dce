package kueue

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Kueue API the objects are written in.
const (
	Group      = "kueue.x-k8s.io"
	Version    = "v1beta2"
	APIVersion = Group + "/" + Version
)

// Names Kueue gives meaning to.
const (
	// ResourceGPU is the resource every ClusterQueue covers.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// LabelQueueName on a Job names the LocalQueue it is submitted to.
	LabelQueueName = "kueue.x-k8s.io/queue-name"
	// LabelPriorityClass on a Job names its WorkloadPriorityClass (the tier).
	LabelPriorityClass = "kueue.x-k8s.io/priority-class"
)

// Kueue's preemption policies and queueing strategy (the values allot renders).
const (
	PreemptNever         = "Never"
	PreemptLowerPriority = "LowerPriority"
	PreemptAny           = "Any"
	BestEffortFIFO       = "BestEffortFIFO"
)

// ResourceFlavor is Kueue's name for a kind of node: the nodes of a flavor's
// pools in one cluster.
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ResourceFlavorSpec `json:"spec"`
}

// ResourceFlavorSpec selects the flavor's nodes.
type ResourceFlavorSpec struct {
	NodeLabels   map[string]string   `json:"nodeLabels,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	TopologyName string              `json:"topologyName,omitempty"`
}

// Topology lists the node labels of a layout's levels, widest first.
type Topology struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              TopologySpec `json:"spec"`
}

// TopologySpec holds the levels.
type TopologySpec struct {
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level, by its node label.
type TopologyLevel struct {
	NodeLabel string `json:"nodeLabel"`
}

// WorkloadPriorityClass is a tier: Jobs name it with LabelPriorityClass.
type WorkloadPriorityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Value             int32  `json:"value"`
	Description       string `json:"description,omitempty"`
}

// Cohort is an allot cohort; nested cohorts name their parent.
type Cohort struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              CohortSpec `json:"spec"`
}

// CohortSpec names the parent cohort.
type CohortSpec struct {
	ParentName string `json:"parentName,omitempty"`
}

// ClusterQueue is a team's quota in one cluster.
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ClusterQueueSpec `json:"spec"`
}

// ClusterQueueSpec is the team's quota, cohort, namespaces and preemption.
type ClusterQueueSpec struct {
	ResourceGroups    []ResourceGroup       `json:"resourceGroups,omitempty"`
	CohortName        string                `json:"cohortName,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
	QueueingStrategy  string                `json:"queueingStrategy"`
	Preemption        Preemption            `json:"preemption"`
	FairSharing       *FairSharing          `json:"fairSharing,omitempty"`
}

// ResourceGroup is the GPUs of the team's flavors, in flavor order.
type ResourceGroup struct {
	CoveredResources []corev1.ResourceName `json:"coveredResources"`
	Flavors          []FlavorQuotas        `json:"flavors"`
}

// FlavorQuotas is the quota of one flavor.
type FlavorQuotas struct {
	Name      string          `json:"name"`
	Resources []ResourceQuota `json:"resources"`
}

// ResourceQuota is nominal quota and limits of one resource; a nil limit is
// unlimited.
type ResourceQuota struct {
	Name           corev1.ResourceName `json:"name"`
	NominalQuota   resource.Quantity   `json:"nominalQuota"`
	BorrowingLimit *resource.Quantity  `json:"borrowingLimit,omitempty"`
	LendingLimit   *resource.Quantity  `json:"lendingLimit,omitempty"`
}

// Preemption is what a pending workload of the queue may preempt.
type Preemption struct {
	ReclaimWithinCohort string             `json:"reclaimWithinCohort"`
	BorrowWithinCohort  BorrowWithinCohort `json:"borrowWithinCohort"`
	WithinClusterQueue  string             `json:"withinClusterQueue"`
}

// BorrowWithinCohort is whether a borrowing workload may preempt.
type BorrowWithinCohort struct {
	Policy string `json:"policy"`
}

// FairSharing weighs the queue's share when Kueue's fair sharing is on.
type FairSharing struct {
	Weight resource.Quantity `json:"weight"`
}

// LocalQueue is where a team's namespace submits its Jobs.
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              LocalQueueSpec `json:"spec"`
}

// LocalQueueSpec names the team's ClusterQueue.
type LocalQueueSpec struct {
	ClusterQueue string `json:"clusterQueue"`
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind}
}
