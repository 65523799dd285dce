package scheduler

import (
	"time"

	"github.com/allot-dev/allot/scheduler/model"
)

// The core's inputs, decisions and reasons are package model's, named here
// too: the runner, the simulator and the hub build on this package's names.
type (
	NodeName      = model.NodeName
	TeamName      = model.TeamName
	CohortName    = model.CohortName
	TierName      = model.TierName
	Flavor        = model.Flavor
	WorkloadID    = model.WorkloadID
	GPUs          = model.GPUs
	Domain        = model.Domain
	Node          = model.Node
	Rules         = model.Rules
	Tier          = model.Tier
	Cohort        = model.Cohort
	Quota         = model.Quota
	Team          = model.Team
	Config        = model.Config
	Workload      = model.Workload
	Options       = model.Options
	PodPlacement  = model.PodPlacement
	Admission     = model.Admission
	PreemptReason = model.PreemptReason
	Preemption    = model.Preemption
	Eviction      = model.Eviction
	Results       = model.Results
	Walk          = model.Walk
	PendingStatus = model.PendingStatus
	ReasonCode    = model.ReasonCode
	PendingReason = model.PendingReason
)

// The preemption rules.
const (
	PreemptReclaim    = model.PreemptReclaim
	PreemptHigherTier = model.PreemptHigherTier
	PreemptStarving   = model.PreemptStarving
)

// How far a cycle walks the queue.
const (
	WalkArrivals = model.WalkArrivals
	WalkWhole    = model.WalkWhole
	WalkStopped  = model.WalkStopped
)

// The reasons a workload waits.
const (
	ReasonQueued                = model.ReasonQueued
	ReasonOverQuota             = model.ReasonOverQuota
	ReasonCohortExhausted       = model.ReasonCohortExhausted
	ReasonNoTopologyDomain      = model.ReasonNoTopologyDomain
	ReasonInsufficientNodes     = model.ReasonInsufficientNodes
	ReasonBehindHigherTier      = model.ReasonBehindHigherTier
	ReasonReserved              = model.ReasonReserved
	ReasonWaitingForReservation = model.ReasonWaitingForReservation
	ReasonNoFlavor              = model.ReasonNoFlavor
	ReasonBackoff               = model.ReasonBackoff
	ReasonNoMatchingNodes       = model.ReasonNoMatchingNodes
)

// ClusterLevel is the level of the cluster domains (model.ClusterLevel).
const ClusterLevel = model.ClusterLevel

// DefaultOptions are the options a scheduler runs with unless told
// otherwise (model.DefaultOptions).
func DefaultOptions() Options { return model.DefaultOptions() }

// wakeNoLater brings r.Wake forward to t, if t is set and earlier.
func wakeNoLater(r *Results, t time.Time) {
	if !t.IsZero() && (r.Wake.IsZero() || t.Before(r.Wake)) {
		r.Wake = t
	}
}
