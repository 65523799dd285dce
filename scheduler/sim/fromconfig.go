package sim

import (
	"slices"
	"strconv"
	"strings"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// QuotaFromSchema converts a capacity repository's tiers, cohorts and teams into
// the scheduler's quota tree.
func QuotaFromSchema(cfg *schema.Config) scheduler.Config {
	var out scheduler.Config
	for _, n := range cfg.TierNames() {
		t := cfg.Tiers[n]
		out.Tiers = append(out.Tiers, scheduler.Tier{Name: scheduler.TierName(n), Priority: t.Priority, Preemptible: t.Preemptible, BorrowOnly: t.BorrowOnly})
	}
	for _, n := range cfg.CohortNames() {
		out.Cohorts = append(out.Cohorts, scheduler.Cohort{Name: scheduler.CohortName(n), Parent: scheduler.CohortName(cfg.Cohorts[n].Parent)})
	}
	for _, n := range cfg.TeamNames() {
		t := cfg.Teams[n]
		st := scheduler.Team{Name: scheduler.TeamName(n), Cohort: scheduler.CohortName(t.Cohort), Weight: 1, Quota: map[scheduler.Flavor]scheduler.Quota{}}
		if !t.Weight.IsZero() {
			st.Weight = t.Weight.Float64()
		}
		for _, tier := range t.Tiers {
			st.Tiers = append(st.Tiers, scheduler.TierName(tier))
		}
		for f, q := range t.Quota {
			st.Quota[scheduler.Flavor(f)] = scheduler.Quota{Nominal: q.Nominal, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit}
		}
		out.Teams = append(out.Teams, st)
	}
	return out
}

// FleetFromSchema builds the simulated fleet: every pool at its node target
// (the planner's, given by the caller: the simulator sits below the planner),
// nodes named <pool>-<index> and laid out in topology domains in index order,
// each in its pool's cluster at its pool's on-demand price per GPU-hour.
func FleetFromSchema(cfg *schema.Config, targets map[schema.PoolName]int64) []scheduler.Node {
	return FleetFromLayout(cfg, fleet.Layout(cfg, targets))
}

// FleetFromLayout is FleetFromSchema of a fleet already laid out (fleet.Layout
// of cfg): the scheduler's nodes, each at its pool's on-demand price per
// GPU-hour.
func FleetFromLayout(cfg *schema.Config, layout []fleet.Node) []scheduler.Node {
	nodes := FromFleet(layout)
	for i, n := range layout {
		if p := cfg.Pools[n.Pool]; p != nil && p.GPUsPerNode > 0 {
			// Millionths of a dollar per GPU-hour: exact enough to order.
			nodes[i].Cost = p.Price.OnDemandPerNodeHour.MulInt(1_000_000).Quo(quantity.Int(p.GPUsPerNode)).Floor()
		}
	}
	return nodes
}

// FromRepository is the input of a replay of the repository cfg on layout
// (fleet.Layout of cfg at the planner's node targets): its nodes at their
// pools' prices, its quota tree, its clusters and the nodes its pools may
// have. The caller adds the jobs and events. allot sim, plan --simulate and
// recommend replay a repository through it alone, so that the three agree.
//
// Its pools that declare burst grow for pending gangs in the replay
// (Input.Burst): WithoutBurst is the same replay without.
func FromRepository(cfg *schema.Config, layout []fleet.Node) Input {
	return Input{Nodes: FleetFromLayout(cfg, layout), Quota: QuotaFromSchema(cfg), Clusters: ClusterNames(cfg), MayLack: PoolNodes(cfg), Burst: BurstPools(cfg, layout)}
}

// BurstPools are cfg's pools that declare burst, at their sizes in layout,
// by name.
func BurstPools(cfg *schema.Config, layout []fleet.Node) []BurstPool {
	counts := map[schema.PoolName]int64{}
	for _, n := range layout {
		counts[n.Pool]++
	}
	var out []BurstPool
	for _, name := range cfg.PoolNames() {
		p := cfg.Pools[name]
		if p.Burst == nil || p.GPUsPerNode <= 0 {
			continue
		}
		out = append(out, BurstPool{
			Pool: string(name), Flavor: scheduler.Flavor(p.Flavor), Cluster: string(p.Cluster),
			Elastic: elastic.Pool{Fixed: counts[name], Spare: p.SpareNodes, Max: p.MaxNodes, GPUsPerNode: p.GPUsPerNode, Named: true, Burst: p.Burst,
				IndexOf: func(node string) (int64, bool) { return fleet.NodeIndex(name, node) }},
			PerDomain:        fleet.NodesPerDomain(p.Topology),
			PricePerNodeHour: p.Price.OnDemandPerNodeHour,
			Layout: func(held []string, count int64) []scheduler.Node {
				return FleetFromLayout(cfg, fleet.LayoutHeld(cfg, map[schema.PoolName]int64{name: count}, map[schema.PoolName]fleet.Held{name: {Names: held}}))
			},
		})
	}
	return out
}

// ClusterNames are the repository's clusters (sim.Input.Clusters of a fleet
// built from it: those whose pools are planned at zero nodes exist too).
func ClusterNames(cfg *schema.Config) []string {
	names := make([]string, 0, len(cfg.Clusters))
	for n := range cfg.Clusters {
		names = append(names, string(n))
	}
	slices.Sort(names)
	return names
}

// PoolNodes says whether a name is one the repository's fleet may have
// (fleet.NodeName of a pool and an index below its nodes.max), whatever size
// the pools are planned at: sim.Input.MayLack of a fleet built from it, so
// that a node event of a history replayed against fewer nodes fails nothing.
func PoolNodes(cfg *schema.Config) func(scheduler.NodeName) bool {
	return func(n scheduler.NodeName) bool {
		i := strings.LastIndexByte(string(n), '-')
		if i < 0 {
			return false
		}
		p := cfg.Pools[schema.PoolName(n[:i])]
		idx, err := strconv.ParseInt(string(n[i+1:]), 10, 64)
		return p != nil && err == nil && idx >= 0 && idx < p.MaxNodes && fleet.NodeName(schema.PoolName(n[:i]), idx) == string(n)
	}
}

// FromFleet converts fleet nodes into scheduler nodes.
func FromFleet(nodes []fleet.Node) []scheduler.Node {
	out := make([]scheduler.Node, 0, len(nodes))
	for _, n := range nodes {
		sn := scheduler.Node{Name: scheduler.NodeName(n.Name), Flavor: scheduler.Flavor(n.Flavor), GPUs: n.GPUs, Cluster: string(n.Cluster)}
		for _, d := range n.Domains {
			sn.Domains = append(sn.Domains, scheduler.Domain{Level: d.Level, Name: d.Name})
		}
		out = append(out, sn)
	}
	return out
}

// FromNodeList converts a node list (openb's) into scheduler nodes, one flavor per model.
func FromNodeList(nodes []workload.Node) []scheduler.Node {
	out := make([]scheduler.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, scheduler.Node{Name: scheduler.NodeName(n.Name), Flavor: scheduler.Flavor(n.Flavor), GPUs: n.GPUs})
	}
	return out
}

// AssignToConfig maps a trace's users and priorities onto the configuration's
// teams and tiers (see workload.Assign); the default tier is the lowest one that
// is not borrowOnly.
func AssignToConfig(jobs []workload.Spec, q scheduler.Config) {
	var teams, tiers []string
	for _, t := range q.Teams {
		teams = append(teams, string(t.Name))
	}
	def := ""
	for _, t := range q.Tiers { // highest first
		tiers = append(tiers, string(t.Name))
		if !t.BorrowOnly {
			def = string(t.Name)
		}
	}
	if def == "" && len(tiers) > 0 {
		def = tiers[len(tiers)-1]
	}
	workload.Assign(jobs, teams, tiers, def)
	// A team restricted to some tiers gets, for a tier it may not use, its own
	// default: the lowest of its tiers that is not borrowOnly.
	allowed := map[string]map[string]bool{}
	teamDef := map[string]string{}
	for _, t := range q.Teams {
		if len(t.Tiers) == 0 {
			continue
		}
		set := map[string]bool{}
		for _, n := range t.Tiers {
			set[string(n)] = true
		}
		allowed[string(t.Name)] = set
		for _, tier := range q.Tiers {
			if set[string(tier.Name)] && (!tier.BorrowOnly || teamDef[string(t.Name)] == "") {
				teamDef[string(t.Name)] = string(tier.Name)
			}
		}
	}
	for i := range jobs {
		if set := allowed[jobs[i].Team]; set != nil && !set[jobs[i].Tier] {
			jobs[i].Tier = teamDef[jobs[i].Team]
		}
	}
}

// Core adapts the scheduler core to the simulator's Scheduler.
type Core struct{ *scheduler.Scheduler }

// NewCore returns the scheduler core over the given quota tree and fleet. A
// replay reads no pending statuses (opts.NoStatuses).
func NewCore(q scheduler.Config, nodes []scheduler.Node, opts scheduler.Options) (*Core, error) {
	opts.NoStatuses = true
	s, err := scheduler.New(q, opts)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := s.AddNode(n); err != nil {
			return nil, err
		}
	}
	return &Core{s}, nil
}

// SlurmFlavorMaps maps the GRES types and partitions of cfg's pools to
// their flavors, for jobs read from sacct (workload.SlurmFlavors): a Slurm
// pool's GRES type and partition, and the flavor's own name for a pool not
// on Slurm (the GRES type a Slurm pool of it takes by default). A name that
// two flavors share maps to none.
func SlurmFlavorMaps(cfg *schema.Config) (byGRES, byPartition map[string]string) {
	byGRES, byPartition = map[string]string{}, map[string]string{}
	add := func(m map[string]string, name string, f schema.Flavor) {
		if prev, ok := m[name]; ok && prev != string(f) {
			m[name] = ""
			return
		}
		m[name] = string(f)
	}
	for _, p := range cfg.Pools {
		if p.Slurm == nil {
			add(byGRES, string(p.Flavor), p.Flavor)
			continue
		}
		add(byGRES, p.Slurm.GRESType, p.Flavor)
		add(byPartition, p.Slurm.Partition, p.Flavor)
	}
	return byGRES, byPartition
}
