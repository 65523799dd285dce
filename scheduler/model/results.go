package model

import (
	"fmt"
	"time"

	"github.com/allot-dev/allot/api/contract"
)

// PodPlacement binds some pods of a gang to one node.
type PodPlacement struct {
	Node NodeName
	Pods int64
	GPUs GPUs
}

// Admission admits a workload and binds its pods. Preempted lists the workloads
// that must be evicted first, in the order chosen.
type Admission struct {
	Workload WorkloadID
	Flavor   Flavor
	Pods     []PodPlacement
	// Domain is the domain at the level the workload required or preferred, when
	// one was used.
	Domain *Domain
	// Cluster is the cluster of the nodes, when the fleet names clusters.
	Cluster   string
	Preempted []WorkloadID
}

// PreemptReason says which rule allowed a preemption.
type PreemptReason string

// The preemption rules, in the order they are tried.
const (
	// PreemptReclaim: a team under its nominal quota reclaims capacity another team
	// of its cohort is borrowing (or using in a borrowOnly tier).
	PreemptReclaim PreemptReason = "ReclaimBorrowed"
	// PreemptHigherTier: within a team a higher tier preempts a lower, preemptible one.
	PreemptHigherTier PreemptReason = "HigherTier"
	// PreemptStarving: a workload that has waited Options.StarvationAfter takes
	// back what another team of its cohort borrows for work of its tier or
	// lower submitted after it.
	PreemptStarving PreemptReason = "ReclaimForStarving"
)

// Preemption evicts a running workload so that another fits. The victim returns
// to its queue.
type Preemption struct {
	Victim WorkloadID
	By     WorkloadID
	Reason PreemptReason
}

// Eviction is a running or admitted workload the scheduler took back for a reason
// other than preemption (a lost node, a gang timeout). It returns to its queue.
type Eviction struct {
	Workload WorkloadID
	Reason   string
}

// Results are the decisions of one scheduler.Scheduler.Cycle, for a runner to apply in order:
// evictions, then preemptions, then bindings.
type Results struct {
	Admitted  []Admission
	Preempted []Preemption
	Evicted   []Eviction
	// Pending holds the pending workloads whose reason changed in this cycle; the
	// current reason of any workload is scheduler.Scheduler.Reason.
	Pending []PendingStatus
	// Wake, when not zero, is the earliest time a Cycle may decide something new
	// without any other event (a backoff ending, a workload's time to reserve
	// or to starve, or the whole walk due after a walk that stopped at
	// Options.WalkDepth). Every cycle reports it, also one
	// that did not walk what set it: the caller needs only the last one's.
	Wake time.Time
	// Walk says how far the cycle walked the queue, Considered how many
	// workloads it considered, Skipped how many it passed over in runs
	// that could not start (a team's work of one tier; their reasons are
	// worked out again when 30 seconds old).
	Walk       Walk
	Considered int
	Skipped    int
}

// Walk is how far a cycle walked the queue.
type Walk string

const (
	// WalkArrivals: nothing was released; only the workloads submitted since
	// the last cycle were considered.
	WalkArrivals Walk = "arrivals"
	// WalkWhole: the whole queue.
	WalkWhole Walk = "whole"
	// WalkStopped: the queue until Options.WalkDepth workloads in a row did
	// not fit (and the gangs holding reservations).
	WalkStopped Walk = "stopped"
)

// PendingStatus pairs a pending workload with why it waits.
type PendingStatus struct {
	Workload WorkloadID
	Reason   PendingReason
}

// ReasonCode classifies why a workload is not running.
type ReasonCode string

// The reasons a workload waits.
const (
	// ReasonQueued: not yet considered by a cycle.
	ReasonQueued ReasonCode = "Queued"
	// ReasonOverQuota: the team's nominal plus borrowing limit is too small.
	ReasonOverQuota ReasonCode = "OverQuota"
	// ReasonCohortExhausted: within the team's limits, but the cohort has no idle quota to lend.
	ReasonCohortExhausted ReasonCode = "CohortExhausted"
	// ReasonNoTopologyDomain: no domain of the required level has room.
	ReasonNoTopologyDomain ReasonCode = "NoTopologyDomain"
	// ReasonInsufficientNodes: not enough free GPUs on healthy nodes.
	ReasonInsufficientNodes ReasonCode = "InsufficientNodes"
	// ReasonBehindHigherTier: capacity there was at the start of the cycle went to
	// workloads ordered before this one (a higher tier or a team with a smaller share).
	ReasonBehindHigherTier ReasonCode = "WaitingBehindHigherTier"
	// ReasonReserved: nodes are drained toward a gang that waited long enough and
	// this workload fits only on them, or it would take quota held for that gang
	// (Holder).
	ReasonReserved ReasonCode = "BlockedByReservation"
	// ReasonWaitingForReservation: the nodes this gang will use are reserved for it
	// and draining.
	ReasonWaitingForReservation ReasonCode = "WaitingForReservation"
	// ReasonNoFlavor: the team has no quota in any flavor the workload accepts.
	ReasonNoFlavor ReasonCode = "NoFlavor"
	// ReasonBackoff: evicted by the gang timeout, waiting before the next try.
	ReasonBackoff ReasonCode = "Backoff"
	// ReasonNoMatchingNodes: no node of the flavor is of a class the pods'
	// placement rules (taints and tolerations, nodeSelector, node affinity) admit.
	ReasonNoMatchingNodes ReasonCode = "NoMatchingNodes"
)

// PendingReason says why a workload is not running, with the numbers.
type PendingReason struct {
	Code   ReasonCode `json:"code"`
	Flavor Flavor     `json:"flavor,omitempty"`
	// Level is the topology level involved, if any.
	Level string `json:"level,omitempty"`
	// Requested, Available and Limit are GPUs: what the workload asks, what is
	// available to it now, and the bound it hit (a quota, a domain size).
	Requested GPUs `json:"requested"`
	Available GPUs `json:"available"`
	Limit     GPUs `json:"limit,omitempty"`
	// Holder is the workload a reservation is for, when Code is BlockedByReservation.
	Holder WorkloadID `json:"holder,omitempty"`
	// Cluster is the cluster the workload is pinned to, when it is.
	Cluster string `json:"cluster,omitempty"`
	// Held, when Code is InsufficientNodes, are the flavor's GPUs held by work
	// the scheduler does not place (see scheduler.Scheduler.Hold).
	Held GPUs `json:"held,omitempty"`
}

// String says the reason in one line.
func (r PendingReason) String() string {
	switch r.Code {
	case ReasonOverQuota:
		return fmt.Sprintf("over quota on %s: requests %d GPUs, %d available to the team, limit %d (nominal + borrowing limit)", r.Flavor, r.Requested, r.Available, r.Limit)
	case ReasonCohortExhausted:
		return fmt.Sprintf("cohort exhausted on %s: requests %d GPUs, %d lendable in the cohort, team limit %d", r.Flavor, r.Requested, r.Available, r.Limit)
	case ReasonNoTopologyDomain:
		return fmt.Sprintf("no %s domain of %s fits: requests %d GPUs, largest fit %d GPUs free, domain size %d", r.Level, r.Flavor, r.Requested, r.Available, r.Limit)
	case ReasonInsufficientNodes:
		held := ""
		if r.Held > 0 {
			held = fmt.Sprintf(", %d more held (other schedulers' pods, cordoned or not-Ready nodes, unhealthy GPUs)", r.Held)
		}
		switch {
		case r.Cluster != "":
			return fmt.Sprintf("not enough healthy nodes of %s in cluster %s: requests %d GPUs, %d usable free there, %d healthy in the flavor%s", r.Flavor, r.Cluster, r.Requested, r.Available, r.Limit, held)
		case r.Level == ClusterLevel:
			return fmt.Sprintf("not enough healthy nodes of %s in any one cluster (a gang never spans clusters): requests %d GPUs, %d usable free in the best cluster, %d healthy in all%s", r.Flavor, r.Requested, r.Available, r.Limit, held)
		}
		return fmt.Sprintf("not enough healthy nodes of %s: requests %d GPUs, %d usable free, %d healthy in all%s", r.Flavor, r.Requested, r.Available, r.Limit, held)
	case ReasonBehindHigherTier:
		return fmt.Sprintf("waiting behind workloads ordered first on %s: requests %d GPUs, %d left", r.Flavor, r.Requested, r.Available)
	case ReasonReserved:
		return fmt.Sprintf("free nodes or quota of %s are held for gang %s: requests %d GPUs, %d usable", r.Flavor, r.Holder, r.Requested, r.Available)
	case ReasonWaitingForReservation:
		return fmt.Sprintf("waiting for %d reserved GPUs of %s to drain: requests %d, %d free on them", r.Limit, r.Flavor, r.Requested, r.Available)
	case ReasonNoFlavor:
		return fmt.Sprintf("the team has no quota in a flavor the workload accepts (requests %d GPUs)", r.Requested)
	case ReasonBackoff:
		return fmt.Sprintf("backing off after a gang timeout (requests %d GPUs)", r.Requested)
	case ReasonNoMatchingNodes:
		if r.Cluster != "" {
			return fmt.Sprintf("no node of %s in cluster %s admits the pods (requests %d GPUs): the cluster has none of the flavor, or the pods' placement rules match none there", r.Flavor, r.Cluster, r.Requested)
		}
		return fmt.Sprintf("no node of %s admits the pods: their tolerations, nodeSelector or node affinity match none (requests %d GPUs)", r.Flavor, r.Requested)
	}
	return string(r.Code)
}

// Advice says in plain words what a reason means for the workload's owner and
// what would let it run. Codes the core does not know get "".
func (c ReasonCode) Advice() string {
	switch c {
	case ReasonQueued:
		return "It has not been considered yet; the next scheduling cycle will."
	case ReasonOverQuota:
		return "The team's quota of this flavor is in use up to its nominal plus borrowing limit. It runs when enough of the team's running work ends; if it asks for more than the limit itself, only a pull request raising the team's nominal or borrowing limit lets it run."
	case ReasonCohortExhausted:
		return "The team is within its limits, but the other teams of its cohort lend nothing right now (their quota is in use or held back by lending limits). It runs when they free quota, or within the team's own nominal."
	case ReasonNoTopologyDomain:
		return "The workload requires all its pods in one topology domain, and no domain of that level has enough free GPUs. It runs when one does; requiring a wider level (or only preferring this one) lets it run sooner."
	case ReasonInsufficientNodes:
		return "There are not enough free GPUs on healthy nodes of the flavors it accepts. It runs when work ends or nodes come back; a pool too small for its quotas shows in allot plan."
	case ReasonBehindHigherTier:
		return "Capacity was free, but workloads ordered before it (a higher tier, or a team further below its fair share) took it first."
	case ReasonReserved:
		return "The free nodes are being drained toward a large gang that has waited long enough; smaller work may not take them meanwhile."
	case ReasonWaitingForReservation:
		return "Nodes are reserved for this gang and are draining: it starts when the work on them ends."
	case ReasonNoFlavor:
		return "The team has no quota in any flavor the workload accepts: ask for quota of that flavor, or accept another (label allot.dev/flavor)."
	case ReasonNoMatchingNodes:
		return "No node of the flavor takes the pods: a taint they do not tolerate, or labels their nodeSelector or required node affinity do not match. Fix the pods' placement rules, or ask for nodes that match them."
	case ReasonBackoff:
		return "It was admitted but not all its pods could run in time, so it was requeued and waits before the next try."
	}
	return ""
}

// ClusterLevel is the level of the cluster domains, named as the node label
// that names a node's cluster (a name no topology label can give a level).
const ClusterLevel = contract.LabelCluster
