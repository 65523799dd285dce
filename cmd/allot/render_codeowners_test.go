package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
)

// TestRenderCodeowners renders the examples' CODEOWNERS (golden) to a file and to
// stdout. An owner CODEOWNERS would not take is a configuration error at its
// value (exit 1, as validate reports it), and so is a policy without the
// approvers the file names; nothing is written.
func TestRenderCodeowners(t *testing.T) {
	dir := copyExamples(t)
	file := filepath.Join(t.TempDir(), "CODEOWNERS")
	code, out, errOut := allot(t, nil, "render", dir, "--codeowners", file)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "codeowners-examples", string(b))
	if code, out, _ := allot(t, nil, "render", dir, "--codeowners", "-"); code != 0 || out != string(b) {
		t.Errorf("--codeowners -: exit %d, stdout differs from the file:\n%s", code, out)
	}

	for name, tc := range map[string]struct {
		file, old, new string
		want           []string // in stderr
	}{
		"an owner with a newline": {"teams/robotics.cue", `"@acme/robotics-leads"`, `"@acme/robotics-leads\n* @evil"`,
			[]string{"teams/robotics.cue:5:11: error: name-format: team robotics: owners[0]: \"@acme/robotics-leads\\n* @evil\" is not an owner: want @user or @org/team"}},
		"an owner with a space": {"teams/robotics.cue", `"@acme/robotics-leads"`, `"@acme/robotics leads"`,
			[]string{"teams/robotics.cue:5:11: error: name-format:"}},
		"a bare approver": {"policy.cue", `["@acme/finance"]`, `["@acme/finance", "finance"]`,
			[]string{"policy.cue:6:38: error: name-format: policy: financeApprovers[1]: \"finance\""}},
		"no platform approvers": {"policy.cue", "platformApprovers: [\"@acme/ml-platform\"]", "",
			[]string{`policy.cue:3:1: error: required-field: policy: required field "platformApprovers" is missing: render --codeowners`}},
		"no approvers": {"policy.cue", "financeApprovers: [\"@acme/finance\"]\n\tplatformApprovers: [\"@acme/ml-platform\"]", "",
			[]string{`required field "financeApprovers" is missing`, `required field "platformApprovers" is missing`}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyExamples(t)
			edit(t, dir, tc.file, tc.old, tc.new)
			bad := filepath.Join(t.TempDir(), "CODEOWNERS")
			code, _, errOut := allot(t, nil, "render", dir, "--codeowners", bad)
			if code != exitFindings {
				t.Errorf("exit %d, want %d", code, exitFindings)
			}
			for _, want := range tc.want {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if _, err := os.Stat(bad); !os.IsNotExist(err) {
				t.Errorf("a CODEOWNERS was written: %v", err)
			}
			// validate reports a bad owner too; approvers only render --codeowners needs.
			wantValidate := exitFindings
			if strings.HasPrefix(name, "no ") {
				wantValidate = 0
			}
			if code, _, errOut := allot(t, nil, "validate", dir); code != wantValidate {
				t.Errorf("validate: exit %d, want %d\n%s", code, wantValidate, errOut)
			}
		})
	}
}

// TestCodeownersIsSound: for every file, the owners of the CODEOWNERS line
// GitHub applies to it (the last that matches) each own everything the file
// sets: a team's owners its team, finance the pools and the policy, the
// platform everything. The examples, and every change to them that validate
// takes, hold it; the changes that would break it are file-scope errors.
// Before, a team file that set a pool, the policy or another team validated
// clean, and its line named that team's owners alone.
func TestCodeownersIsSound(t *testing.T) {
	const pool = `pools: extra: {cluster: "dgx-onprem", flavor: "h100-80gb", gpusPerNode: 8, nodes: max: 1, price: onDemandPerNodeHour: 1}`
	for name, tc := range map[string]struct {
		files   map[string]string // appended to (created if new)
		refused bool              // by a file-scope error
	}{
		"the examples":                  {nil, false},
		"a team file sets a pool":       {map[string]string{"teams/nlp.cue": `pools: "gke-a100": spareNodes: 4`}, true},
		"a team file sets the policy":   {map[string]string{"teams/nlp.cue": "policy: allowDisruption: true"}, true},
		"a team file sets another team": {map[string]string{"teams/nlp.cue": "teams: vision: weight: 5"}, true},
		"a comprehension":               {map[string]string{"teams/nlp.cue": `for k, _ in {speech: 0} {teams: (k): namespaces: ["speech-x"]}`}, true},
		"a pattern constraint":          {map[string]string{"teams/nlp.cue": "teams: [_]: namespaces: [...]"}, true},
		"a hidden field":                {map[string]string{"teams/nlp.cue": "_x: 1"}, true},
		"the pools file sets a cluster": {map[string]string{"pools.cue": `clusters: x: provider: "kwok"`}, true},
		"the policy file sets a team":   {map[string]string{"policy.cue": `teams: ads: namespaces: ["ads-x"]`}, true},
		"a file outside the layout":     {map[string]string{"extra.cue": "package capacity\n" + `teams: ads: namespaces: ["ads-x"]`}, true},
		"pools/teams.cue":               {map[string]string{"pools/teams.cue": "package capacity\n" + `teams: ads: namespaces: ["ads-x"]`}, true},
		"teams/extra/x.cue":             {map[string]string{"teams/extra/x.cue": "package capacity\n" + `teams: ads: namespaces: ["ads-x"]`}, true},
		"a new team file": {map[string]string{"teams/new.cue": "package capacity\n" +
			`teams: new: {costCenter: "CC-9", owners: ["@acme/new"], quota: "h100-80gb": nominal: 0}`}, false},
		"a new pools file":     {map[string]string{"pools/extra.cue": "package capacity\n" + pool}, false},
		"a platform pool file": {map[string]string{"gpus.cue": "package capacity\n" + pool}, false},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyExamples(t)
			for f, add := range tc.files {
				p := filepath.Join(dir, f)
				b, _ := os.ReadFile(p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, append(b, "\n"+add+"\n"...), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, findings := schema.Load(os.DirFS(dir))
			if cfg == nil {
				t.Fatalf("does not load: %v", findings)
			}
			refused := slices.ContainsFunc(policies.Check(cfg, planner.Build(cfg), nil), func(f schema.Finding) bool {
				return f.Rule == schema.RuleFileScope && f.Severity == schema.SeverityError
			})
			if refused != tc.refused {
				t.Fatalf("refused by file-scope: %v, want %v", refused, tc.refused)
			}
			if refused {
				return
			}
			code, out, errOut := allot(t, nil, "render", dir, "--codeowners", "-")
			if code != 0 {
				t.Fatalf("render: exit %d: %s", code, errOut)
			}
			var lines [][]string
			for _, l := range strings.Split(out, "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					lines = append(lines, strings.Fields(l))
				}
			}
			for _, f := range cfg.Files {
				var owners []string
				for _, l := range lines {
					if l[0] == "*" || l[0] == "/"+f {
						owners = l[1:]
					}
				}
				for _, w := range cfg.Writes {
					if w.Pos.File != f {
						continue
					}
					own := slices.Clone(cfg.Policy.PlatformApprovers)
					switch {
					case len(w.Path) > 0 && (w.Path[0] == "pools" || w.Path[0] == "policy"):
						own = append(own, cfg.Policy.FinanceApprovers...)
					case len(w.Path) == 2 && w.Path[0] == "teams" && w.Construct == "" && cfg.Teams[schema.TeamName(w.Path[1])] != nil:
						own = append(own, cfg.Teams[schema.TeamName(w.Path[1])].Owners...)
					}
					for _, o := range owners {
						if !slices.Contains(own, o) {
							t.Errorf("%s: %s, whom CODEOWNERS lets approve it alone, does not own %s (%s)", f, o, w.What(), w.Pos)
						}
					}
				}
			}
			if name == "a new pools file" && !strings.Contains(out, "/pools/extra.cue @acme/ml-platform @acme/finance\n") {
				t.Errorf("pools/extra.cue is not the platform's and finance's:\n%s", out)
			}
		})
	}
}
