package policies

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// laidOut is a capacity repository in the layout render --codeowners writes
// for: each file sets only what its owners own.
var laidOut = map[string]string{
	"platform.cue": `package capacity

clusters: lab: provider: "kwok"
tiers: high: priority: 10
cohorts: root: {}
#PoolDefaults: {headroom: *0 | number, spareNodes: *0 | int, ...}
_spare: *0 | int
`,
	"pools.cue": `package capacity

pools: a: #PoolDefaults & {
	cluster: "lab"
	flavor: "f"
	gpusPerNode: 8
	nodes: max: 4
	price: onDemandPerNodeHour: 10
	spareNodes: _spare
}
`,
	"policy.cue": `package capacity

policy: {
	financeApprovers: ["@acme/finance"]
	platformApprovers: ["@acme/platform"]
}
`,
	"teams/alpha.cue": `package capacity

import "strings"

let cc = strings.ToUpper("cc-1")

teams: alpha: {
	costCenter: cc
	owners: ["@acme/alpha"]
	cohort: "root"
	quota: f: nominal: 8
}
`,
	"teams/beta.cue": `package capacity

teams: "beta": {
	costCenter: "CC-2"
	owners: ["@acme/beta"]
	cohort: "root"
	quota: f: nominal: 8
}
`,
}

func loadFiles(t *testing.T, files map[string]string) (*schema.Config, *planner.Plan) {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	cfg, findings := schema.Load(fsys)
	if cfg == nil {
		t.Fatalf("does not load: %v", findings)
	}
	return cfg, planner.Build(cfg)
}

// TestFileScope: whatever way CUE offers to set a part of the configuration
// from a file that GitHub lets other owners approve alone is an error of
// rule file-scope at the line that does it. Before, a team's file set a
// pool's size, the policy or another team's weight, and CODEOWNERS asked
// only that team's owners.
func TestFileScope(t *testing.T) {
	cfg, plan := loadFiles(t, laidOut)
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("the laid-out repository has findings: %v", got)
	}
	for name, tc := range map[string]struct {
		file, add string // appended to file (created if new)
		line      int    // of the finding, in add
		what      string // in the message
	}{
		"a team file sets a pool's size":         {"teams/alpha.cue", "pools: a: nodes: min: 1", 1, "not pools"},
		"a team file allows disruption":          {"teams/alpha.cue", "policy: allowDisruption: true", 1, "not policy"},
		"a team file sets another team's weight": {"teams/alpha.cue", "teams: beta: weight: 5", 1, "not teams.beta"},
		"quoted labels":                          {"teams/alpha.cue", `"teams": "beta": "weight": 5`, 1, "not teams.beta"},
		"an alias":                               {"teams/alpha.cue", "T=teams: beta: weight: T.alpha.weight", 1, "not teams.beta"},
		"an embedded struct":                     {"teams/alpha.cue", "{teams: {{beta: weight: 5}}}", 1, "not teams.beta"},
		"a comprehension into another team":      {"teams/alpha.cue", "for k, _ in {beta: 0} {teams: (k): weight: 5}", 1, "not a comprehension at the top level"},
		"a comprehension under teams": {"teams/alpha.cue", "teams: {for k, _ in {beta: 0} {(k): weight: 5}}", 1,
			"not a comprehension under teams"},
		"an if":                    {"teams/alpha.cue", "if true {teams: beta: weight: 5}", 1, "not a comprehension at the top level"},
		"a pattern constraint":     {"teams/alpha.cue", "teams: [_]: weight: 1", 1, "not a field with a computed or pattern label under teams"},
		"a named pattern":          {"teams/alpha.cue", "teams: [Name=_]: weight: 1", 1, "under teams"},
		"an interpolated label":    {"teams/alpha.cue", "teams: \"\\(\"be\")ta\": weight: 5", 1, "under teams"},
		"a computed top label":     {"teams/alpha.cue", "(\"tea\" + \"ms\"): beta: weight: 5", 1, "at the top level"},
		"teams as an expression":   {"teams/alpha.cue", "teams: {beta: weight: 5} & {}", 1, "not an expression under teams"},
		"'...' under teams":        {"teams/alpha.cue", "teams: {...}", 1, "not '...' under teams"},
		"an embedded reference":    {"teams/alpha.cue", "_T", 1, "not an embedded value at the top level"},
		"a shared definition":      {"teams/alpha.cue", "#PoolDefaults: spareNodes: 2", 1, "not #PoolDefaults"},
		"a hidden field":           {"teams/alpha.cue", "_spare: 2", 1, "not _spare"},
		"an attribute":             {"teams/alpha.cue", "teams: beta: weight: 5 @tag(w)", 1, "not teams.beta"},
		"a pools file sets a team": {"pools.cue", "teams: beta: weight: 5", 1, "not teams.beta"},
		"a pools file sets a cluster": {"pools.cue", "clusters: more: provider: \"kwok\"", 1,
			"not clusters"},
		"the policy file defines":         {"policy.cue", "#Anything: 1", 1, "not #Anything"},
		"pools/teams.cue":                 {"pools/teams.cue", "package capacity\nteams: beta: weight: 5", 2, "not teams.beta"},
		"a file outside the layout":       {"extra.cue", "package capacity\nteams: beta: weight: 5", 2, "sets teams.beta, but"},
		"a new team outside the layout":   {"extra.cue", "package capacity\nteams: gamma: quota: f: nominal: 0", 2, "sets teams.gamma, but"},
		"a folder under teams":            {"teams/extra/x.cue", "package capacity\nteams: beta: weight: 5", 2, "sets teams.beta, but"},
		"a team file of another name":     {"teams/gamma.cue", "package capacity\nteams: beta: weight: 5", 2, "team gamma's"},
		"a platform file's comprehension": {"platform.cue", "for k, v in {x: 1} {tiers: (k): priority: v}", 1, "write the fields by name"},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"platform.cue": laidOut["platform.cue"] + "_T: {teams: beta: weight: 5}\n"}
			for f, src := range laidOut {
				if files[f] == "" {
					files[f] = src
				}
			}
			if tc.file == "platform.cue" {
				files[tc.file] = laidOut[tc.file]
			}
			line := strings.Count(files[tc.file], "\n") + tc.line
			files[tc.file] += tc.add + "\n"
			cfg, plan := loadFiles(t, files)
			got := Check(cfg, plan, nil)
			for _, f := range got {
				if f.Rule == schema.RuleFileScope && f.Severity == schema.SeverityError && f.Pos.File == tc.file && f.Pos.Line == line &&
					strings.Contains(f.Message, tc.what) {
					return
				}
			}
			t.Fatalf("no file-scope error at %s:%d about %q; findings: %v", tc.file, line, tc.what, got)
		})
	}
}

// TestFileScopeWithoutTeamFiles: a repository with no team files (one file,
// or teams outside teams/) is the platform's, and may set teams anywhere but
// in the pools and policy files.
func TestFileScopeWithoutTeamFiles(t *testing.T) {
	cfg, _ := load(t, valid)
	if got := checkFileScope(cfg); len(got) > 0 {
		t.Fatalf("one file: %v", got)
	}
	cfg, plan := loadFiles(t, map[string]string{
		"platform.cue":       laidOut["platform.cue"] + "teams: beta: weight: 2\n",
		"pools.cue":          laidOut["pools.cue"],
		"policy.cue":         laidOut["policy.cue"],
		"groups/alpha.cue":   strings.Replace(laidOut["teams/alpha.cue"], "teams: alpha:", "teams: alpha: weight: 2\nteams: alpha:", 1),
		"teams/deep/b.cue":   laidOut["teams/beta.cue"],
		"teams/README.md":    "not CUE",
		"teams/.hidden.cue":  "package capacity\nteams: beta: weight: 2\n",
		"teams/_ignored.cue": "package capacity\nteams: beta: weight: 2\n",
	})
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("no team files: %v", got)
	}
}

// TestPartOf: a file's part is told by its path alone.
func TestPartOf(t *testing.T) {
	for file, want := range map[string]struct {
		part Part
		team schema.TeamName
	}{
		"teams/nlp.cue":        {PartTeam, "nlp"},
		"teams/NLP.cue":        {PartTeam, "NLP"},
		"teams/.cue":           {PartPlatform, ""},
		"teams/a/b.cue":        {PartPlatform, ""},
		"x/teams/nlp.cue":      {PartPlatform, ""},
		"pools.cue":            {PartCost, ""},
		"policy.cue":           {PartCost, ""},
		"pools/gke/h100.cue":   {PartCost, ""},
		"sub/pools.cue":        {PartPlatform, ""},
		"poolsx.cue":           {PartPlatform, ""},
		"clusters.cue":         {PartPlatform, ""},
		"teams.cue":            {PartPlatform, ""},
		"capacity/teams/x.cue": {PartPlatform, ""},
	} {
		if part, team := PartOf(file); part != want.part || team != want.team {
			t.Errorf("PartOf(%q) = %v, %q; want %v, %q", file, part, team, want.part, want.team)
		}
	}
}
