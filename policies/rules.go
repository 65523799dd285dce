package policies

import (
	"slices"

	"github.com/allot-dev/allot/schema"
)

// Rule describes one policy rule.
type Rule struct {
	Name        string
	Severity    schema.Severity
	Description string
}

// Rule names; they are stable: CI configurations and suppressions refer to them.
const (
	RuleNameFormat       = "name-format"
	RuleUnknownCluster   = "unknown-cluster"
	RuleUnknownFlavor    = "unknown-flavor"
	RuleUnknownCohort    = "unknown-cohort"
	RuleCohortCycle      = "cohort-cycle"
	RuleUnknownTier      = "unknown-tier"
	RuleTierPriority     = "tier-priority-unique"
	RuleFlavorCapacity   = "flavor-capacity"
	RuleFlavorHeadroom   = "flavor-headroom"
	RuleTeamBudget       = "team-budget"
	RuleTopologyLevels   = "topology-levels"
	RuleFinanceApproval  = "finance-approval"
	RulePoolNodesRange   = "pool-nodes-range"
	RuleCommittedPrice   = "pool-committed-price"
	RuleCommittedAboveMx = "pool-committed-above-max"
	RuleTeamCostCenter   = "team-cost-center"
	RuleTeamOwners       = "team-owners"
	RuleLimitsNoCohort   = "quota-limits-without-cohort"
	RuleLendingNominal   = "quota-lending-above-nominal"
	RuleTeamNoQuota      = "team-empty-quota"
	RuleObjectSize       = "object-size"
	RuleSlurmProvider    = "slurm-provider"
	RuleSlurmPool        = "slurm-pool"
	RuleSlurmNames       = "slurm-names"
	RuleSlurmBorrowing   = "slurm-borrowing"
	RuleSlurmLending     = "slurm-lending"
	RuleSlurmTopology    = "slurm-topology"
	RuleSlurmBorrowOnly  = "slurm-borrow-only"
	RuleSlurmUntypedGPUs = "slurm-untyped-gpus"
)

// Rules lists every rule, by name.
var Rules = []Rule{
	{RuleNameFormat, schema.SeverityError, "names of clusters, pools, tiers, cohorts, teams and flavors are lowercase DNS labels (they become namespaces, node names and labels); owners and approvers are @user or @org/team (GitHub's names: they are CODEOWNERS owners and the plan's mentions)"},
	{RuleUnknownCluster, schema.SeverityError, "a pool names a cluster that is not declared"},
	{RuleUnknownFlavor, schema.SeverityError, "a team asks for a flavor no pool carries"},
	{RuleUnknownCohort, schema.SeverityError, "a team or cohort names a cohort that is not declared"},
	{RuleCohortCycle, schema.SeverityError, "cohort parents form a cycle"},
	{RuleUnknownTier, schema.SeverityError, "a team names a tier that is not declared"},
	{RuleTierPriority, schema.SeverityError, "two tiers have one priority, so their order is undefined"},
	{RuleFlavorCapacity, schema.SeverityError, "the teams' nominal quota of a flavor exceeds the GPUs its pools have at nodes.max"},
	{RuleFlavorHeadroom, schema.SeverityWarning, "a flavor's pools reach its nominal quota at nodes.max only without their headroom or spare nodes"},
	{RuleTeamBudget, schema.SeverityError, "a team's monthly cost exceeds its budget"},
	{RuleTopologyLevels, schema.SeverityError, "topology levels are unique, at most 16, and sizes name declared levels"},
	{RuleFinanceApproval, schema.SeverityWarning, "a change whose monthly cost, or monthly cost ceiling (the pools at their repair and burst maxima), grows by more than policy.financeApprovalAboveMonthlyUSD needs finance's approval"},
	{RulePoolNodesRange, schema.SeverityError, "a pool's nodes.min is above its nodes.max"},
	{RuleCommittedPrice, schema.SeverityError, "a pool with committed nodes has no committedPerNodeHour price"},
	{RuleCommittedAboveMx, schema.SeverityWarning, "a pool commits to more nodes than its nodes.max: some are paid for and never used"},
	{RuleTeamCostCenter, schema.SeverityWarning, "a team has no costCenter, so finance cannot charge its cost back"},
	{RuleTeamOwners, schema.SeverityWarning, "a team has no owners to approve changes to its quota"},
	{RuleLimitsNoCohort, schema.SeverityWarning, "a team sets borrowing or lending limits but belongs to no cohort, so they have no effect"},
	{RuleLendingNominal, schema.SeverityWarning, "a lendingLimit above nominal has no effect beyond nominal"},
	{RuleTeamNoQuota, schema.SeverityWarning, "a team has no quota of any flavor"},
	{RuleSlurmProvider, schema.SeverityError, "a Slurm cluster's provider is onprem: allot does not provision Slurm nodes in a cloud"},
	{RuleSlurmPool, schema.SeverityError, "a pool sets slurm names but its cluster's scheduler is kubernetes"},
	{RuleSlurmNames, schema.SeverityError, "what becomes a Slurm name is one: partitions, node prefixes, GRES types, and the names of teams, cohorts (accounts) and tiers (QOS) in a repository with a Slurm cluster start with a letter (a-z, 0-9, '_', '-', at most 63); no two pools of a cluster name one node; two flavors of a cluster have different GRES types; no team or cohort is named root, no tier normal (Slurm's own), no team and cohort share a name"},
	{RuleSlurmBorrowing, schema.SeverityWarning, "Slurm has no borrowing: a team of a cohort gets nominal + borrowingLimit (or its cohort's total) as its account's GrpTRES under its cohort's account, which caps the cohort at its nominal sum; lent GPUs are not reclaimed except by preempting preemptible tiers"},
	{RuleSlurmLending, schema.SeverityWarning, "Slurm cannot keep part of a quota from the cohort: a lendingLimit is not enforced in a Slurm cluster"},
	{RuleSlurmTopology, schema.SeverityWarning, "a Slurm pool's topology becomes topology.conf switches: Slurm prefers the fewest switches, and requires them only for a job asking --switches"},
	{RuleSlurmBorrowOnly, schema.SeverityWarning, "Slurm counts every job against its account's GrpTRES: a borrowOnly tier's jobs take the team's quota, and are only requeued by higher tiers"},
	{RuleSlurmUntypedGPUs, schema.SeverityWarning, "a team with quota in a Slurm cluster of several flavors: a job asking for untyped GPUs counts only against gres/gpu (the sum of the team's limits), so it may run on any flavor beyond the team's quota of it"},
	{RuleObjectSize, schema.SeverityError, "what the repository writes into one object fits it: a costCenter of at most 256 bytes, a tier's description of at most 2048, at most 64 owners or approvers, 256 namespaces and 64 flavors a team"},
}

// RuleByName returns the rule called name.
func RuleByName(name string) (Rule, bool) {
	i := slices.IndexFunc(Rules, func(r Rule) bool { return r.Name == name })
	if i < 0 {
		return Rule{}, false
	}
	return Rules[i], true
}

func finding(rule string, pos schema.Pos, msg string, related ...schema.Pos) schema.Finding {
	r, _ := RuleByName(rule)
	return schema.Finding{Severity: r.Severity, Rule: rule, Pos: pos, Message: msg, Related: related}
}
