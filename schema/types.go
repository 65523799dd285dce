package schema

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/allot-dev/allot/schema/quantity"
)

// Typed identifiers keep names of different kinds apart.
type (
	ClusterName string
	PoolName    string
	TierName    string
	CohortName  string
	TeamName    string
	// Flavor is a GPU model or pool class, e.g. h100-80gb.
	Flavor string
)

// GPUs counts whole GPUs.
type GPUs = int64

// Provider is where a cluster runs: it decides how its pools are rendered.
type Provider string

// The providers a cluster may name.
const (
	ProviderGKE    Provider = "gke"
	ProviderEKS    Provider = "eks"
	ProviderOnPrem Provider = "onprem"
	ProviderKwok   Provider = "kwok"
)

// NamesNodes says whether the provider's module names each node (onprem and
// kwok: one hook per node), rather than sizing a cloud's node group of a
// count.
func (p Provider) NamesNodes() bool { return p == ProviderOnPrem || p == ProviderKwok }

// Scheduler runs a cluster's jobs.
type Scheduler string

// The schedulers a cluster may name.
const (
	SchedulerKubernetes Scheduler = "kubernetes"
	SchedulerSlurm      Scheduler = "slurm"
)

// Config is a loaded capacity repository. Maps are keyed by name; use the sorted
// name helpers for deterministic iteration.
type Config struct {
	Clusters map[ClusterName]*Cluster
	Pools    map[PoolName]*Pool
	Tiers    map[TierName]*Tier
	Cohorts  map[CohortName]*Cohort
	Teams    map[TeamName]*Team
	Policy   Policy

	// Files are the CUE files read, relative to the repository root, sorted.
	Files []string
	// Index locates every field of the user's files.
	Index *Index
	// Writes are what each file sets, in file order.
	Writes []Write
}

// Cluster is a cluster that hosts node pools.
type Cluster struct {
	Name      ClusterName
	Provider  Provider
	Region    string
	Scheduler Scheduler
	Pos       Pos
}

// Pool is a group of identical GPU nodes in one cluster.
type Pool struct {
	Name        PoolName
	Cluster     ClusterName
	Flavor      Flavor
	MachineType string
	GPUsPerNode int64
	MinNodes    int64
	MaxNodes    int64
	Topology    *Topology
	Price       Price
	Headroom    quantity.Decimal
	SpareNodes  int64
	// Repair, when set, replaces the pool's broken nodes; Burst, when set,
	// grows it for pending gangs (docs/elastic.md).
	Repair *Repair
	Burst  *Burst
	// Slurm holds the pool's Slurm names when its cluster's scheduler is
	// slurm (defaults filled in), or when the pool sets them; else nil.
	Slurm *SlurmNodes
	// Approximate: the repository accepts that a scheduler only
	// approximates a rule of it (Finding.Approximation).
	Approximate bool
	Pos         Pos
}

// Repair is how a pool replaces nodes that stay unusable.
type Repair struct {
	// After is how long a node stays unusable before it is replaced.
	After time.Duration
	// MaxNodes bounds the replacement nodes held at once.
	MaxNodes int64
	// Broken is what becomes of a replaced node once no gang runs on it.
	Broken RepairBroken
	// Flaps is how many failures within FlapWindow retire a node for good.
	Flaps      int
	FlapWindow time.Duration
}

// RepairBroken is what becomes of a replaced node.
type RepairBroken string

const (
	// BrokenRemove deletes the node once no gang runs on it.
	BrokenRemove RepairBroken = "remove"
	// BrokenKeep leaves it cordoned for someone to repair.
	BrokenKeep RepairBroken = "keep"
)

// Burst is how far a pool may grow past its planned size for pending gangs.
type Burst struct {
	// MaxNodes bounds the nodes added beyond the planned size.
	MaxNodes int64
	// IdleAfter is how long a burst node runs no gang before it goes.
	IdleAfter time.Duration
}

// ElasticRoom returns the nodes repair and burst may add beyond target
// within maxNodes. Replacement comes first: it keeps the quotas' promise of
// healthy capacity, so burst gets what replacement leaves. A target above
// maxNodes leaves no room, not negative room.
func ElasticRoom(maxNodes, target int64, r *Repair, b *Burst) (replacement, burst int64) {
	room := max(0, maxNodes-target)
	if r != nil {
		replacement = min(max(0, r.MaxNodes), room)
		room -= replacement
	}
	if b != nil {
		burst = min(max(0, b.MaxNodes), room)
	}
	return replacement, burst
}

// Bounds of the durations of a pool's repair and burst.
const (
	MaxRepairAfter = 7 * 24 * time.Hour
	MaxFlapWindow  = 30 * 24 * time.Hour
	MaxIdleAfter   = 7 * 24 * time.Hour
)

// ParseDuration reads a #Duration ("1h30m") and checks it is within
// [least, most].
func ParseDuration(s string, least, most time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 15m or 1h30m", s)
	}
	if d < least || d > most {
		return 0, fmt.Errorf("%s is outside [%s, %s]", d, least, most)
	}
	return d, nil
}

// SlurmNodes are the Slurm names of a pool: its nodes are NodePrefix then
// the index (FirstIndex on), zero-padded to NodeDigits, in Partition, with
// GRES gpu:GRESType.
type SlurmNodes struct {
	Partition  string
	NodePrefix string
	NodeDigits int
	FirstIndex int64
	GRESType   string
}

// SlurmName is the pattern of a name allot writes into slurm.conf, gres.conf
// or a sacctmgr argument (#SlurmName): never a hostlist, a list, a
// key=value, an option or a shell word.
var SlurmName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// NodeName returns the name of the pool's i-th node, i from 0.
func (s *SlurmNodes) NodeName(i int64) string {
	return fmt.Sprintf("%s%0*d", s.NodePrefix, s.NodeDigits, s.FirstIndex+i)
}

// MaxTopologyLevels is the most levels a pool's topology may have: Kueue's
// Topology takes 16, and no fleet has more (region, zone, block, rack, host).
const MaxTopologyLevels = 16

// Topology lays a pool's nodes out in nested domains, widest level first.
type Topology struct {
	Levels []string
	// Sizes holds, per level, how many domains of the next narrower level (or
	// nodes, for the narrowest) one domain of it holds; 0 means unbounded.
	Sizes map[string]int64
	// UnknownSizes are the keys of the user's domainSize that name none of
	// Levels (sorted): Sizes leaves them out, and the policies report them.
	UnknownSizes []string
}

// Price is what one node of a pool costs per hour, in USD.
type Price struct {
	OnDemandPerNodeHour  quantity.Decimal
	CommittedPerNodeHour quantity.Decimal
	HasCommittedPrice    bool
	CommittedNodes       int64
}

// Tier is a priority tier.
type Tier struct {
	Name        TierName
	Priority    int64
	Preemptible bool
	BorrowOnly  bool
	Description string
	// Approximate: the repository accepts that a scheduler only
	// approximates a rule of it (Finding.Approximation).
	Approximate bool
	Pos         Pos
}

// Cohort groups teams that borrow each other's idle quota.
type Cohort struct {
	Name   CohortName
	Parent CohortName // empty: a root cohort
	Pos    Pos
}

// Team owns quota and pays for it.
type Team struct {
	Name       TeamName
	CostCenter string
	Owners     []string
	Cohort     CohortName // empty: borrows and lends nothing
	Tiers      []TierName // empty: all tiers
	// Namespaces other than its own (named after the team) that belong to it.
	Namespaces []string
	Quota      map[Flavor]Quota
	// BudgetMonthlyUSD is nil when the team has no budget.
	BudgetMonthlyUSD *quantity.Decimal
	Weight           quantity.Decimal
	// Approximate: the repository accepts that a scheduler only
	// approximates a rule of it (Finding.Approximation).
	Approximate bool
	Pos         Pos
}

// Quota is a team's GPUs of one flavor. A nil limit is unlimited.
type Quota struct {
	Nominal        GPUs
	BorrowingLimit *GPUs
	LendingLimit   *GPUs
}

// Policy holds organisation-wide settings.
type Policy struct {
	// FinanceApprovalAboveMonthlyUSD: a plan whose monthly cost grows by more needs finance.
	FinanceApprovalAboveMonthlyUSD quantity.Decimal
	// FinanceApprovers and PlatformApprovers are as written: nil when unset (an
	// approval then names the role, a CODEOWNERS file cannot be rendered).
	FinanceApprovers  []string
	PlatformApprovers []string
	AllowDisruption   bool
}

// ClusterNames returns the cluster names, sorted.
func (c *Config) ClusterNames() []ClusterName { return slices.Sorted(maps.Keys(c.Clusters)) }

// ClustersRunBy returns the names of the clusters scheduler runs, sorted.
func (c *Config) ClustersRunBy(s Scheduler) []ClusterName {
	var out []ClusterName
	for _, n := range c.ClusterNames() {
		if c.Clusters[n].Scheduler == s {
			out = append(out, n)
		}
	}
	return out
}

// PoolNames returns the pool names, sorted.
func (c *Config) PoolNames() []PoolName { return slices.Sorted(maps.Keys(c.Pools)) }

// TierNames returns the tier names, highest priority first (then by name).
func (c *Config) TierNames() []TierName {
	names := slices.Sorted(maps.Keys(c.Tiers))
	slices.SortStableFunc(names, func(a, b TierName) int {
		pa, pb := c.Tiers[a].Priority, c.Tiers[b].Priority
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return 0
	})
	return names
}

// CohortNames returns the cohort names, sorted.
func (c *Config) CohortNames() []CohortName { return slices.Sorted(maps.Keys(c.Cohorts)) }

// TeamNames returns the team names, sorted.
func (c *Config) TeamNames() []TeamName { return slices.Sorted(maps.Keys(c.Teams)) }

// Flavors returns every flavor a pool carries or a team asks for, sorted.
func (c *Config) Flavors() []Flavor {
	set := map[Flavor]bool{}
	for _, p := range c.Pools {
		set[p.Flavor] = true
	}
	for _, t := range c.Teams {
		for f := range t.Quota {
			set[f] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// PoolsOf returns the pools that carry flavor f, sorted by name.
func (c *Config) PoolsOf(f Flavor) []*Pool {
	var out []*Pool
	for _, n := range c.PoolNames() {
		if p := c.Pools[n]; p.Flavor == f {
			out = append(out, p)
		}
	}
	return out
}

// Pos returns the position of the field at path (e.g. "teams", "nlp", "quota"),
// or of its nearest ancestor that is written in a user file.
func (c *Config) Pos(path ...string) Pos {
	if c == nil || c.Index == nil {
		return Pos{}
	}
	return c.Index.Lookup(path...)
}
