package policies

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Approvals returns who must approve the change from base to head, and why:
//   - finance, when the monthly cost, or the ceiling the pools' repair and
//     burst envelopes allow, grows by more than the base's
//     policy.financeApprovalAboveMonthlyUSD, or when the change edits the policy;
//   - a team's owners, when its quota or settings change (the base's owners, so a
//     change cannot approve itself by editing them; the platform approvers for a
//     team the base does not have);
//   - the platform approvers, when clusters, pools, tiers or cohorts change.
//
// Settings come from the base: a change cannot lower the bar it is measured by.
func Approvals(base, head *schema.Config, diff *planner.Diff) []planner.Approval {
	policy := base.Policy
	var out []planner.Approval
	add := func(role planner.ApprovalRole, who []string, why string) {
		out = append(out, planner.Approval{Who: strings.Join(who, ", "), Why: why, Role: role})
	}
	threshold := policy.FinanceApprovalAboveMonthlyUSD
	if why, grows := costGrowth(diff); grows.Cmp(threshold) > 0 {
		if threshold.IsZero() {
			why += ", and every increase needs finance"
		} else {
			why += fmt.Sprintf(", above the %s threshold", quantity.USD(threshold))
		}
		add(planner.RoleFinance, financeApprovers(policy), why)
	}
	if !reflect.DeepEqual(base.Policy, head.Policy) {
		add(planner.RoleFinance, financeApprovers(policy), "the change edits the organisation's policy")
	}

	byTeam := map[schema.TeamName][]string{}
	for _, q := range diff.Quotas {
		byTeam[q.Team] = append(byTeam[q.Team], fmt.Sprintf("%s %d → %d", q.Flavor, q.NominalBefore, q.NominalAfter))
	}
	for tn, t := range head.Teams {
		if b := base.Teams[tn]; b != nil && !bytes.Equal(canonical(teamSettings(*b)), canonical(teamSettings(*t))) {
			byTeam[tn] = append(byTeam[tn], "its settings (owners, cohort, tiers, limits, budget or cost centre)")
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(byTeam)) {
		owners := ownersOf(base, tn)
		add(planner.RoleTeam, owners, fmt.Sprintf("team %s changes: %s", tn, strings.Join(byTeam[tn], ", ")))
	}
	if kinds := platformChanges(base, head); len(kinds) > 0 {
		add(planner.RolePlatform, platformApprovers(policy), "the change edits "+strings.Join(kinds, ", "))
	}
	return out
}

// costGrowth is how much more the change lets the manager spend a month: the
// larger of the plan's cost increase and its ceiling's. A ceiling raised by a
// new or wider burst or repair is spent later without another review, so
// finance weighs it now. why names the figure that counts.
func costGrowth(diff *planner.Diff) (why string, grows quantity.Decimal) {
	if diff.CeilingDelta.Cmp(diff.Delta) > 0 {
		planned := "planned cost " + quantity.SignedUSD(diff.Delta)
		if diff.Delta.Round(2).IsZero() {
			planned = "planned cost unchanged"
		}
		return fmt.Sprintf("monthly cost ceiling %s (the pools at their repair and burst maxima; %s)",
			quantity.SignedUSD(diff.CeilingDelta), planned), diff.CeilingDelta
	}
	return fmt.Sprintf("monthly cost %s", quantity.SignedUSD(diff.Delta)), diff.Delta
}

// ownersOf is who approves a change to team tn: its owners in the base, or
// the platform where the base names none (a new team: its file is not its
// owners' in the CODEOWNERS GitHub enforces, which is the base's). Who the
// head names is never an approver, nor a mention of the plan.
func ownersOf(base *schema.Config, tn schema.TeamName) []string {
	if t := base.Teams[tn]; t != nil {
		if o := owners(t.Owners); len(o) > 0 {
			return o
		}
	}
	return platformApprovers(base.Policy)
}

// financeApprovers and platformApprovers are the policy's, or the role's name
// where the policy names none.
func financeApprovers(p schema.Policy) []string { return orRole(owners(p.FinanceApprovers), "finance") }
func platformApprovers(p schema.Policy) []string {
	return orRole(owners(p.PlatformApprovers), "platform")
}

// owners keeps what IsOwner takes: a base validated before it took less is
// read as if those values were not written.
func owners(who []string) []string {
	var out []string
	for _, o := range who {
		if IsOwner(o) {
			out = append(out, o)
		}
	}
	return out
}

func orRole(who []string, role string) []string {
	if len(who) == 0 {
		return []string{role}
	}
	return who
}

// platformChanges names the kinds of platform-owned objects that differ, ignoring
// source positions.
func platformChanges(base, head *schema.Config) []string {
	var kinds []string
	if !sameObjects(base.Clusters, head.Clusters, func(c schema.Cluster) schema.Cluster { c.Pos = schema.Pos{}; return c }) {
		kinds = append(kinds, "clusters")
	}
	if !sameObjects(base.Pools, head.Pools, func(p schema.Pool) schema.Pool { p.Pos = schema.Pos{}; return p }) {
		kinds = append(kinds, "pools")
	}
	if !sameObjects(base.Tiers, head.Tiers, func(t schema.Tier) schema.Tier { t.Pos = schema.Pos{}; return t }) {
		kinds = append(kinds, "tiers")
	}
	if !sameObjects(base.Cohorts, head.Cohorts, func(c schema.Cohort) schema.Cohort { c.Pos = schema.Pos{}; return c }) {
		kinds = append(kinds, "cohorts")
	}
	return kinds
}

func sameObjects[K comparable, V any](a, b map[K]*V, strip func(V) V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !bytes.Equal(canonical(strip(*va)), canonical(strip(*vb))) {
			return false
		}
	}
	return true
}

// canonical encodes v for comparison: decimals by value, pointers by what they point at.
func canonical(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// teamSettings is a team without its position and nominal quotas (reported apart).
func teamSettings(t schema.Team) schema.Team {
	t.Pos = schema.Pos{}
	q := map[schema.Flavor]schema.Quota{}
	for f, v := range t.Quota {
		v.Nominal = 0
		q[f] = v
	}
	t.Quota = q
	return t
}
