// Package contract is allot's cluster contract: the names it reads and writes on
// nodes, pods, namespaces and jobs (docs/contracts.md, "Names on nodes and
// pods"). It imports nothing, so every layer, the pure cores included, names
// a label from here and nowhere else.
package contract

// SchedulerName is what pods set in spec.schedulerName to be scheduled by allot.
const SchedulerName = "allot"

// Labels on pods, namespaces and nodes.
const (
	// LabelTeam on a namespace names the team it belongs to; a pod's team is
	// its namespace's.
	LabelTeam = "allot.dev/team"
	// LabelTier on a pod names its tier.
	LabelTier = "allot.dev/tier"
	// LabelGang and LabelGangSize on a pod name its gang and how many pods
	// the gang has.
	LabelGang     = "allot.dev/gang"
	LabelGangSize = "allot.dev/gang-size"
	// LabelRequire and LabelPrefer on a pod name a topology level all pods of
	// its gang must, or should, share.
	LabelRequire = "allot.dev/require"
	LabelPrefer  = "allot.dev/prefer"
	// LabelFlavor on a node names its GPU flavor; on a pod, the flavors it
	// accepts.
	LabelFlavor = "allot.dev/flavor"
	// LabelCluster on a node names its cluster; on a pod it pins the gang to
	// that cluster.
	LabelCluster = "allot.dev/cluster"
	// LabelPool on a node names the Pool it belongs to.
	LabelPool = "allot.dev/pool"
	// TopologyLabelPrefix + level is the node label that names the node's
	// domain at that topology level (TopologyLabel).
	TopologyLabelPrefix = "topology.allot.dev/"
)

// TopologyLabel returns the node label that names the domain of level.
func TopologyLabel(level string) string { return TopologyLabelPrefix + level }

// Annotations and reasons.
const (
	// AnnotationBoundAs on a pod allot bound is what the scheduler bound it
	// as (gang, size, team, tier; JSON). The scheduler writes it with the
	// bind and admission refuses its writes by anyone else, so a gang found
	// bound at a restart is accounted as it was bound.
	AnnotationBoundAs = "allot.dev/bound-as"
	// AnnotationRetired on a Node is set by the manager when repair retires
	// it (fleet/elastic): "keep" while it stays (kept for repair, or a gang
	// still runs on it), "remove" once it may go. Terraform leaves a node out
	// of its pool's seats only with it, whatever a Pool's status says.
	AnnotationRetired = "allot.dev/retired"
	// AnnotationHubFence on a Job that a hub copied into this cluster is the
	// time (RFC 3339) until which the hub vouches for the copy: the hub
	// renews it while it reaches the cluster; a copy whose fence has passed
	// (the hub lost this cluster and may have moved the job elsewhere) is not
	// started until the hub renews it or deletes it.
	AnnotationHubFence = "hub.allot.dev/fence-until"
	// ReasonHubFenceExpired is the pending reason of a hub's copy whose
	// fence has passed.
	ReasonHubFenceExpired = "HubFenceExpired"
	// ReasonEventsSuppressed is the reason of the event on a Team that says
	// how many events of its pods the scheduler held back.
	ReasonEventsSuppressed = "EventsSuppressed"
)
