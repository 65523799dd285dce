package model

import "time"

// Typed identifiers keep names of different kinds apart.
type (
	// NodeName names a node.
	NodeName string
	// TeamName names a team (a quota holder, Kueue's ClusterQueue).
	TeamName string
	// CohortName names a cohort of teams that lend each other idle quota.
	CohortName string
	// TierName names a priority tier.
	TierName string
	// Flavor is a GPU model or pool class, e.g. h100-80gb.
	Flavor string
	// WorkloadID names a workload (a gang of pods).
	WorkloadID string
)

// GPUs counts whole GPUs.
type GPUs = int64

// Domain is a node's topology domain at one level, e.g. {rack, r12}.
type Domain struct {
	Level string `json:"level"`
	Name  string `json:"name"`
}

// Node is one node of the fleet as the scheduler sees it.
type Node struct {
	Name   NodeName
	Flavor Flavor
	GPUs   GPUs
	// Domains are the node's topology domains, widest level first.
	Domains []Domain
	// Unhealthy nodes run nothing and receive nothing.
	Unhealthy bool
	// Class names what the node's placement rules depend on (for the runner,
	// its taints and labels): nodes of one class are alike to every workload's
	// Rules. Empty is a class too.
	Class string
	// Cluster names the cluster the node is in. A cluster is a hard boundary:
	// no gang spans clusters, and a workload that names no cluster goes to the
	// cheapest cluster where it fits (see Cost), then the best fit. Empty: the
	// fleet is one cluster. The nodes of one flavor either all name a cluster
	// or none does.
	Cluster string
	// Cost is what one GPU of the node costs an hour, in any fixed unit (allot
	// uses millionths of a dollar); only its order matters. A cluster's cost
	// for a flavor is its cheapest node's.
	Cost int64
}

// Rules say on which node classes a workload's pods may run: Kubernetes'
// taints and tolerations, nodeSelector and required node affinity, as the
// runner reads them from the pods. The core asks Admits at most once per class
// and distinct Key, and never about a node's name.
type Rules interface {
	// Key identifies the rules: rules of one key admit the same classes.
	Key() string
	// Admits says whether the pods may run on nodes of the class.
	Admits(class string) bool
}

// Tier is a priority tier and its preemption rights.
type Tier struct {
	Name     TierName
	Priority int64
	// Preemptible workloads may be preempted by higher tiers of their team.
	Preemptible bool
	// BorrowOnly workloads always count as borrowed: any team of the cohort under
	// its nominal quota may reclaim what they use.
	BorrowOnly bool
}

// Cohort groups teams (and other cohorts) that lend each other idle quota.
type Cohort struct {
	Name CohortName
	// Parent is empty for a root cohort.
	Parent CohortName
}

// Quota is a team's GPUs of one flavor. A nil limit is unlimited.
type Quota struct {
	Nominal GPUs
	// BorrowingLimit is how far above Nominal the team may go on the cohort's idle quota.
	BorrowingLimit *GPUs
	// LendingLimit is how much of its idle nominal quota the team lends to the cohort.
	LendingLimit *GPUs
}

// Team holds quota per flavor. Workloads may only use the flavors it has a quota for.
type Team struct {
	Name TeamName
	// Cohort is empty for a team that neither borrows nor lends.
	Cohort CohortName
	// Weight scales the team's fair share (default 1).
	Weight float64
	Quota  map[Flavor]Quota
	// Tiers the team may use; empty means all.
	Tiers []TierName
}

// Config is the quota tree and the tiers.
type Config struct {
	Tiers   []Tier
	Cohorts []Cohort
	Teams   []Team
}

// Workload is a gang of Pods pods of GPUsPerPod GPUs each, placed all or nothing.
type Workload struct {
	ID         WorkloadID
	Team       TeamName
	Tier       TierName
	Pods       int64
	GPUsPerPod GPUs
	// Flavors the workload may run on; empty means any flavor its team has quota for.
	Flavors []Flavor
	// Require names a topology level all pods must share one domain of.
	Require string
	// Prefer names a topology level to try first, then each wider level, then none.
	Prefer string
	// Cluster pins the workload to one cluster of the fleet; empty lets the
	// scheduler route it (see Node.Cluster).
	Cluster string
	// Rules restrict the node classes the pods may run on; nil admits every
	// class.
	Rules Rules
	// Submitted orders workloads of one team and tier.
	Submitted time.Time
	// Restarts counts the times the workload lost a node to a fault and was
	// started again. A runner that resubmits such a workload (its pods made
	// anew by their controller) passes the count on: a workload with restarts
	// goes ahead of its tier, as SetNodeHealth requeues it.
	Restarts int
}

// GPUs returns the GPUs of the whole gang.
func (w *Workload) GPUs() GPUs { return w.Pods * w.GPUsPerPod }

// Options tune the scheduler. Durations are virtual time: the scheduler reads the
// time only from the now given to scheduler.Scheduler.Cycle.
type Options struct {
	// ReserveAfter is how long a gang that does not fit waits before the nodes it
	// will use are reserved for it (drained: no new work placed there). Zero means
	// immediately; negative disables reservations.
	ReserveAfter time.Duration
	// GangTimeout is how long an admitted gang may take to have every pod running
	// before it is evicted and requeued; zero disables the check.
	GangTimeout time.Duration
	// Backoff is how long a workload evicted by the gang timeout waits before it is
	// considered again; it doubles with every further timeout.
	Backoff time.Duration
	// BorrowFirstAfter, when positive, is how long a gang that waits for the
	// cohort's idle quota waits before the cohort's borrowable quota goes to it
	// first: the longest-waiting such gang of a cohort holds back the borrowing
	// of other teams' later, smaller work (never a team within its nominal).
	// Zero disables it.
	BorrowFirstAfter time.Duration
	// StarvationAfter, when positive, is how long a workload waits before it
	// counts as starving: it may then take back, by preemption, what other
	// teams of its cohort borrow for work of its tier or lower submitted after
	// it (borrowed capacity goes first come, first served to what has waited
	// that long). Zero disables it.
	StarvationAfter time.Duration
	// NodeLevelFit places a workload that names no topology level by
	// node-level best fit across its flavor (the nodes with the least free
	// GPUs that take a pod), not in the fullest domain that fits, level by
	// level. It is the rule before whole domains were kept whole, for
	// comparing fragmentation (allot sim --node-level-fit).
	NodeLevelFit bool
	// NoPreemption: a workload is admitted only where it fits as things
	// are; nothing is preempted for it (a fleet's hub routes work, it does
	// not stop what runs in a worker).
	NoPreemption bool
	// WalkDepth, when positive, bounds the walk of a cycle that follows a
	// release of GPUs or quota: it stops once WalkDepth workloads in a row did
	// not fit (a gang holding a reservation is still considered), unless a
	// whole walk is due (FullWalkEvery after the last one). What was not
	// reached is walked at the latest then: the cycle's Wake says when. Zero
	// (the default): every such cycle walks the whole queue. (Slurm's
	// default_queue_depth and bf_interval.) It bounds the cost of an event in
	// a long queue, but it is a policy too, not only a speed: what a walk that
	// stops leaves free accumulates for the work at the head of the queue
	// instead of going at once to smaller work further down (backfill), which
	// can lengthen the waits of teams far above their share
	// (scheduler/BENCHMARKS.md).
	WalkDepth int
	// FullWalkEvery is the least time between two whole walks when WalkDepth
	// bounds the others.
	FullWalkEvery time.Duration
	// NoStatuses: a cycle's Results carry no Pending statuses (Reason still
	// says why any workload waits), for a caller that does not read them. A
	// replay's cycles would otherwise allocate gigabytes of them: the
	// reasons of a long queue change with every cycle.
	NoStatuses bool
	// NoSearchMemo: every preemption search runs, even where the same
	// workload's search failed before and nothing it read has changed
	// since (memo.go). The decisions are the same; it is for comparison.
	NoSearchMemo bool
}

// DefaultOptions are what allot uses when nothing else is said.
func DefaultOptions() Options {
	return Options{ReserveAfter: 10 * time.Minute, StarvationAfter: 6 * time.Hour, GangTimeout: 5 * time.Minute,
		Backoff: 30 * time.Second, FullWalkEvery: 5 * time.Second}
}
