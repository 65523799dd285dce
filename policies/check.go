package policies

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Check runs every rule on cfg and its plan. base, when not nil, is the configuration
// the change starts from: findings about a sum (a flavor's quota beyond its pools)
// are then also reported at each quota the change raised.
func Check(cfg *schema.Config, plan *planner.Plan, base *schema.Config) schema.Findings {
	var out schema.Findings
	out = append(out, checkNames(cfg)...)
	out = append(out, checkOwners(cfg)...)
	out = append(out, checkFileScope(cfg)...)
	out = append(out, checkObjectSizes(cfg)...)
	out = append(out, checkNamespaces(cfg)...)
	out = append(out, checkMachineTypes(cfg)...)
	out = append(out, checkReferences(cfg)...)
	out = append(out, checkCohortCycles(cfg)...)
	out = append(out, checkTiers(cfg)...)
	out = append(out, checkTopology(cfg)...)
	out = append(out, checkSlurm(cfg)...)
	out = append(out, checkCapacity(cfg, plan, base)...)
	out = append(out, checkBudgets(cfg, plan)...)
	out = append(out, checkCUE(cfg)...)
	return out.Sort()
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func checkNames(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	check := func(kind, name string, pos schema.Pos, maxLen int) {
		if !dnsLabel.MatchString(name) || len(name) > maxLen {
			out = append(out, finding(RuleNameFormat, pos, fmt.Sprintf(
				"%s name %q must be a lowercase DNS label of at most %d characters (a-z, 0-9, '-'; starting and ending with a letter or digit)", kind, name, maxLen)))
		}
	}
	for n, c := range cfg.Clusters {
		check("cluster", string(n), c.Pos, 63)
	}
	for n, p := range cfg.Pools {
		// Nodes are named <pool>-<index>: leave room for the index.
		check("pool", string(n), p.Pos, 56)
		check("flavor", string(p.Flavor), cfg.Pos("pools", string(n), "flavor"), 63)
	}
	for n, t := range cfg.Tiers {
		check("tier", string(n), t.Pos, 63)
		// A tier is a PriorityClass, and Kubernetes keeps system- for its own.
		if strings.HasPrefix(string(n), "system-") {
			out = append(out, finding(RuleNameFormat, t.Pos, fmt.Sprintf(
				"tier name %q starts with system-, which Kubernetes reserves for its own PriorityClasses", n)))
		}
	}
	for n, c := range cfg.Cohorts {
		check("cohort", string(n), c.Pos, 63)
	}
	for n, t := range cfg.Teams {
		check("team", string(n), t.Pos, 63)
	}
	return out
}

// IsOwner reports whether s is an owner or approver: @user (a GitHub login: letters,
// digits and single inner hyphens, at most 39 characters, with the _suffix
// of an enterprise-managed user) or @org/team (a team's slug, at most 100).
// Owners are the owners of render --codeowners' lines and the mentions of the
// plan's approvals, so nothing else is taken: GitHub skips a CODEOWNERS line
// it cannot parse, and a value such as "x; @acme/everyone; y" would mention
// whom it names. An email address, which CODEOWNERS takes, mentions no one.
func IsOwner(s string) bool {
	name, ok := strings.CutPrefix(s, "@")
	if !ok {
		return false
	}
	if org, team, ok := strings.Cut(name, "/"); ok {
		return len(org) <= 39 && githubLogin.MatchString(org) && len(team) <= 100 && githubTeam.MatchString(team)
	}
	user, suffix, emu := strings.Cut(name, "_")
	return len(user) <= 39 && githubLogin.MatchString(user) && (!emu || emuSuffix.MatchString(suffix))
}

var (
	// githubLogin is a user's or an organisation's name.
	githubLogin = regexp.MustCompile(`^[A-Za-z0-9](-?[A-Za-z0-9])*$`)
	// githubTeam is a team's slug.
	githubTeam = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	// emuSuffix is the short code of an enterprise-managed user's name.
	emuSuffix = regexp.MustCompile(`^[A-Za-z0-9]{1,39}$`)
)

// checkOwners: the teams' owners and the policy's approvers are who approves a
// change, and the owners of render --codeowners' lines, each at its value.
func checkOwners(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	check := func(what string, owners []string, path ...string) {
		for i, o := range owners {
			if !IsOwner(o) {
				out = append(out, finding(RuleNameFormat, cfg.Pos(append(path, strconv.Itoa(i))...), fmt.Sprintf(
					"%s[%d]: %q is not an owner: want @user or @org/team (GitHub's names)", what, i, o)))
			}
		}
	}
	for _, n := range cfg.TeamNames() {
		check(fmt.Sprintf("team %s: owners", n), cfg.Teams[n].Owners, "teams", string(n), "owners")
	}
	check("policy: financeApprovers", cfg.Policy.FinanceApprovers, "policy", "financeApprovers")
	check("policy: platformApprovers", cfg.Policy.PlatformApprovers, "policy", "platformApprovers")
	return out
}

// The bounds of checkObjectSizes.
const (
	// MaxCostCenterBytes: a cost centre is a finance code; it is written to
	// an annotation (whose total the API server bounds at 256 KiB) and to
	// every report.
	MaxCostCenterBytes = 256
	// MaxDescriptionBytes: Kueue's WorkloadPriorityClass takes 2048.
	MaxDescriptionBytes = 2048
	// MaxOwners of a team and approvers of the policy: one annotation, and
	// every CODEOWNERS line; name a GitHub team (@org/team) for more people.
	MaxOwners = 64
	// MaxNamespaces of a team: one annotation of the Team.
	MaxNamespaces = 256
	// MaxTeamFlavors: the flavors of a team's quota are one resource group
	// of its Kueue ClusterQueue, which takes 64.
	MaxTeamFlavors = 64
)

// checkObjectSizes: free text and lists of the repository fit the objects they
// are written to. Without a bound, a repository that validates clean is
// refused by the API server at apply (an annotation over 256 KiB, a Kueue
// description over 2048 bytes, a ClusterQueue of more than 64 flavors).
func checkObjectSizes(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	over := func(what string, n, limit int, unit string, path ...string) {
		if n > limit {
			out = append(out, finding(RuleObjectSize, cfg.Pos(path...), fmt.Sprintf("%s: %d %s, at most %d are allowed", what, n, unit, limit)))
		}
	}
	for _, n := range cfg.TeamNames() {
		t := cfg.Teams[n]
		over(fmt.Sprintf("team %s: costCenter", n), len(t.CostCenter), MaxCostCenterBytes, "bytes", "teams", string(n), "costCenter")
		over(fmt.Sprintf("team %s: owners", n), len(t.Owners), MaxOwners, "owners (name a GitHub team, @org/team, for more people)", "teams", string(n), "owners")
		over(fmt.Sprintf("team %s: namespaces", n), len(t.Namespaces), MaxNamespaces, "namespaces", "teams", string(n), "namespaces")
		over(fmt.Sprintf("team %s: quota", n), len(t.Quota), MaxTeamFlavors, "flavors (Kueue's ClusterQueue takes 64)", "teams", string(n), "quota")
	}
	for _, n := range cfg.TierNames() {
		over(fmt.Sprintf("tier %s: description", n), len(cfg.Tiers[n].Description), MaxDescriptionBytes, "bytes (Kueue's WorkloadPriorityClass takes 2048)", "tiers", string(n), "description")
	}
	over("policy: financeApprovers", len(cfg.Policy.FinanceApprovers), MaxOwners, "approvers (name a GitHub team, @org/team, for more people)", "policy", "financeApprovers")
	over("policy: platformApprovers", len(cfg.Policy.PlatformApprovers), MaxOwners, "approvers (name a GitHub team, @org/team, for more people)", "policy", "platformApprovers")
	return out
}

// checkNamespaces: a namespace belongs to one team (its pods run on that
// team's quota), so no team may list another's namespace, or its name.
func checkNamespaces(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	owner := map[string]schema.Pos{}
	ownerTeam := map[string]schema.TeamName{}
	for _, n := range cfg.TeamNames() {
		owner[string(n)], ownerTeam[string(n)] = cfg.Teams[n].Pos, n
	}
	for _, n := range cfg.TeamNames() {
		for i, ns := range cfg.Teams[n].Namespaces {
			pos := cfg.Pos("teams", string(n), "namespaces", strconv.Itoa(i))
			if other, ok := ownerTeam[ns]; ok && other != n {
				out = append(out, schema.Finding{Severity: schema.SeverityError, Rule: schema.RuleConflict, Pos: pos, Related: []schema.Pos{owner[ns]},
					Message: fmt.Sprintf("team %s: namespaces[%d]: namespace %s already belongs to team %s (also set at %s); a namespace belongs to one team", n, i, ns, other, owner[ns])})
				continue
			}
			owner[ns], ownerTeam[ns] = pos, n
		}
	}
	return out
}

// checkMachineTypes: the Terraform of a gke or eks pool names its machine
// (instance) type, which the schema leaves optional for onprem and kwok.
func checkMachineTypes(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		c := cfg.Clusters[p.Cluster]
		if c == nil || p.MachineType != "" || (c.Provider != schema.ProviderGKE && c.Provider != schema.ProviderEKS) {
			continue
		}
		out = append(out, schema.Finding{Severity: schema.SeverityError, Rule: schema.RuleRequired, Pos: p.Pos,
			Message: fmt.Sprintf("pools.%s: required field \"machineType\" is missing: the pool is in %s cluster %s, whose node pools are rendered with their machine type (e.g. a3-highgpu-8g, p5.48xlarge)", n, c.Provider, c.Name)})
	}
	return out
}

func checkReferences(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		if _, ok := cfg.Clusters[p.Cluster]; !ok {
			out = append(out, finding(RuleUnknownCluster, cfg.Pos("pools", string(n), "cluster"),
				fmt.Sprintf("pool %s: unknown cluster %q%s", n, p.Cluster, suggest(string(p.Cluster), cfg.ClusterNames()))))
		}
	}
	for _, n := range cfg.CohortNames() {
		c := cfg.Cohorts[n]
		if c.Parent == "" {
			continue
		}
		if _, ok := cfg.Cohorts[c.Parent]; !ok {
			out = append(out, finding(RuleUnknownCohort, cfg.Pos("cohorts", string(n), "parent"),
				fmt.Sprintf("cohort %s: unknown parent cohort %q%s", n, c.Parent, suggest(string(c.Parent), cfg.CohortNames()))))
		}
	}
	carried := map[schema.Flavor]bool{}
	for _, p := range cfg.Pools {
		carried[p.Flavor] = true
	}
	var flavors []schema.Flavor
	for f := range carried {
		flavors = append(flavors, f)
	}
	slices.Sort(flavors)
	for _, n := range cfg.TeamNames() {
		t := cfg.Teams[n]
		if t.Cohort != "" {
			if _, ok := cfg.Cohorts[t.Cohort]; !ok {
				out = append(out, finding(RuleUnknownCohort, cfg.Pos("teams", string(n), "cohort"),
					fmt.Sprintf("team %s: unknown cohort %q%s", n, t.Cohort, suggest(string(t.Cohort), cfg.CohortNames()))))
			}
		}
		for i, tier := range t.Tiers {
			if _, ok := cfg.Tiers[tier]; !ok {
				pos := cfg.Pos("teams", string(n), "tiers", strconv.Itoa(i))
				out = append(out, finding(RuleUnknownTier, pos,
					fmt.Sprintf("team %s: tiers[%d]: unknown tier %q%s", n, i, tier, suggest(string(tier), cfg.TierNames()))))
			}
		}
		for f := range t.Quota {
			if !carried[f] {
				out = append(out, finding(RuleUnknownFlavor, cfg.Pos("teams", string(n), "quota", string(f)),
					fmt.Sprintf("team %s: no pool carries flavor %q%s", n, f, suggest(string(f), flavors))))
			}
		}
	}
	return out
}

func suggest[S ~string](name string, candidates []S) string {
	var c []string
	for _, s := range candidates {
		c = append(c, string(s))
	}
	if best := schema.Closest(name, c); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(c) == 0 {
		return " (none is declared)"
	}
	return ""
}

func checkCohortCycles(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	reported := map[schema.CohortName]bool{}
	for _, start := range cfg.CohortNames() {
		seen := map[schema.CohortName]int{}
		var chain []schema.CohortName
		for n := start; n != ""; {
			if i, ok := seen[n]; ok {
				cycle := chain[i:]
				if !reported[slices.Min(cycle)] {
					reported[slices.Min(cycle)] = true
					names := make([]string, 0, len(cycle)+1)
					for _, c := range cycle {
						names = append(names, string(c))
					}
					names = append(names, string(cycle[0]))
					var related []schema.Pos
					for _, c := range cycle[1:] {
						related = append(related, cfg.Pos("cohorts", string(c), "parent"))
					}
					first := slices.Min(cycle)
					out = append(out, finding(RuleCohortCycle, cfg.Pos("cohorts", string(first), "parent"),
						fmt.Sprintf("cohort parents form a cycle: %s", strings.Join(names, " -> ")), related...))
				}
				break
			}
			c, ok := cfg.Cohorts[n]
			if !ok {
				break
			}
			seen[n] = len(chain)
			chain = append(chain, n)
			n = c.Parent
		}
	}
	return out
}

func checkTiers(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	by := map[int64][]schema.TierName{}
	for _, n := range cfg.TierNames() {
		by[cfg.Tiers[n].Priority] = append(by[cfg.Tiers[n].Priority], n)
	}
	for _, n := range cfg.TierNames() {
		same := by[cfg.Tiers[n].Priority]
		if len(same) < 2 {
			continue
		}
		slices.Sort(same)
		for _, other := range same {
			if other == n {
				continue
			}
			out = append(out, finding(RuleTierPriority, cfg.Pos("tiers", string(n), "priority"),
				fmt.Sprintf("tiers %s and %s both have priority %d; give each tier its own", n, other, cfg.Tiers[n].Priority),
				cfg.Pos("tiers", string(other), "priority")))
		}
	}
	return out
}

func checkTopology(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		if p.Topology == nil {
			continue
		}
		if len(p.Topology.Levels) > schema.MaxTopologyLevels {
			out = append(out, finding(RuleTopologyLevels, cfg.Pos("pools", string(n), "topology", "levels"),
				fmt.Sprintf("pool %s: the topology has %d levels, at most %d are allowed (Kueue's Topology takes %d)", n, len(p.Topology.Levels), schema.MaxTopologyLevels, schema.MaxTopologyLevels)))
		}
		seen := map[string]bool{}
		for _, l := range p.Topology.Levels {
			if seen[l] {
				out = append(out, finding(RuleTopologyLevels, cfg.Pos("pools", string(n), "topology", "levels"),
					fmt.Sprintf("pool %s: topology level %q is listed twice", n, l)))
			}
			seen[l] = true
			if !dnsLabel.MatchString(l) {
				out = append(out, finding(RuleTopologyLevels, cfg.Pos("pools", string(n), "topology", "levels"),
					fmt.Sprintf("pool %s: topology level %q must be a lowercase DNS label (it becomes a node label)", n, l)))
			}
		}
	}
	// domainSize keys and the rack/block shorthands must name declared levels; the
	// loader keeps only sizes of declared levels, so look at what the user wrote.
	for _, n := range cfg.PoolNames() {
		p := cfg.Pools[n]
		if p.Topology == nil {
			continue
		}
		for _, f := range []struct{ field, level string }{{"hostsPerRack", "rack"}, {"racksPerBlock", "block"}} {
			if pos := cfg.Index.All("pools", string(n), "topology", f.field); len(pos) > 0 && !slices.Contains(p.Topology.Levels, f.level) {
				out = append(out, finding(RuleTopologyLevels, pos[0],
					fmt.Sprintf("pool %s: %s is set but the topology has no level %q", n, f.field, f.level)))
			}
		}
		for _, l := range p.Topology.UnknownSizes {
			out = append(out, finding(RuleTopologyLevels, cfg.Pos("pools", string(n), "topology", "domainSize", l),
				fmt.Sprintf("pool %s: domainSize %q names no level of the topology (levels: %s)", n, l, strings.Join(p.Topology.Levels, ", "))))
		}
	}
	return out
}

func checkCapacity(cfg *schema.Config, plan *planner.Plan, base *schema.Config) schema.Findings {
	var out schema.Findings
	for _, fp := range plan.Flavors {
		if len(fp.Pools) == 0 || fp.NominalGPUs == 0 {
			continue
		}
		var poolDesc []string
		var maxPos []schema.Pos
		for _, pn := range fp.Pools {
			p := cfg.Pools[pn]
			poolDesc = append(poolDesc, fmt.Sprintf("%s %d×%d", pn, p.MaxNodes, p.GPUsPerNode))
			maxPos = append(maxPos, cfg.Pos("pools", string(pn), "nodes", "max"))
		}
		var rule, msg string
		switch {
		case fp.NominalGPUs > fp.MaxGPUs:
			rule = RuleFlavorCapacity
			msg = fmt.Sprintf("teams' nominal quota of %s is %d GPUs (%s), but its pools reach at most %d at nodes.max (%s): lower a quota or raise nodes.max",
				fp.Flavor, fp.NominalGPUs, topTeams(cfg, fp.Flavor), fp.MaxGPUs, strings.Join(poolDesc, ", "))
		case fp.UnplacedGPUs > 0:
			rule = RuleFlavorHeadroom
			msg = fmt.Sprintf("teams' nominal quota of %s is %d GPUs; its pools (%s) carry only %d of it with their headroom and spare nodes at nodes.max",
				fp.Flavor, fp.NominalGPUs, strings.Join(poolDesc, ", "), fp.NominalGPUs-fp.UnplacedGPUs)
		default:
			continue
		}
		out = append(out, finding(rule, maxPos[0], msg, maxPos[1:]...))
		// With a base, the quotas this change raised are where its author acts.
		if base != nil {
			for _, tn := range cfg.TeamNames() {
				q := cfg.Teams[tn].Quota[fp.Flavor].Nominal
				var before int64
				if bt := base.Teams[tn]; bt != nil {
					before = bt.Quota[fp.Flavor].Nominal
				}
				if q > before {
					out = append(out, finding(rule, cfg.Pos("teams", string(tn), "quota", string(fp.Flavor), "nominal"),
						fmt.Sprintf("this change raises %s's %s quota from %d to %d: %s", tn, fp.Flavor, before, q, msg), maxPos...))
				}
			}
		}
	}
	return out
}

// topTeams names the largest quotas of flavor f, for messages.
func topTeams(cfg *schema.Config, f schema.Flavor) string {
	type tq struct {
		name schema.TeamName
		n    int64
	}
	var all []tq
	for _, n := range cfg.TeamNames() {
		if q := cfg.Teams[n].Quota[f].Nominal; q > 0 {
			all = append(all, tq{n, q})
		}
	}
	slices.SortStableFunc(all, func(a, b tq) int { return int(b.n - a.n) })
	var parts []string
	for i, t := range all {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(all)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", t.name, t.n))
	}
	return strings.Join(parts, ", ")
}

func checkBudgets(cfg *schema.Config, plan *planner.Plan) schema.Findings {
	var out schema.Findings
	for _, tp := range plan.Teams {
		t := cfg.Teams[tp.Team]
		if t == nil || t.BudgetMonthlyUSD == nil {
			continue
		}
		if tp.MonthlyUSD.Cmp(*t.BudgetMonthlyUSD) > 0 {
			out = append(out, finding(RuleTeamBudget, cfg.Pos("teams", string(tp.Team), "budget", "monthlyUSD"),
				fmt.Sprintf("team %s costs %s a month, over its budget of %s by %s", tp.Team,
					quantity.USD(tp.MonthlyUSD), quantity.USD(*t.BudgetMonthlyUSD), quantity.USD(tp.MonthlyUSD.Sub(*t.BudgetMonthlyUSD))),
				cfg.Pos("teams", string(tp.Team), "quota")))
		}
	}
	return out
}

// CheckCodeowners returns what a GitHub CODEOWNERS file of cfg needs beyond
// Check: the policy's approvers, who own every file (the platform's) and the
// files that can move cost (with finance's). Without them the file would leave
// those files to no one, or to a name the user never wrote.
func CheckCodeowners(cfg *schema.Config) schema.Findings {
	var out schema.Findings
	for _, a := range []struct {
		field string
		who   []string
		owns  string
	}{
		{"financeApprovers", cfg.Policy.FinanceApprovers, "with the platform approvers, of the files that can move cost (pools and policy)"},
		{"platformApprovers", cfg.Policy.PlatformApprovers, "of every file"},
	} {
		if len(a.who) == 0 {
			out = append(out, schema.Finding{Severity: schema.SeverityError, Rule: schema.RuleRequired, Pos: cfg.Pos("policy"),
				Message: fmt.Sprintf("policy: required field %q is missing: render --codeowners makes them the owners %s (e.g. %s: [\"@org/team\"])", a.field, a.owns, a.field)})
		}
	}
	return out
}
