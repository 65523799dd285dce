package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PoolSpec is a node pool, as declared under pools in the capacity repository,
// with the size the planner chose for it.
type PoolSpec struct {
	// Cluster names the cluster the pool lives in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`

	// Provider is the cluster's provider: how the pool is made real.
	// +optional
	// +kubebuilder:validation:Enum=gke;eks;onprem;kwok
	Provider string `json:"provider,omitempty"`

	// Flavor is the GPU model or pool class the pool provides, e.g. h100-80gb.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Flavor string `json:"flavor"`

	// MachineType is the provider's instance type, e.g. a3-highgpu-8g.
	// +optional
	MachineType string `json:"machineType,omitempty"`

	// GPUsPerNode is the number of GPUs on every node of the pool.
	// +kubebuilder:validation:Minimum=1
	GPUsPerNode int64 `json:"gpusPerNode"`

	// Nodes bounds the pool's size.
	Nodes NodeBounds `json:"nodes"`

	// NodesTarget is the number of nodes the planner sized the pool to:
	// enough for the quota it carries, plus headroom and spare nodes, within
	// Nodes.
	// +kubebuilder:validation:Minimum=0
	NodesTarget int64 `json:"nodesTarget"`

	// Topology names how nodes are grouped; the level names become node labels
	// (topology.allot.dev/<level>) the scheduler can require or prefer.
	// +optional
	Topology *Topology `json:"topology,omitempty"`

	// Price is what one node costs per hour.
	Price Price `json:"price"`

	// Headroom is the fraction of the quota demand added on top, e.g. "0.1".
	// +optional
	Headroom Decimal `json:"headroom,omitempty"`

	// SpareNodes are kept free for failures.
	// +optional
	// +kubebuilder:validation:Minimum=0
	SpareNodes int64 `json:"spareNodes,omitempty"`

	// Repair, when set, replaces the pool's nodes that stay unusable
	// (docs/elastic.md).
	// +optional
	Repair *PoolRepair `json:"repair,omitempty"`

	// Burst, when set, is how far the pool may grow past NodesTarget for
	// pending gangs.
	// +optional
	Burst *PoolBurst `json:"burst,omitempty"`
}

// PoolRepair is how a pool replaces nodes that stay unusable.
type PoolRepair struct {
	// After is how long a node stays unusable before it is replaced.
	After metav1.Duration `json:"after"`
	// MaxNodes bounds the replacement nodes held at once.
	// +kubebuilder:validation:Minimum=0
	MaxNodes int64 `json:"maxNodes"`
	// Broken is what becomes of a replaced node once no gang runs on it.
	// +kubebuilder:validation:Enum=remove;keep
	Broken string `json:"broken"`
	// Flaps is how many failures within FlapWindow retire a node for good.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=100
	Flaps int `json:"flaps"`
	// FlapWindow is the window failures are counted in.
	FlapWindow metav1.Duration `json:"flapWindow"`
}

// PoolBurst is how far a pool may grow past its planned size.
type PoolBurst struct {
	// MaxNodes bounds the nodes added beyond NodesTarget.
	// +kubebuilder:validation:Minimum=1
	MaxNodes int64 `json:"maxNodes"`
	// IdleAfter is how long a burst node runs no gang before it goes.
	IdleAfter metav1.Duration `json:"idleAfter"`
}

// NodeBounds bounds a pool's size.
// +kubebuilder:validation:XValidation:rule="self.min <= self.max",message="nodes.min must not exceed nodes.max"
type NodeBounds struct {
	// Min is the fewest nodes the pool keeps.
	// +kubebuilder:validation:Minimum=0
	Min int64 `json:"min"`
	// Max is the most nodes the pool may grow to.
	// +kubebuilder:validation:Minimum=0
	Max int64 `json:"max"`
}

// Topology lays a pool's nodes out in nested domains.
type Topology struct {
	// Levels from widest to narrowest, e.g. block, rack, host.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	Levels []TopologyLevel `json:"levels"`
}

// TopologyLevel is one level of a pool's topology.
type TopologyLevel struct {
	// Name of the level; the node label topology.allot.dev/<name> names a node's
	// domain of it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// DomainSize is how many domains of the next narrower level (or nodes, for
	// the narrowest level) one domain of this level holds; absent: unbounded.
	// +optional
	// +kubebuilder:validation:Minimum=1
	DomainSize *int64 `json:"domainSize,omitempty"`
}

// Price is the hourly price of one node, in USD.
type Price struct {
	// OnDemandPerNodeHour is the list price of one node-hour.
	OnDemandPerNodeHour Decimal `json:"onDemandPerNodeHour"`
	// CommittedPerNodeHour is the price of a reserved node-hour.
	// +optional
	CommittedPerNodeHour *Decimal `json:"committedPerNodeHour,omitempty"`
	// CommittedNodes are reserved and paid for whether used or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CommittedNodes int64 `json:"committedNodes,omitempty"`
}

// PoolStatus is what the fleet controller observes of a pool.
type PoolStatus struct {
	CommonStatus `json:",inline"`

	// Nodes are the pool's nodes registered in the cluster.
	// +optional
	Nodes int64 `json:"nodes,omitempty"`

	// ReadyNodes are the pool's nodes that are Ready and schedulable.
	// +optional
	ReadyNodes int64 `json:"readyNodes,omitempty"`

	// GPUs are the GPUs of the pool's nodes.
	// +optional
	GPUs int64 `json:"gpus,omitempty"`

	// HealthyGPUs are the GPUs of Ready nodes that the health agent reports
	// healthy: what the scheduler may place on.
	// +optional
	HealthyGPUs int64 `json:"healthyGPUs,omitempty"`

	// UnhealthyNodes names the nodes with a GPU or node fault, sorted.
	// +optional
	// +listType=set
	UnhealthyNodes []string `json:"unhealthyNodes,omitempty"`

	// AppliedNodesTarget is the node count of the last applied Terraform plan.
	// +optional
	AppliedNodesTarget *int64 `json:"appliedNodesTarget,omitempty"`

	// Repair is what the manager holds beyond NodesTarget for lost nodes and
	// remembers of the nodes' failures (docs/elastic.md); only with
	// spec.repair.
	// +optional
	Repair *PoolRepairStatus `json:"repair,omitempty"`

	// Burst is what the manager holds beyond NodesTarget for pending gangs,
	// for which teams, and the pool's idle nodes (docs/elastic.md); only
	// with spec.burst.
	// +optional
	Burst *PoolBurstStatus `json:"burst,omitempty"`
}

// PoolBurstStatus is the burst state of a pool.
type PoolBurstStatus struct {
	// BurstNodes are the nodes added beyond NodesTarget for pending gangs.
	// +kubebuilder:validation:Minimum=0
	BurstNodes int64 `json:"burstNodes"`
	// Teams attribute the burst nodes to the teams whose gangs caused them
	// (team "": nobody's); they add up to BurstNodes.
	// +optional
	// +listType=map
	// +listMapKey=team
	// +kubebuilder:validation:MaxItems=1000
	Teams []PoolBurstTeam `json:"teams,omitempty"`
	// Idle are the pool's nodes without a gang, and since when.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10000
	Idle []PoolIdleNode `json:"idle,omitempty"`
	// AtMax: a waiting gang needs more nodes than the burst room left (the
	// BurstAtMax warning is given once, when this starts).
	// +optional
	AtMax bool `json:"atMax,omitempty"`
	// Message says why the burst nodes are what they are: the last burst
	// action.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Metered are the burst node-seconds held per team (team "": nobody's)
	// from MeteredSince to MeteredAt: what the finance report bills at the
	// pool's on-demand price (allot report --observed).
	// +optional
	// +listType=map
	// +listMapKey=team
	// +kubebuilder:validation:MaxItems=1000
	Metered []PoolBurstMeter `json:"metered,omitempty"`
	// +optional
	MeteredSince *metav1.Time `json:"meteredSince,omitempty"`
	// +optional
	MeteredAt *metav1.Time `json:"meteredAt,omitempty"`
}

// PoolBurstMeter is the burst node-seconds held for one team's gangs.
type PoolBurstMeter struct {
	// +kubebuilder:validation:MaxLength=253
	Team string `json:"team"`
	// +kubebuilder:validation:Minimum=0
	NodeSeconds int64 `json:"nodeSeconds"`
}

// PoolBurstTeam is the burst nodes held for one team's gangs.
type PoolBurstTeam struct {
	// +kubebuilder:validation:MaxLength=253
	Team  string `json:"team"`
	Nodes int64  `json:"nodes"`
}

// PoolIdleNode is a node of the pool without a gang.
type PoolIdleNode struct {
	// +kubebuilder:validation:MaxLength=253
	Name  string      `json:"name"`
	Since metav1.Time `json:"since"`
}

// PoolRepairStatus is the repair state of a pool.
type PoolRepairStatus struct {
	// ReplacementNodes are the nodes added beyond NodesTarget for lost nodes.
	// +kubebuilder:validation:Minimum=0
	ReplacementNodes int64 `json:"replacementNodes"`
	// Nodes are the nodes with a failure on record or retired, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Nodes []PoolNodeRecord `json:"nodes,omitempty"`
	// AtMax: the pool is short of healthy GPUs and repair may add no more
	// (the ReplacementAtMax warning is given once, when this starts).
	// +optional
	AtMax bool `json:"atMax,omitempty"`
	// Message says why the replacement nodes are what they are: the last
	// repair action that changed them or found the pool short.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// PoolNodeRecord is the repair record of one node.
type PoolNodeRecord struct {
	// Name of the node.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UnusableSince is when it last became unusable; absent while usable.
	// +optional
	UnusableSince *metav1.Time `json:"unusableSince,omitempty"`
	// Failures are when it became unusable within the flap window.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Failures []metav1.Time `json:"failures,omitempty"`
	// Retired: the node left the pool's seats for good (cordoned; deleted
	// or kept for repair as spec.repair.broken says).
	// +optional
	Retired bool `json:"retired,omitempty"`
	// Kept: retired and staying (spec.repair.broken is keep, or a gang still
	// runs on it); a retired node not kept is removed.
	// +optional
	Kept bool `json:"kept,omitempty"`
	// Reason says why it was retired.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// Burst: retired as an idle burst node, not for a fault (removed
	// whatever spec.repair.broken says).
	// +optional
	Burst bool `json:"burst,omitempty"`
}

// Pool is a group of identical GPU nodes in one cluster, carrying one flavor.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=allot
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Flavor",type=string,JSONPath=`.spec.flavor`
// +kubebuilder:printcolumn:name="Target",type=integer,JSONPath=`.spec.nodesTarget`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Replacements",type=integer,JSONPath=`.status.repair.replacementNodes`,priority=1
// +kubebuilder:printcolumn:name="Burst",type=integer,JSONPath=`.status.burst.burstNodes`,priority=1
// +kubebuilder:printcolumn:name="Healthy GPUs",type=integer,JSONPath=`.status.healthyGPUs`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PoolSpec   `json:"spec,omitempty"`
	Status PoolStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions of the Pool.
func (p *Pool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the status conditions of the Pool.
func (p *Pool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// PoolList is a list of Pools.
//
// +kubebuilder:object:root=true
type PoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pool `json:"items"`
}
