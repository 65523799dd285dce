package kueue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Rules of the findings: each names a rule of allot that Kueue cannot say.
const (
	RuleTierPreemption = "kueue-tier-preemption"
	RuleBorrowOnly     = "kueue-borrow-only"
	RuleTeamTiers      = "kueue-team-tiers"
	RuleWeight         = "kueue-weight"
	RuleTopology       = "kueue-topology"
)

// Findings returns, at their CUE line, the rules of cfg that the rendered
// Kueue objects do not enforce as allot's scheduler does, each saying what
// Kueue will do instead. They are warnings: the objects are still the
// closest Kueue can say (docs/kueue.md lists them all).
func Findings(cfg *schema.Config) schema.Findings {
	var fs schema.Findings
	warn := func(rule string, pos schema.Pos, kind, name, format string, args ...any) {
		fs = append(fs, cfg.Approximation(rule, pos, kind, name, fmt.Sprintf(format, args...)))
	}
	for _, name := range cfg.TierNames() {
		if t := cfg.Tiers[name]; t.BorrowOnly {
			warn(RuleBorrowOnly, cfg.Pos("tiers", string(name), "borrowOnly"), "tier", string(name),
				"Kueue cannot count tier %s as borrowed inside a team's nominal quota: there its workloads are not reclaimable by the cohort", name)
		}
	}
	for _, name := range cfg.TeamNames() {
		t := cfg.Teams[name]
		if w := withinTeam(cfg, t); w.spared != "" {
			warn(RuleTierPreemption, cfg.Pos("teams", string(name), "tiers"), "team", string(name),
				"Kueue preempts every lower priority within a ClusterQueue or none: tier %s of team %s is not preemptible, so its higher tiers will not preempt %s either",
				w.spared, name, strings.Join(w.lost, ", "))
		}
		if len(t.Tiers) > 0 {
			warn(RuleTeamTiers, cfg.Pos("teams", string(name), "tiers"), "team", string(name),
				"Kueue's LocalQueues accept every WorkloadPriorityClass: team %s's restriction to tiers %s is not enforced",
				name, joinNames(t.Tiers))
		}
		if !t.Weight.IsZero() && t.Weight.Cmp(quantity.MustParse("1")) != 0 {
			warn(RuleWeight, cfg.Pos("teams", string(name), "weight"), "team", string(name),
				"team %s's weight %s is rendered as its ClusterQueue's fairSharing.weight: Kueue orders teams by it only with fair sharing on in its Configuration, whose preemption differs from allot's", name, t.Weight)
		}
	}
	for _, cluster := range cfg.ClusterNames() {
		for _, f := range clusterFlavors(cfg, cluster) {
			if _, ok := sharedLevels(cfg, cluster, f); ok {
				continue
			}
			for _, p := range cfg.PoolsOf(f) {
				if p.Cluster == cluster {
					warn(RuleTopology, cfg.Pos("pools", string(p.Name), "topology"), "pool", string(p.Name),
						"a Kueue ResourceFlavor names one Topology: the pools of flavor %s in cluster %s lay their nodes out differently, so its flavor gets none (no topology-aware placement there)", f, cluster)
				}
			}
		}
	}
	return fs
}

// preemption is how a team's tiers preempt each other under Kueue.
type preemption struct {
	// lowerPriority: withinClusterQueue LowerPriority says allot's rule exactly
	// (every tier with a higher one above it is preemptible).
	lowerPriority bool
	// spared is a non-preemptible tier with a higher one above it and lost the
	// preemptible tiers allot would let higher tiers preempt, when Kueue cannot
	// say both (then the queue preempts nothing within it).
	spared string
	lost   []string
}

// withinTeam decides withinClusterQueue for team t: allot lets a higher tier
// preempt a lower one only if the lower one is preemptible; Kueue's
// LowerPriority preempts any lower priority. LowerPriority is exact when every
// tier below the team's highest is preemptible; Never is exact when none of
// them is; otherwise Never, the safe side (no non-preemptible work is ever
// preempted), and the preemptible tiers it spares are reported.
func withinTeam(cfg *schema.Config, t *schema.Team) preemption {
	tiers := t.Tiers
	if len(tiers) == 0 {
		tiers = cfg.TierNames()
	}
	top := int64(0)
	for i, n := range tiers {
		if tr := cfg.Tiers[n]; tr != nil && (i == 0 || tr.Priority > top) {
			top = tr.Priority
		}
	}
	var preemptible, spared []string
	for _, n := range tiers {
		tr := cfg.Tiers[n]
		if tr == nil || tr.Priority == top {
			continue
		}
		if tr.Preemptible {
			preemptible = append(preemptible, string(n))
		} else {
			spared = append(spared, string(n))
		}
	}
	switch {
	case len(preemptible) == 0:
		return preemption{}
	case len(spared) == 0:
		return preemption{lowerPriority: true}
	}
	slices.Sort(spared)
	slices.Sort(preemptible)
	return preemption{spared: spared[0], lost: preemptible}
}

func joinNames(tiers []schema.TierName) string {
	s := make([]string, len(tiers))
	for i, t := range tiers {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
