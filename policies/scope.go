package policies

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/allot-dev/allot/schema"
)

// A Part of a capacity repository is a set of files that one set of people
// approves, told by the file's path alone, as render --codeowners writes it
// for GitHub: whatever a change to a file of a part sets, one approval of its
// owners suffices. So a file sets only what its owners own (checkFileScope).
type Part int

// The parts of a capacity repository.
const (
	// PartPlatform is every file but those below: the platform approvers'.
	// It sets clusters, tiers, cohorts, pools, policy and shared definitions
	// (#X, _x), and teams only in a repository without team files.
	PartPlatform Part = iota
	// PartCost is pools.cue, policy.cue and the files under pools/: the
	// platform's and finance's. They set pools and policy only.
	PartCost
	// PartTeam is teams/<team>.cue: the team's owners'. It sets teams.<team>
	// only.
	PartTeam
)

// PartOf returns the part the file (relative to the repository's root) is
// in, and for a team file its team.
func PartOf(file string) (Part, schema.TeamName) {
	dir, base := path.Split(file)
	switch {
	case dir == "teams/" && strings.HasSuffix(base, ".cue") && len(base) > len(".cue"):
		return PartTeam, schema.TeamName(strings.TrimSuffix(base, ".cue"))
	case file == "pools.cue" || file == "policy.cue" || strings.HasPrefix(file, "pools/"):
		return PartCost, ""
	}
	return PartPlatform, ""
}

// checkFileScope: every write of a file is within what the owners of its part
// own, judged on the file's own syntax, so that the CODEOWNERS file GitHub
// enforces asks the owners of every part a change sets. A write whose reach
// the file does not tell (a comprehension, a pattern constraint, a computed
// label) is refused where the parts it could reach have other owners.
func checkFileScope(cfg *schema.Config) schema.Findings {
	teamFiles := slices.ContainsFunc(cfg.Files, func(f string) bool { p, _ := PartOf(f); return p == PartTeam })
	var out schema.Findings
	for _, w := range cfg.Writes {
		if msg := outOfScope(w, teamFiles); msg != "" {
			out = append(out, schema.Finding{Severity: schema.SeverityError, Rule: schema.RuleFileScope, Pos: w.Pos, Message: msg})
		}
	}
	return out
}

// outOfScope says why w is outside its file's part, or "" when it is not.
func outOfScope(w schema.Write, teamFiles bool) string {
	top := ""
	if len(w.Path) > 0 {
		top = w.Path[0]
	}
	part, team := PartOf(w.Pos.File)
	switch part {
	case PartTeam:
		if w.Construct == "" && len(w.Path) == 2 && top == "teams" && w.Path[1] == string(team) {
			return ""
		}
		return fmt.Sprintf("this file is team %s's, approved by its owners alone: it sets teams.%s only, not %s (each team has its file teams/<team>.cue; clusters, tiers and cohorts go in the platform's files, pools and policy in pools.cue or policy.cue)",
			team, team, w.What())
	case PartCost:
		if top == "pools" || top == "policy" {
			return ""
		}
		return fmt.Sprintf("this file is one of the pools and policy files, approved by the platform or finance alone: it sets pools and policy only, not %s (a team goes in teams/<team>.cue, clusters, tiers, cohorts and shared definitions in another file)", w.What())
	}
	switch {
	case top == "" && w.Construct != "":
		return fmt.Sprintf("%s may set any part of the configuration, and the file alone does not tell which; write the fields by name", w.What())
	case top == "teams" && teamFiles:
		return fmt.Sprintf("this file sets %s, but in a repository with team files a team is set in its own file, teams/<team>.cue, which its owners approve", w.What())
	}
	return ""
}
