// Package slurm renders what a Slurm cluster of the capacity repository
// should hold: its accounting (cohorts and teams as accounts, tiers as QOS,
// GPU limits as GrpTRES) and the slurm.conf, gres.conf and topology.conf
// fragments of its nodes and partitions. It is pure: values in, values and
// file contents out; the adapter that reads and writes a live cluster
// (controllers/slurm) diffs against Cluster.
package slurm

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// Marks of what allot creates: an account's Organization, and the start of
// its or a QOS's Description. What lacks them is never changed or removed.
const (
	Organization      = "allot"
	DescriptionPrefix = "allot-"
)

// TRES names: every GPU limit is set on both, since a job asking for untyped
// GPUs (--gres=gpu:N) counts only against the untyped one.
const TRESGPU = "gres/gpu"

// TRESGPUType is the TRES of GPUs of GRES type t.
func TRESGPUType(t string) string { return TRESGPU + ":" + t }

// Cluster is what one Slurm cluster should hold: the machine form.
type Cluster struct {
	Name schema.ClusterName `json:"name"`
	// QOS, one per tier, highest priority first.
	QOS []QOS `json:"qos"`
	// Accounts, every parent before its children.
	Accounts []Account `json:"accounts"`
	// Nodes, one set per pool, in pool order.
	Nodes []NodeSet `json:"nodes"`
	// Partitions, by name.
	Partitions []Partition `json:"partitions"`
	// Switches of topology.conf, leaves first.
	Switches []Switch `json:"switches,omitempty"`
	// TRES are the GPU TRES the limits name: slurm.conf's
	// AccountingStorageTRES must list them before a limit can.
	TRES []string `json:"tres"`
}

// QOS is a tier.
type QOS struct {
	Name string `json:"name"`
	// Priority is the tier's rank, 1 for the lowest: Slurm's QOS priority
	// is unsigned and normalised by the highest.
	Priority int64 `json:"priority"`
	// Preempt lists the QOS this one preempts: the preemptible tiers below it.
	Preempt []string `json:"preempt"`
	// PreemptMode is requeue for a preemptible tier, cluster (slurm.conf's) else.
	PreemptMode string `json:"preemptMode"`
	Description string `json:"description"`
}

// Account is a cohort or a team.
type Account struct {
	Name string `json:"name"`
	// Parent is the parent cohort's account, or root.
	Parent       string `json:"parent"`
	Description  string `json:"description"`
	Organization string `json:"organization"`
	// Fairshare is a team's weight × 100; a cohort's is its children's sum.
	Fairshare int64 `json:"fairshare"`
	// GrpTRES caps the GPUs the account's jobs hold at once, by TRES name;
	// a TRES absent is unlimited (-1 to sacctmgr).
	GrpTRES map[string]int64 `json:"grpTRES"`
	// QOS a team's jobs may use (its tiers), and the default one; empty for
	// a cohort (its jobs are its teams').
	QOS        []string `json:"qos,omitempty"`
	DefaultQOS string   `json:"defaultQOS,omitempty"`
	// Team is set for a team's account.
	Team bool `json:"team"`
}

// NodeSet is a pool's nodes.
type NodeSet struct {
	Pool schema.PoolName `json:"pool"`
	// Names is the nodes' hostlist, e.g. gpu[001-016].
	Names     string `json:"names"`
	Count     int64  `json:"count"`
	GPUs      int64  `json:"gpus"`
	GRESType  string `json:"gresType"`
	Partition string `json:"partition"`
	Flavor    string `json:"flavor"`
}

// Partition holds the nodes of its pools.
type Partition struct {
	Name string `json:"name"`
	// Nodes are hostlists, one per pool.
	Nodes []string `json:"nodes"`
}

// Switch is a topology domain: leaves hold nodes, others switches.
type Switch struct {
	Name     string   `json:"name"`
	Nodes    string   `json:"nodes,omitempty"`
	Switches []string `json:"switches,omitempty"`
}

// Build returns what Slurm cluster c of cfg should hold, with each team's
// quota split among the clusters of its flavors as plan sizes them
// (planner.ForCluster). Every name is checked against schema.SlurmName: an
// error names what is not one (policies report it at its line first).
func Build(cfg *schema.Config, plan *planner.Plan, c schema.ClusterName) (*Cluster, error) {
	cl := cfg.Clusters[c]
	if cl == nil || cl.Scheduler != schema.SchedulerSlurm {
		return nil, fmt.Errorf("cluster %s is not a Slurm cluster", c)
	}
	part := planner.ForCluster(cfg, plan, c)
	out := &Cluster{Name: c}
	if err := out.nodes(part); err != nil {
		return nil, err
	}
	if err := out.qos(cfg); err != nil {
		return nil, err
	}
	if err := out.accounts(cfg, part); err != nil {
		return nil, err
	}
	return out, nil
}

// switchName is a topology domain's name: <pool>-<level>-<n>, of DNS labels.
var switchName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,199}$`)

func checkName(kind, name string) error {
	if !schema.SlurmName.MatchString(name) {
		return fmt.Errorf("%s %q is not a Slurm name (lowercase letters, digits, '_' and '-', starting with a letter, at most 63 characters)", kind, name)
	}
	return nil
}

// nodes fills Nodes, Partitions, Switches and TRES from the cluster's pools.
func (out *Cluster) nodes(part *schema.Config) error {
	parts := map[string][]string{}
	types := map[string]bool{}
	counts := map[schema.PoolName]int64{}
	for _, n := range part.PoolNames() {
		p := part.Pools[n]
		s := p.Slurm
		if s == nil {
			return fmt.Errorf("pool %s has no Slurm names", n)
		}
		for _, v := range [][2]string{{"partition", s.Partition}, {"node prefix", s.NodePrefix}, {"GRES type", s.GRESType}} {
			if err := checkName(fmt.Sprintf("pool %s: %s", n, v[0]), v[1]); err != nil {
				return err
			}
		}
		if s.NodeDigits < 0 || s.NodeDigits > 6 || s.FirstIndex < 0 || p.MaxNodes < 0 || p.GPUsPerNode <= 0 {
			return fmt.Errorf("pool %s: node numbering or GPUs out of bounds", n)
		}
		if p.MaxNodes == 0 {
			continue
		}
		// A Slurm cluster's nodes are static: all of nodes.max are declared.
		counts[n] = p.MaxNodes
		set := NodeSet{Pool: n, Names: hostlist(s, 0, p.MaxNodes), Count: p.MaxNodes, GPUs: p.GPUsPerNode,
			GRESType: s.GRESType, Partition: s.Partition, Flavor: string(p.Flavor)}
		out.Nodes = append(out.Nodes, set)
		parts[s.Partition] = append(parts[s.Partition], set.Names)
		types[s.GRESType] = true
	}
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		out.Partitions = append(out.Partitions, Partition{Name: name, Nodes: parts[name]})
	}
	out.TRES = []string{TRESGPU}
	for _, t := range slices.Sorted(maps.Keys(types)) {
		out.TRES = append(out.TRES, TRESGPUType(t))
	}
	return out.switches(part, counts)
}

// hostlist is the Slurm hostlist of count nodes of s from index from.
func hostlist(s *schema.SlurmNodes, from, count int64) string {
	if count == 1 {
		return s.NodeName(from)
	}
	first, last := s.FirstIndex+from, s.FirstIndex+from+count-1
	return fmt.Sprintf("%s[%0*d-%0*d]", s.NodePrefix, s.NodeDigits, first, s.NodeDigits, last)
}

// switches lays the pools' topology out as topology.conf switches: each
// domain wider than a host is a switch, named <pool>-<level>-<n>
// (fleet.Layout's domains), holding the nodes or the switches below it.
func (out *Cluster) switches(part *schema.Config, counts map[schema.PoolName]int64) error {
	type sw struct {
		pool     schema.PoolName
		nodes    []int64 // node indexes, ascending
		children []string
		level    int
	}
	all := map[string]*sw{}
	var order []string
	var pool schema.PoolName
	var idx int64 // of node within pool: Layout lists a pool's nodes in index order
	for _, node := range fleet.Layout(part, counts) {
		if node.Pool != pool {
			pool, idx = node.Pool, 0
		} else {
			idx++
		}
		p := part.Pools[node.Pool]
		if p.Topology == nil {
			continue
		}
		per := fleet.NodesPerDomain(p.Topology)
		child := ""
		for i := len(node.Domains) - 1; i >= 0; i-- {
			d := node.Domains[i]
			if per[d.Level] == 1 {
				continue // the host itself
			}
			if !switchName.MatchString(d.Name) {
				return fmt.Errorf("pool %s: switch %q is not a Slurm name", node.Pool, d.Name)
			}
			s := all[d.Name]
			if s == nil {
				s = &sw{pool: node.Pool, level: i}
				all[d.Name] = s
				order = append(order, d.Name)
			}
			if child == "" {
				s.nodes = append(s.nodes, idx)
			} else if !slices.Contains(s.children, child) {
				s.children = append(s.children, child)
			}
			child = d.Name
		}
	}
	// Leaves (the narrowest levels) first: Slurm reads children before parents.
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(all[b].level, all[a].level) })
	for _, name := range order {
		s := all[name]
		w := Switch{Name: name, Switches: s.children}
		if len(s.nodes) > 0 {
			w.Nodes = hostlist(part.Pools[s.pool].Slurm, s.nodes[0], int64(len(s.nodes)))
		}
		out.Switches = append(out.Switches, w)
	}
	return nil
}

// qos fills QOS from the tiers.
func (out *Cluster) qos(cfg *schema.Config) error {
	names := cfg.TierNames() // highest first
	for i, n := range names {
		if err := checkName("tier", string(n)); err != nil {
			return err
		}
		t := cfg.Tiers[n]
		q := QOS{Name: string(n), Priority: int64(len(names) - i), PreemptMode: "cluster", Description: DescriptionPrefix + "tier", Preempt: []string{}}
		if t.Preemptible {
			q.PreemptMode = "requeue"
		}
		for _, lower := range names[i+1:] {
			if lt := cfg.Tiers[lower]; lt.Preemptible && lt.Priority < t.Priority {
				q.Preempt = append(q.Preempt, string(lower))
			}
		}
		out.QOS = append(out.QOS, q)
	}
	return nil
}

// accounts fills Accounts: the teams with a quota of a flavor of the
// cluster, under the cohorts that hold them.
func (out *Cluster) accounts(cfg, part *schema.Config) error {
	gres := map[schema.Flavor]string{}
	for _, p := range part.Pools {
		gres[p.Flavor] = p.Slurm.GRESType
	}
	type node struct {
		acct     Account
		children []string
	}
	accts := map[string]*node{}
	cohortNominal := map[schema.CohortName]map[string]int64{}
	for _, n := range part.TeamNames() {
		t := part.Teams[n]
		limits := map[string]int64{}
		var total int64
		unlimited, any := false, false
		for _, f := range slices.Sorted(maps.Keys(gres)) {
			typ := gres[f]
			q, ok := t.Quota[f]
			if !ok {
				// A typed request for a flavor the team has no quota of is refused.
				limits[TRESGPUType(typ)] = 0
				continue
			}
			any = true
			limit := q.Nominal
			switch {
			case t.Cohort == "":
			case q.BorrowingLimit != nil:
				limit += *q.BorrowingLimit
			default:
				unlimited = true
				limit = -1
			}
			if limit >= 0 {
				limits[TRESGPUType(typ)] = limit
				total += limit
			}
			chain, err := ancestors(cfg, t.Cohort)
			if err != nil {
				return err
			}
			for _, c := range chain {
				if cohortNominal[c] == nil {
					cohortNominal[c] = map[string]int64{}
				}
				cohortNominal[c][TRESGPUType(typ)] += q.Nominal
				cohortNominal[c][TRESGPU] += q.Nominal
			}
		}
		if !any {
			continue
		}
		if !unlimited {
			limits[TRESGPU] = total
		}
		if err := checkName("team", string(n)); err != nil {
			return err
		}
		a := Account{Name: string(n), Parent: "root", Description: DescriptionPrefix + "team", Organization: Organization,
			Fairshare: fairshare(t), GrpTRES: limits, Team: true}
		if t.Cohort != "" {
			a.Parent = string(t.Cohort)
		}
		a.QOS, a.DefaultQOS = teamQOS(cfg, t)
		accts[a.Name] = &node{acct: a}
	}
	// The cohorts that hold a team here, up to their roots.
	for _, n := range part.TeamNames() {
		if accts[string(n)] == nil {
			continue
		}
		chain, err := ancestors(cfg, part.Teams[n].Cohort)
		if err != nil {
			return err
		}
		child := string(n)
		for _, c := range chain {
			if err := checkName("cohort", string(c)); err != nil {
				return err
			}
			nd, existed := accts[string(c)]
			if existed && nd.acct.Team {
				return fmt.Errorf("cohort %s and team %s would be one account", c, c)
			}
			if !existed {
				parent := "root"
				if p := parentOf(cfg, c); p != "" {
					parent = string(p)
				}
				nd = &node{acct: Account{Name: string(c), Parent: parent, Description: DescriptionPrefix + "cohort",
					Organization: Organization, GrpTRES: cohortNominal[c]}}
				accts[string(c)] = nd
			}
			if !slices.Contains(nd.children, child) {
				nd.children = append(nd.children, child)
			}
			if existed {
				break // its parents hold it already
			}
			child = string(c)
		}
	}
	// Parents first (depth-first from root), children by name.
	var fair func(name string) int64
	fair = func(name string) int64 {
		nd := accts[name]
		if nd.acct.Team {
			return nd.acct.Fairshare
		}
		var sum int64
		for _, ch := range nd.children {
			sum += fair(ch)
		}
		nd.acct.Fairshare = max(sum, 1)
		return nd.acct.Fairshare
	}
	var walk func(parent string)
	walk = func(parent string) {
		var kids []string
		for name, nd := range accts {
			if nd.acct.Parent == parent {
				kids = append(kids, name)
			}
		}
		slices.Sort(kids)
		for _, k := range kids {
			fair(k)
			out.Accounts = append(out.Accounts, accts[k].acct)
			walk(k)
		}
	}
	walk("root")
	if len(out.Accounts) != len(accts) {
		return fmt.Errorf("the cohorts of cluster %s do not form a tree", out.Name)
	}
	return nil
}

// ancestors returns cohort c and its parents, up to its root; an error when
// they form a cycle (policies report it at its line).
func ancestors(cfg *schema.Config, c schema.CohortName) ([]schema.CohortName, error) {
	var out []schema.CohortName
	for ; c != ""; c = parentOf(cfg, c) {
		if slices.Contains(out, c) {
			return nil, fmt.Errorf("cohort %s is its own ancestor", c)
		}
		out = append(out, c)
	}
	return out, nil
}

func parentOf(cfg *schema.Config, c schema.CohortName) schema.CohortName {
	if co := cfg.Cohorts[c]; co != nil {
		return co.Parent
	}
	return ""
}

// fairshare is a team's weight × 100, at least 1.
func fairshare(t *schema.Team) int64 {
	return max(t.Weight.MulInt(100).Round(0).Floor(), 1)
}

// teamQOS returns the QOS of a team's tiers, highest first, and its default:
// the lowest that is neither preemptible nor borrowOnly, else the lowest.
func teamQOS(cfg *schema.Config, t *schema.Team) ([]string, string) {
	var qos []string
	def := ""
	for _, n := range cfg.TierNames() {
		if len(t.Tiers) > 0 && !slices.Contains(t.Tiers, n) {
			continue
		}
		qos = append(qos, string(n))
		if tier := cfg.Tiers[n]; !tier.Preemptible && !tier.BorrowOnly {
			def = string(n)
		}
	}
	if def == "" && len(qos) > 0 {
		def = qos[len(qos)-1]
	}
	return qos, def
}
