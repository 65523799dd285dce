package policies

import (
	"fmt"
	"maps"
	"slices"

	"github.com/allot-dev/allot/schema"
)

// Slurm's own names that allot must not take: the QOS every cluster starts
// with, and the account every association tree hangs from.
const (
	slurmDefaultQOS  = "normal"
	slurmRootAccount = "root"
)

// SlurmFlavors returns the flavors the pools of Slurm cluster c carry, sorted.
func SlurmFlavors(cfg *schema.Config, c schema.ClusterName) []schema.Flavor {
	set := map[schema.Flavor]bool{}
	for _, p := range cfg.Pools {
		if p.Cluster == c {
			set[p.Flavor] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// checkSlurm: what a Slurm cluster cannot run is an error at its line; what
// Slurm only approximates (docs/slurm.md) is a warning saying how.
func checkSlurm(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		c := cfg.Clusters[p.Cluster]
		if c == nil || p.Slurm == nil {
			continue
		}
		if c.Scheduler != schema.SchedulerSlurm {
			out = append(out, finding(RuleSlurmPool, cfg.Pos("pools", string(n), "slurm"), fmt.Sprintf(
				"pool %s: slurm names nodes of a Slurm cluster, but cluster %s's scheduler is %s", n, c.Name, c.Scheduler)))
			continue
		}
		for _, v := range []struct{ field, value, from string }{
			{"partition", p.Slurm.Partition, "the pool's name"},
			{"nodePrefix", p.Slurm.NodePrefix, "the pool's name and '-'"},
			{"gresType", p.Slurm.GRESType, "the pool's flavor"},
		} {
			if !schema.SlurmName.MatchString(v.value) {
				out = append(out, finding(RuleSlurmNames, cfg.Pos("pools", string(n), "slurm", v.field), fmt.Sprintf(
					"pool %s: Slurm %s %q (%s) is not a Slurm name: set slurm.%s to lowercase letters, digits, '_' and '-', starting with a letter, at most 63 characters",
					n, v.field, v.value, v.from, v.field)))
			}
		}
		if p.Topology != nil {
			out = append(out, cfg.Approximation(RuleSlurmTopology, cfg.Pos("pools", string(n), "topology"), "pool", string(n), fmt.Sprintf(
				"pool %s: Slurm places by the switches of topology.conf (topology/tree), rendered from these levels: it prefers the fewest switches, and requires them only for a job that asks --switches", n)))
		}
	}
	for _, c := range cfg.ClustersRunBy(schema.SchedulerSlurm) {
		cl := cfg.Clusters[c]
		if cl.Provider != schema.ProviderOnPrem {
			out = append(out, finding(RuleSlurmProvider, cfg.Pos("clusters", string(c), "provider"), fmt.Sprintf(
				"cluster %s: allot does not provision a Slurm cluster's nodes (provider %s would render cloud node pools no slurmd joins): declare provider \"onprem\"", c, cl.Provider)))
		}
		out = append(out, checkSlurmNodeNames(cfg, c)...)
		out = append(out, checkSlurmGRESTypes(cfg, c)...)
		out = append(out, checkSlurmTeams(cfg, c)...)
	}
	if len(cfg.ClustersRunBy(schema.SchedulerSlurm)) > 0 {
		out = append(out, checkSlurmAccounts(cfg)...)
	}
	return out
}

// checkSlurmNodeNames: no two pools of cluster c name one node.
func checkSlurmNodeNames(cfg *schema.Config, c schema.ClusterName) schema.Findings {
	var out schema.Findings
	seen := map[string]schema.PoolName{}
	var total int64
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		if p.Cluster != c || p.Slurm == nil {
			continue
		}
		// Load bounds the fleet's nodes: enumerating their names stays bounded.
		if total += p.MaxNodes; total > schema.MaxFleetNodes {
			break
		}
		for i := range p.MaxNodes {
			name := p.Slurm.NodeName(i)
			if other, ok := seen[name]; ok && other != n {
				out = append(out, finding(RuleSlurmNames, cfg.Pos("pools", string(n), "slurm"), fmt.Sprintf(
					"pool %s: node %s of cluster %s is also a node of pool %s: give the pools different slurm.nodePrefix or firstIndex", n, name, c, other),
					cfg.Pools[other].Pos))
				break
			}
			seen[name] = n
		}
	}
	return out
}

// checkSlurmGRESTypes: a GPU limit is per GRES type, so two flavors of one
// cluster cannot share one.
func checkSlurmGRESTypes(cfg *schema.Config, c schema.ClusterName) schema.Findings {
	var out schema.Findings
	flavorOf := map[string]schema.Flavor{}
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		if p.Cluster != c || p.Slurm == nil {
			continue
		}
		if f, ok := flavorOf[p.Slurm.GRESType]; ok && f != p.Flavor {
			out = append(out, finding(RuleSlurmNames, cfg.Pos("pools", string(n), "flavor"), fmt.Sprintf(
				"pool %s: flavors %s and %s of cluster %s both have GRES type gpu:%s, so Slurm cannot limit them apart: set slurm.gresType", n, f, p.Flavor, c, p.Slurm.GRESType)))
			continue
		}
		flavorOf[p.Slurm.GRESType] = p.Flavor
	}
	return out
}

// checkSlurmTeams warns where a team's quota in cluster c is approximated.
func checkSlurmTeams(cfg *schema.Config, c schema.ClusterName) schema.Findings {
	var out schema.Findings
	flavors := SlurmFlavors(cfg, c)
	for _, n := range cfg.TeamNames() {
		t := cfg.Teams[n]
		var mine []schema.Flavor // the team's flavors of the cluster
		for _, f := range flavors {
			if _, ok := t.Quota[f]; ok {
				mine = append(mine, f)
			}
		}
		for _, f := range mine {
			q, path := t.Quota[f], []string{"teams", string(n), "quota", string(f)}
			if t.Cohort != "" {
				limit := "its cohort's total"
				if q.BorrowingLimit != nil {
					limit = fmt.Sprintf("nominal + borrowingLimit (%d)", q.Nominal+*q.BorrowingLimit)
				}
				out = append(out, cfg.Approximation(RuleSlurmBorrowing, cfg.Pos(append(path, "borrowingLimit")...), "team", string(n), fmt.Sprintf(
					"team %s: Slurm has no borrowing: in cluster %s the team's account may hold up to %s of %s (GrpTRES) under its cohort's account, which caps the cohort at its nominal sum; GPUs lent are not reclaimed from a borrower except by preempting its preemptible tiers",
					n, c, limit, f)))
			}
			if q.LendingLimit != nil {
				out = append(out, cfg.Approximation(RuleSlurmLending, cfg.Pos(append(path, "lendingLimit")...), "team", string(n), fmt.Sprintf(
					"team %s: Slurm cannot keep part of a quota from the cohort: in cluster %s the lendingLimit of %s is not enforced (the cohort's cap is shared first come)", n, c, f)))
			}
		}
		if len(mine) > 0 && len(flavors) > 1 {
			out = append(out, cfg.Approximation(RuleSlurmUntypedGPUs, cfg.Pos("teams", string(n), "quota"), "team", string(n), fmt.Sprintf(
				"team %s: a job of cluster %s asking for untyped GPUs (--gres=gpu:N) counts only against gres/gpu, the sum of the team's limits there: it may run on GPUs of any of %s, beyond the team's quota of that flavor; ask for gpu:<type>",
				n, c, joinFlavors(flavors))))
		}
	}
	return out
}

func joinFlavors(fs []schema.Flavor) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += ", "
		}
		s += string(f)
	}
	return s
}

// checkSlurmAccounts: teams and cohorts are accounts, tiers are QOS, in one
// namespace each; Slurm's own root account and normal QOS are not allot's.
func checkSlurmAccounts(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	name := func(kind, object, n string, pos schema.Pos) {
		if !schema.SlurmName.MatchString(n) {
			out = append(out, finding(RuleSlurmNames, pos, fmt.Sprintf(
				"%s %s: it names a Slurm %s, whose name starts with a letter; rename the %s", kind, n, object, kind)))
		}
	}
	for _, n := range cfg.TeamNames() {
		name("team", "account", string(n), cfg.Teams[n].Pos)
		if string(n) == slurmRootAccount {
			out = append(out, finding(RuleSlurmNames, cfg.Teams[n].Pos, "team root: Slurm's association tree hangs from its own account root; rename the team"))
		}
		if c, ok := cfg.Cohorts[schema.CohortName(n)]; ok {
			out = append(out, finding(RuleSlurmNames, cfg.Teams[n].Pos, fmt.Sprintf(
				"team %s: a cohort has this name, and both become Slurm accounts of one name; rename one", n), c.Pos))
		}
	}
	for _, n := range cfg.CohortNames() {
		name("cohort", "account", string(n), cfg.Cohorts[n].Pos)
		if string(n) == slurmRootAccount {
			out = append(out, finding(RuleSlurmNames, cfg.Cohorts[n].Pos, "cohort root: Slurm's association tree hangs from its own account root; rename the cohort"))
		}
	}
	for _, n := range cfg.TierNames() {
		t := cfg.Tiers[n]
		name("tier", "QOS", string(n), t.Pos)
		if string(n) == slurmDefaultQOS {
			out = append(out, finding(RuleSlurmNames, t.Pos, "tier normal: every Slurm cluster has its own QOS normal, which allot does not manage; rename the tier"))
		}
		if t.BorrowOnly {
			out = append(out, cfg.Approximation(RuleSlurmBorrowOnly, cfg.Pos("tiers", string(n), "borrowOnly"), "tier", string(n), fmt.Sprintf(
				"tier %s: Slurm counts every job against its account's GrpTRES: in a Slurm cluster a borrowOnly tier's jobs take the team's quota, and are only requeued by the higher tiers whose QOS preempt it", n)))
		}
	}
	return out
}
