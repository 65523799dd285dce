package ci

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/allot-dev/allot/internal/gittest"

	"sigs.k8s.io/yaml"
)

// The templates are tested by running them: the GitHub composite action's steps
// (as the example workflow calls it) and the GitLab job's script lines are read
// from their YAML and executed, in a clone of a local Git repository, against a
// fake GitHub or GitLab API that records what it is asked. A test of the scripts
// beside the templates could pass while the templates call them wrongly; this
// cannot.

const (
	marker = "<!-- allot-plan -->"
	// simulateWorkload is the examples' workload, in the capacity repository.
	simulateWorkload = "capacity/workloads/mixed.csv"
	// codeowners is the committed CODEOWNERS the templates keep in sync.
	codeowners = ".github/CODEOWNERS"
	token      = "test-token"
	repoSlug   = "acme/capacity"
	projectID  = "42"
)

// root is this repository's root: the action's scripts and examples are there.
var root, _ = filepath.Abs("..")

// TestTemplatesOnAPullRequest walks a pull request through both templates: a
// quota raise that finance must approve (comment posted, label added), the same
// commit again (the comment updated, not duplicated; no second label), a push
// that brings the cost under the finance threshold (comment updated, label
// removed), and a pull request with a misspelt field (the check fails, with
// annotations, and the comment shows the findings).
func TestTemplatesOnAPullRequest(t *testing.T) {
	allot := buildAllot(t)
	for _, forge := range []string{"github", "gitlab"} {
		t.Run(forge, func(t *testing.T) {
			api := newFakeForge(t, forge)
			// Unrelated comments fill the first page, so that the plan comment is only
			// found again by paging; one of them quotes the marker, but not first.
			for i := range 120 {
				api.seed(7, fmt.Sprintf("looks good %d", i))
			}
			api.seed(7, "why does "+marker+" appear in the plan?")
			origin := capacityRemote(t, allot)
			run := func(branch string, pr int) (int, string, string) {
				ws := cloneBranch(t, origin, branch)
				switch forge {
				case "github":
					code, out := runGitHubAction(t, ws, allot, api.URL, pr)
					return code, out, ws
				default:
					code, out := runGitLabJob(t, ws, allot, api.URL, pr)
					return code, out, ws
				}
			}

			// 1. robotics' H100 quota 128 -> 160: +$160,716.80, finance must approve.
			code, out, ws := run("raise", 7)
			if code != 0 {
				t.Fatalf("raise: exit %d\n%s", code, out)
			}
			plans := api.planComments(7)
			if len(plans) != 1 {
				t.Fatalf("raise: %d plan comments, want 1\n%s", len(plans), out)
			}
			first := plans[0]
			for _, want := range []string{"Monthly cost +$160,716.80", "@acme/finance", "| robotics | h100-80gb | 128 | 160 | +32 |",
				"#### What-if: 240 jobs of `" + simulateWorkload + "` replayed by the scheduler"} {
				if !strings.Contains(first.Body, want) {
					t.Errorf("raise: the comment lacks %q:\n%s", want, first.Body)
				}
			}
			// The simulated effect on every team, in numbers.
			for _, team := range []string{"ads", "nlp", "platform", "robotics ✎", "search", "speech", "vision"} {
				if !regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(team) + ` \| \d+%[^|]* \| [^|]+ \| [^|]+ \| \d+[^|]* \| \d+[^|]* \|$`).MatchString(first.Body) {
					t.Errorf("raise: the what-if has no row for %s:\n%s", team, first.Body)
				}
			}
			if got := api.labelsOf(7); !slices.Equal(got, []string{"finance-approval"}) {
				t.Errorf("raise: labels %v, want [finance-approval]", got)
			}
			if n := api.count("create-comment"); n != 1 {
				t.Errorf("raise: %d comments created, want 1", n)
			}
			if forge == "gitlab" {
				if page, err := os.ReadFile(filepath.Join(ws, ".allot", "report.html")); err != nil || !strings.Contains(html.UnescapeString(string(page)), "+$160,716.80") {
					t.Errorf("raise: the finance report in the artifacts: %v", err)
				}
			}

			// 2. The same commit again: the one comment is updated in place.
			if code, out, _ := run("raise", 7); code != 0 {
				t.Fatalf("rerun: exit %d\n%s", code, out)
			}
			plans = api.planComments(7)
			if len(plans) != 1 || plans[0].ID != first.ID {
				t.Fatalf("rerun: plan comments %v, want only #%d", ids(plans), first.ID)
			}
			if n, u := api.count("create-comment"), api.count("update-comment"); n != 1 || u != 1 {
				t.Errorf("rerun: %d created, %d updated; want 1 and 1", n, u)
			}
			if n := api.count("add-label"); n != 1 {
				t.Errorf("rerun: label added %d times, want once", n)
			}

			// 3. A push trades the H100 raise for 8 more A100s for speech: +$16,030.80,
			// under the $50,000 threshold. The comment follows, the label goes.
			if code, out, _ := run("smaller", 7); code != 0 {
				t.Fatalf("smaller: exit %d\n%s", code, out)
			}
			plans = api.planComments(7)
			if len(plans) != 1 || plans[0].ID != first.ID || !strings.Contains(plans[0].Body, "| speech | a100-40gb | 48 | 56 | +8 |") {
				t.Fatalf("smaller: plan comments %v, want #%d showing speech's change:\n%s", ids(plans), first.ID, out)
			}
			if strings.Contains(plans[0].Body, "@acme/finance") {
				t.Errorf("smaller: the comment still asks finance:\n%s", plans[0].Body)
			}
			if got := api.labelsOf(7); len(got) != 0 {
				t.Errorf("smaller: labels %v, want none", got)
			}

			// 4. Another pull request misspells a pool field: the check fails, the
			// findings point at the line, and the comment shows them.
			code, out, ws = run("typo", 8)
			if code != 1 {
				t.Fatalf("typo: exit %d, want 1\n%s", code, out)
			}
			line := fmt.Sprintf("line=%d,col=3", lineOf(t, filepath.Join(ws, "capacity", "pools.cue"), "gpusPerNod"))
			switch forge {
			case "github":
				if want := "::error file=capacity/pools.cue," + line + ",title=allot unknown-field::"; strings.Count(out, want) != 1 {
					t.Errorf("typo: want the annotation %q once in the log:\n%s", want, out)
				}
			case "gitlab":
				var report []struct {
					CheckName string `json:"check_name"`
					Location  struct {
						Path  string `json:"path"`
						Lines struct{ Begin int }
					} `json:"location"`
				}
				readJSON(t, filepath.Join(ws, ".allot", "codequality.json"), &report)
				if len(report) == 0 || report[0].CheckName != "allot unknown-field" || report[0].Location.Path != "capacity/pools.cue" ||
					"line="+strconv.Itoa(report[0].Location.Lines.Begin)+",col=3" != line {
					t.Errorf("typo: code quality report %+v, want allot unknown-field at capacity/pools.cue %s", report, line)
				}
			}
			if !strings.Contains(out, "the capacity configuration has errors") {
				t.Errorf("typo: the log does not say why the check failed:\n%s", out)
			}
			plans = api.planComments(8)
			if len(plans) != 1 || !strings.Contains(plans[0].Body, "does not load") || !strings.Contains(plans[0].Body, "pools.cue:"+strings.TrimPrefix(strings.ReplaceAll(line, ",col=", ":"), "line=")) {
				t.Fatalf("typo: plan comments %v, want one with the findings", plans)
			}
			if got := api.labelsOf(8); len(got) != 0 {
				t.Errorf("typo: labels %v, want none", got)
			}
			// 5. A team's owners change, the committed CODEOWNERS does not: the check
			// fails and says how to bring it up to date.
			code, out, _ = run("owners", 9)
			if code != 1 || !strings.Contains(out, codeowners+" is not what allot renders: run 'allot render capacity --codeowners "+codeowners+"'") ||
				!strings.Contains(out, "+/capacity/teams/robotics.cue @acme/robotics") {
				t.Errorf("owners: exit %d, want 1 with the CODEOWNERS to commit:\n%s", code, out)
			}

			// 6. The raise again, from a change whose files make up a repository
			// naming programs and its own origin/main: nothing runs, the base is
			// main, finance must approve.
			if code, out, _ := run("hostile", 10); code != 0 {
				t.Fatalf("hostile: exit %d\n%s", code, out)
			}
			if _, err := os.Stat(hostileMarker); err == nil {
				t.Errorf("hostile: a program the change named ran (%s exists)", hostileMarker)
			}
			if plans := api.planComments(10); len(plans) != 1 || !strings.Contains(plans[0].Body, "Monthly cost +$160,716.80") || !strings.Contains(plans[0].Body, "@acme/finance") {
				t.Errorf("hostile: plan comments %v, want one asking finance for +$160,716.80", plans)
			}
			if got := api.labelsOf(10); !slices.Equal(got, []string{"finance-approval"}) {
				t.Errorf("hostile: labels %v, want [finance-approval]", got)
			}

			if api.unknown != 0 {
				t.Errorf("%d requests to unknown endpoints (see the log)", api.unknown)
			}
		})
	}
}

// TestTemplateStepsCallTheScripts keeps the templates thin: every step that
// runs something calls one of ci/scripts, the step's settings are ones the
// scripts read, both templates call the same scripts in the same order, and no
// script is left uncalled (so untested).
func TestTemplateStepsCallTheScripts(t *testing.T) {
	scriptsDir := filepath.Join(root, "ci", "scripts")
	var sources strings.Builder
	entries, err := os.ReadDir(scriptsDir)
	if err != nil {
		t.Fatal(err)
	}
	var runnable []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(scriptsDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sources.Write(b)
		if st, _ := e.Info(); st.Mode()&0o111 != 0 {
			runnable = append(runnable, e.Name())
			if !strings.HasPrefix(string(b), "#!/bin/sh\n") {
				t.Errorf("%s: not a POSIX sh script (#!/bin/sh)", e.Name())
			}
		}
	}
	readsVar := func(name string) bool {
		return regexp.MustCompile(`\$\{?` + name + `\b`).MatchString(sources.String())
	}

	action := readAction(t)
	ghCall := regexp.MustCompile(`^"\$GITHUB_ACTION_PATH/\.\./scripts/([a-z-]+\.sh)"$`)
	var github []string
	for _, s := range action.Runs.Steps {
		if s.Run == "" {
			if !strings.HasPrefix(s.Uses, "actions/setup-go@") && !strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
				t.Errorf("step %q uses %q: only actions/setup-go and upload-artifact may be used, the rest is ci/scripts", s.Name, s.Uses)
			}
			continue
		}
		m := ghCall.FindStringSubmatch(strings.TrimSpace(s.Run))
		if m == nil || s.Shell != "sh" {
			t.Errorf("step %q runs %q with shell %q: want one ci/scripts call with shell sh", s.Name, s.Run, s.Shell)
			continue
		}
		github = append(github, m[1])
		for k := range s.Env {
			if !readsVar(k) {
				t.Errorf("step %q sets %s, which no script reads", s.Name, k)
			}
		}
	}

	job := readGitLab(t)
	glCall := regexp.MustCompile(`^"\$ALLOT_HOME/ci/scripts/([a-z-]+\.sh)"$`)
	var gitlab []string
	for _, line := range append(slices.Clone(job.job.BeforeScript), job.job.Script...) {
		if strings.HasPrefix(line, `test -d "$ALLOT_HOME" || git clone `) {
			continue // fetches the scripts themselves
		}
		m := glCall.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("GitLab line %q: want one ci/scripts call", line)
			continue
		}
		gitlab = append(gitlab, m[1])
	}
	for k := range job.vars() {
		if strings.HasPrefix(k, "ALLOT") && k != "ALLOT_HOME" && k != "ALLOT_VERSION" && k != "ALLOT_REPOSITORY" && !readsVar(k) {
			t.Errorf("the GitLab job sets %s, which no script reads", k)
		}
	}
	if job.job.Artifacts.Reports.Codequality != ".allot/codequality.json" || job.vars()["ALLOT_OUT"] != "$CI_PROJECT_DIR/.allot" {
		t.Errorf("the code quality report %q is not where plan.sh writes it (ALLOT_OUT %q)", job.job.Artifacts.Reports.Codequality, job.vars()["ALLOT_OUT"])
	}

	want := []string{"install.sh", "plan.sh", "comment.sh", "label.sh", "verdict.sh"}
	if !slices.Equal(github, want) || !slices.Equal(gitlab, want) {
		t.Errorf("scripts called: GitHub %v, GitLab %v; want %v", github, gitlab, want)
	}
	slices.Sort(want)
	if !slices.Equal(runnable, want) {
		t.Errorf("executable scripts %v, want exactly those the templates call %v", runnable, want)
	}

	// The example workflow uses this action, with inputs it declares, and may
	// write pull requests.
	wf := readWorkflow(t)
	step := wf.actionStep(t)
	for k := range step.With {
		if _, ok := action.Inputs[k]; !ok {
			t.Errorf("the workflow passes %q, which the action does not declare", k)
		}
	}
	if wf.Permissions["pull-requests"] != "write" || !wf.triggeredByPullRequest() {
		t.Errorf("the workflow must run on pull_request with pull-requests: write; permissions %v", wf.Permissions)
	}
}

// buildAllot builds the binary the templates run.
func buildAllot(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "allot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/allot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// capacityRemote makes the bare repository a forge would hold: main with the
// examples under capacity/, and three branches of pull requests.
func capacityRemote(t *testing.T, allot string) string {
	t.Helper()
	hostileMarker = filepath.Join(t.TempDir(), "ran")
	origin := filepath.Join(t.TempDir(), "capacity.git")
	work := t.TempDir()
	git(t, "", "init", "-q", "--bare", origin)
	git(t, work, "init", "-q", "-b", "main")
	if err := os.CopyFS(filepath.Join(work, "capacity"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	// The CODEOWNERS the templates check, as the repository commits it.
	if out, err := exec.Command(allot, "render", filepath.Join(work, "capacity"), "--codeowners", filepath.Join(work, codeowners)).CombinedOutput(); err != nil {
		t.Fatalf("allot render --codeowners: %v\n%s", err, out)
	}
	git(t, work, "add", "-A")
	git(t, work, "commit", "-qm", "capacity")
	git(t, work, "remote", "add", "origin", origin)

	git(t, work, "checkout", "-q", "-b", "raise")
	replace(t, filepath.Join(work, "capacity", "teams", "robotics.cue"), "nominal: 128", "nominal: 160")
	git(t, work, "commit", "-qam", "robotics: 160 H100")

	git(t, work, "checkout", "-q", "-b", "smaller")
	replace(t, filepath.Join(work, "capacity", "teams", "robotics.cue"), "nominal: 160", "nominal: 128")
	replace(t, filepath.Join(work, "capacity", "teams", "speech.cue"), "nominal: 48", "nominal: 56")
	git(t, work, "commit", "-qam", "speech: 56 A100 instead")

	git(t, work, "checkout", "-q", "-b", "typo", "main")
	replace(t, filepath.Join(work, "capacity", "pools.cue"), "gpusPerNode: 8", "gpusPerNod: 8")
	git(t, work, "commit", "-qam", "typo")

	git(t, work, "checkout", "-q", "-b", "owners", "main")
	replace(t, filepath.Join(work, "capacity", "teams", "robotics.cue"), `"@acme/robotics-leads"`, `"@acme/robotics"`)
	git(t, work, "commit", "-qam", "robotics: new owners, CODEOWNERS forgotten")
	// The raise again, with files that would make Git run a program
	// (hostileMarker's) or read another base if allot or the scripts let the
	// change's files speak: a folder that looks like a repository in the
	// capacity folder, naming programs and its own origin/main; attributes
	// asking for a textconv and a filter; and a folder origin/main at the top,
	// holding the change itself as a base would.
	git(t, work, "checkout", "-q", "-b", "hostile", "raise")
	gittest.Hostile(t, work, "capacity", hostileMarker)
	git(t, work, "add", "-A")
	git(t, work, "commit", "-qm", "robotics: 160 H100, and a repository of its own")
	git(t, work, "push", "-q", "origin", "main", "raise", "smaller", "typo", "owners", "hostile")
	return origin
}

// hostileMarker is the file a program that Git was made to run would write.
var hostileMarker string

// cloneBranch checks a branch out as CI does: shallow, that branch only, so
// the base must be fetched.
func cloneBranch(t *testing.T, origin, branch string) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	git(t, "", "clone", "-q", "--depth", "1", "--single-branch", "--branch", branch, "file://"+origin, ws)
	return ws
}

// baseSHA is the commit of main on the remote the clone ws was made from: the
// base the forge names.
func baseSHA(t *testing.T, ws string) string {
	t.Helper()
	return strings.Fields(git(t, ws, "ls-remote", "origin", "refs/heads/main"))[0]
}

// --- GitHub Actions -------------------------------------------------------

type actionFile struct {
	Inputs map[string]struct {
		Default string `json:"default"`
	} `json:"inputs"`
	Runs struct {
		Using string `json:"using"`
		Steps []struct {
			Name  string            `json:"name"`
			If    string            `json:"if"`
			Uses  string            `json:"uses"`
			With  map[string]string `json:"with"`
			Run   string            `json:"run"`
			Shell string            `json:"shell"`
			Env   map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"runs"`
}

func readAction(t *testing.T) actionFile {
	t.Helper()
	var a actionFile
	readYAML(t, filepath.Join(root, "ci", "github", "action.yml"), &a)
	if a.Runs.Using != "composite" || len(a.Runs.Steps) == 0 {
		t.Fatalf("action.yml: runs.using %q with %d steps, want a composite action", a.Runs.Using, len(a.Runs.Steps))
	}
	return a
}

type workflowFile struct {
	On map[string]any `json:"on"`
	// OnYAML11 is on: read as YAML 1.1 does, as the boolean true.
	OnYAML11    map[string]any    `json:"true"`
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Steps []workflowStep `json:"steps"`
	} `json:"jobs"`
}

type workflowStep struct {
	Uses string            `json:"uses"`
	With map[string]string `json:"with"`
}

func readWorkflow(t *testing.T) workflowFile {
	t.Helper()
	var w workflowFile
	readYAML(t, filepath.Join(root, "ci", "github", "workflow.yml"), &w)
	return w
}

func (w workflowFile) triggeredByPullRequest() bool {
	_, ok := w.On["pull_request"]
	_, ok11 := w.OnYAML11["pull_request"]
	return ok || ok11
}

// actionStep is the workflow's step that uses allot's action.
func (w workflowFile) actionStep(t *testing.T) workflowStep {
	t.Helper()
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "allot-dev/allot/ci/github@") {
				return s
			}
		}
	}
	t.Fatal("workflow.yml has no step that uses allot-dev/allot/ci/github")
	return workflowStep{}
}

var expr = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// runGitHubAction runs the action as the example workflow calls it, on pull
// request pr of the clone ws, as a runner does: ${{ }} expressions resolved
// from the context, each run step in sh -e in the workspace, stopping at the
// first failure. The binary is the input allot, as a workflow that builds
// allot beforehand would pass it.
func runGitHubAction(t *testing.T, ws, allot, apiURL string, pr int) (int, string) {
	t.Helper()
	action, wf := readAction(t), readWorkflow(t)
	tmp := t.TempDir()
	ctx := map[string]string{
		"github.token":                       token,
		"github.base_ref":                    "main",
		"github.event.pull_request.base.sha": baseSHA(t, ws),
		"github.event.pull_request.number":   strconv.Itoa(pr),
		"github.action_path":                 filepath.Join(root, "ci", "github"),
		"runner.temp":                        tmp,
	}
	resolve := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			k := expr.FindStringSubmatch(m)[1]
			v, ok := ctx[k]
			if !ok {
				t.Fatalf("unknown expression %s in the templates", m)
			}
			return v
		})
	}
	for k, in := range action.Inputs {
		ctx["inputs."+k] = resolve(in.Default)
	}
	for k, v := range wf.actionStep(t).With {
		ctx["inputs."+k] = resolve(v)
	}
	// As a workflow would pass them: a capacity repository in a folder, and an
	// allot built beforehand.
	ctx["inputs.directory"], ctx["inputs.allot"] = "capacity", allot
	// Last month's jobs, replayed on the base and the change (the what-if).
	ctx["inputs.simulate"] = simulateWorkload
	ctx["inputs.codeowners"] = codeowners

	env := baseEnv(map[string]string{
		"GITHUB_ACTIONS":      "true",
		"GITHUB_API_URL":      apiURL,
		"GITHUB_REPOSITORY":   repoSlug,
		"GITHUB_WORKSPACE":    ws,
		"GITHUB_ACTION_PATH":  ctx["github.action_path"],
		"GITHUB_STEP_SUMMARY": filepath.Join(tmp, "summary.md"),
		"RUNNER_TEMP":         tmp,
	})
	var log strings.Builder
	for _, s := range action.Runs.Steps {
		if s.If != "" && !evalIf(t, s.If, ctx) {
			continue
		}
		switch {
		case strings.HasPrefix(s.Uses, "actions/upload-artifact@"):
			// Uploads what plan.sh left: check that it is there.
			dir := resolve(s.With["path"])
			for _, f := range []string{"plan.md", "plan.json", "report.html"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("step %q: %v", s.Name, err)
				}
			}
			continue
		case s.Run == "":
			t.Fatalf("step %q would run %q although input allot is set", s.Name, s.Uses)
		}
		stepEnv := slices.Clone(env)
		for k, v := range s.Env {
			stepEnv = append(stepEnv, k+"="+resolve(v))
		}
		fmt.Fprintf(&log, "## %s\n", s.Name)
		if code := shell(t, ws, stepEnv, resolve(s.Run), &log); code != 0 {
			return code, log.String()
		}
	}
	summary, _ := os.ReadFile(filepath.Join(tmp, "summary.md"))
	if !strings.HasPrefix(string(summary), marker) {
		t.Errorf("the job summary does not hold the plan: %.200q", summary)
	}
	return 0, log.String()
}

// evalIf evaluates the conditions the action uses: always(), and an input
// compared with the empty string.
func evalIf(t *testing.T, cond string, ctx map[string]string) bool {
	if cond == "always()" {
		return true
	}
	m := regexp.MustCompile(`^(inputs\.[a-z-]+) == ''$`).FindStringSubmatch(cond)
	if m == nil {
		t.Fatalf("if: %q: the test knows only always() and inputs.x == ''", cond)
	}
	return ctx[m[1]] == ""
}

// --- GitLab CI ------------------------------------------------------------

type gitlabJob struct {
	Stage        string            `json:"stage"`
	Rules        []map[string]any  `json:"rules"`
	Variables    map[string]string `json:"variables"`
	BeforeScript []string          `json:"before_script"`
	Script       []string          `json:"script"`
	Artifacts    struct {
		Reports struct {
			Codequality string `json:"codequality"`
		} `json:"reports"`
	} `json:"artifacts"`
}

type gitlabFile struct {
	globals map[string]string
	job     gitlabJob
}

// vars are the variables the job sees, the job's over the file's.
func (g gitlabFile) vars() map[string]string {
	out := map[string]string{}
	for k, v := range g.globals {
		out[k] = v
	}
	for k, v := range g.job.Variables {
		out[k] = v
	}
	return out
}

func readGitLab(t *testing.T) gitlabFile {
	t.Helper()
	var doc struct {
		Variables map[string]string `json:"variables"`
		Job       gitlabJob         `json:"allot-plan"`
	}
	readYAML(t, filepath.Join(root, "ci", "gitlab", "allot.gitlab-ci.yml"), &doc)
	if len(doc.Job.Script) == 0 || len(doc.Job.Rules) == 0 || fmt.Sprint(doc.Job.Rules[0]["if"]) != `$CI_PIPELINE_SOURCE == "merge_request_event"` {
		t.Fatalf("allot.gitlab-ci.yml: job allot-plan %+v: want a script run on merge request pipelines", doc.Job)
	}
	return gitlabFile{globals: doc.Variables, job: doc.Job}
}

// runGitLabJob runs the job on merge request pr of the clone ws as a runner does:
// predefined variables, then the file's and the job's (expanded), with the
// project's CI/CD variables over them (ALLOT_TOKEN; ALLOT_HOME, this checkout, so
// that nothing is cloned; ALLOT, the binary); before_script and script in one
// shell that stops at the first failing line.
func runGitLabJob(t *testing.T, ws, allot, apiURL string, pr int) (int, string) {
	t.Helper()
	g := readGitLab(t)
	vars := map[string]string{
		"GITLAB_CI":                           "true",
		"CI_API_V4_URL":                       apiURL + "/api/v4",
		"CI_PROJECT_ID":                       projectID,
		"CI_PROJECT_DIR":                      ws,
		"CI_BUILDS_DIR":                       filepath.Dir(ws),
		"CI_JOB_ID":                           "1001",
		"CI_PIPELINE_SOURCE":                  "merge_request_event",
		"CI_MERGE_REQUEST_IID":                strconv.Itoa(pr),
		"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
		"CI_MERGE_REQUEST_DIFF_BASE_SHA":      baseSHA(t, ws),
	}
	project := map[string]string{"ALLOT_TOKEN": token, "ALLOT_HOME": root, "ALLOT": allot, "ALLOT_SIMULATE": simulateWorkload, "ALLOT_CODEOWNERS": codeowners, "ALLOT_DIR": "capacity"}
	for _, scope := range []map[string]string{g.globals, g.job.Variables} {
		for k, v := range scope {
			vars[k] = os.Expand(v, func(name string) string {
				x, ok := vars[name]
				if !ok {
					t.Fatalf("variable %s=%q refers to $%s, which GitLab does not define", k, v, name)
				}
				return x
			})
		}
	}
	for k, v := range project {
		vars[k] = v
	}
	var env []string
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	script := "set -e\n" + strings.Join(append(slices.Clone(g.job.BeforeScript), g.job.Script...), "\n")
	var log strings.Builder
	code := shell(t, ws, baseEnv(nil, env...), script, &log)
	return code, log.String()
}

// --- running ----------------------------------------------------------------

// baseEnv is a clean environment: PATH and HOME, git's identity, and vars.
func baseEnv(vars map[string]string, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GIT_CONFIG_NOSYSTEM=1", "LANG=C.UTF-8"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return append(env, extra...)
}

// shell runs script with sh -e in dir and returns its exit code.
func shell(t *testing.T, dir string, env []string, script string, log io.Writer) int {
	t.Helper()
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, log, log
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// git runs git in dir (internal/gittest).
var git = gittest.Run

func replace(t *testing.T, file, old, new string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lineOf(t *testing.T, file, s string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), s)
	if i < 0 {
		t.Fatalf("%s does not contain %q", file, s)
	}
	return strings.Count(string(b[:i]), "\n") + 1
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
}

// --- the fake forge -----------------------------------------------------------

type comment struct {
	ID   int    `json:"id"`
	Body string `json:"body"`
}

func ids(cs []comment) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// fakeForge serves the part of GitHub's REST API or GitLab's API v4 the scripts
// use, over pull requests' comments and labels, and counts what it is asked.
type fakeForge struct {
	*httptest.Server
	t       *testing.T
	mu      sync.Mutex
	next    int
	notes   map[int][]*comment
	labels  map[int][]string
	calls   map[string]int
	unknown int
}

func newFakeForge(t *testing.T, forge string) *fakeForge {
	f := &fakeForge{t: t, next: 1, notes: map[int][]*comment{}, labels: map[int][]string{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	var auth func(*http.Request) bool
	switch forge {
	case "github":
		auth = func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
		issue := "/repos/" + repoSlug + "/issues/{pr}"
		mux.HandleFunc("GET "+issue+"/comments", f.list)
		mux.HandleFunc("POST "+issue+"/comments", f.create)
		mux.HandleFunc("PATCH /repos/"+repoSlug+"/issues/comments/{id}", f.update)
		mux.HandleFunc("GET "+issue+"/labels", func(w http.ResponseWriter, r *http.Request) {
			out := []map[string]string{}
			for _, l := range f.labelsOf(pr(r)) {
				out = append(out, map[string]string{"name": l})
			}
			reply(w, out)
		})
		mux.HandleFunc("POST "+issue+"/labels", func(w http.ResponseWriter, r *http.Request) {
			var body struct{ Labels []string }
			decode(t, r, &body)
			f.setLabels(r, "add-label", body.Labels, nil)
			reply(w, body.Labels)
		})
		mux.HandleFunc("DELETE "+issue+"/labels/{name}", func(w http.ResponseWriter, r *http.Request) {
			f.setLabels(r, "remove-label", nil, []string{r.PathValue("name")})
			reply(w, []string{})
		})
	case "gitlab":
		auth = func(r *http.Request) bool { return r.Header.Get("PRIVATE-TOKEN") == token }
		mr := "/api/v4/projects/" + projectID + "/merge_requests/{pr}"
		mux.HandleFunc("GET "+mr+"/notes", f.list)
		mux.HandleFunc("POST "+mr+"/notes", f.create)
		mux.HandleFunc("PUT "+mr+"/notes/{id}", f.update)
		mux.HandleFunc("GET "+mr, func(w http.ResponseWriter, r *http.Request) {
			reply(w, map[string]any{"iid": pr(r), "labels": f.labelsOf(pr(r))})
		})
		mux.HandleFunc("PUT "+mr, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Add    string `json:"add_labels"`
				Remove string `json:"remove_labels"`
			}
			decode(t, r, &body)
			split := func(s string) []string {
				if s == "" {
					return nil
				}
				return strings.Split(s, ",")
			}
			call := "add-label"
			if body.Add == "" {
				call = "remove-label"
			}
			f.setLabels(r, call, split(body.Add), split(body.Remove))
			reply(w, map[string]any{"iid": pr(r), "labels": f.labelsOf(pr(r))})
		})
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !auth(r) {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		if _, pattern := mux.Handler(r); pattern == "" {
			f.mu.Lock()
			f.unknown++
			f.mu.Unlock()
			t.Logf("fake %s: no such endpoint: %s %s", forge, r.Method, r.URL)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func pr(r *http.Request) int {
	n, _ := strconv.Atoi(r.PathValue("pr"))
	return n
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func decode(t *testing.T, r *http.Request, v any) {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		t.Errorf("%s %s: body is not JSON: %v", r.Method, r.URL, err)
	}
}

func (f *fakeForge) seed(pr int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes[pr] = append(f.notes[pr], &comment{ID: f.next, Body: body})
	f.next++
}

// list pages as both forges do: per_page (at most 100) from page (from 1).
func (f *fakeForge) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if per <= 0 || per > 100 {
		per = 30
	}
	page = max(page, 1)
	all := f.notes[pr(r)]
	lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
	out := []comment{}
	for _, c := range all[lo:hi] {
		out = append(out, *c)
	}
	reply(w, out)
}

func (f *fakeForge) create(w http.ResponseWriter, r *http.Request) {
	var body comment
	decode(f.t, r, &body)
	f.seed(pr(r), body.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["create-comment"]++
	reply(w, f.notes[pr(r)][len(f.notes[pr(r)])-1])
}

func (f *fakeForge) update(w http.ResponseWriter, r *http.Request) {
	var body comment
	decode(f.t, r, &body)
	id, _ := strconv.Atoi(r.PathValue("id"))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["update-comment"]++
	for _, cs := range f.notes {
		for _, c := range cs {
			if c.ID == id {
				c.Body = body.Body
				reply(w, c)
				return
			}
		}
	}
	http.NotFound(w, r)
}

func (f *fakeForge) setLabels(r *http.Request, call string, add, remove []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[call]++
	n := pr(r)
	for _, l := range add {
		if !slices.Contains(f.labels[n], l) {
			f.labels[n] = append(f.labels[n], l)
		}
	}
	f.labels[n] = slices.DeleteFunc(f.labels[n], func(l string) bool { return slices.Contains(remove, l) })
}

func (f *fakeForge) labelsOf(pr int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.labels[pr])
}

func (f *fakeForge) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

// planComments are the comments of pr that start with the marker.
func (f *fakeForge) planComments(pr int) []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []comment
	for _, c := range f.notes[pr] {
		if strings.HasPrefix(c.Body, marker) {
			out = append(out, *c)
		}
	}
	return out
}

// TestInstallBuildsAnAllotThatStarts: install.sh, which a capacity
// repository's CI runs, builds allot from source when none is given, with no
// GOFLAGS of the Makefile's, and the binary it builds starts on a machine
// without NVIDIA's driver (this one): without the tag that keeps kustomize's
// Go plugin loader out, it is linked with immediate binding and dies at once
// on an NVML symbol.
func TestInstallBuildsAnAllotThatStarts(t *testing.T) {
	// install.sh only checks that curl and jq are there (the other scripts
	// run them, this test none): where a developer's machine lacks them,
	// stand-ins named after them let it go on to the build.
	tools := t.TempDir()
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			truth, err := exec.LookPath("true")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(truth, filepath.Join(tools, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "allot")
	cmd := exec.Command("sh", filepath.Join(root, "ci", "scripts", "install.sh"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "ALLOT=") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "ALLOT="+bin, "PATH="+os.Getenv("PATH")+string(os.PathListSeparator)+tools)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	if v, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(v), "allot ") {
		t.Fatalf("the allot install.sh built does not start: %v\n%s", err, v)
	}
}

// TestPlanScriptTarget: plan.sh passes ALLOT_TARGET and ALLOT_STRICT to
// validate and plan: with kueue and strict the examples' approximations are
// errors (status 1, as a manager running Kueue refuses them) and the comment
// lists them; an unknown value is bad usage, before anything runs.
func TestPlanScriptTarget(t *testing.T) {
	allot := buildAllot(t)
	out := t.TempDir()
	run := func(env ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "ci", "scripts", "plan.sh"))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), append([]string{"ALLOT=" + allot, "ALLOT_DIR=examples", "ALLOT_BASE=dir:examples", "ALLOT_OUT=" + out,
			"ALLOT_GIT_DIR=" + filepath.Join(root, ".git"), "GITHUB_ACTIONS=", "ALLOT_SIMULATE=", "ALLOT_CODEOWNERS="}, env...)...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if log, err := run("ALLOT_TARGET=kueue", "ALLOT_STRICT=true"); err != nil {
		t.Fatalf("plan.sh: %v\n%s", err, log)
	}
	status, _ := os.ReadFile(filepath.Join(out, "status"))
	md, _ := os.ReadFile(filepath.Join(out, "plan.md"))
	if strings.TrimSpace(string(status)) != "1" || !strings.Contains(string(md), "**Approximations in force**: 10, 0 accepted") || !strings.Contains(string(md), "error") {
		t.Errorf("kueue, strict: status %q, comment:\n%s", status, md)
	}
	if log, err := run("ALLOT_TARGET=kueue"); err != nil {
		t.Fatalf("plan.sh: %v\n%s", err, log)
	}
	if status, _ := os.ReadFile(filepath.Join(out, "status")); strings.TrimSpace(string(status)) != "0" {
		t.Errorf("kueue, not strict: status %q, want 0 (warnings)", status)
	}
	for _, env := range []string{"ALLOT_TARGET=kue ue", "ALLOT_STRICT=yes"} {
		if log, err := run(env); err == nil || !strings.Contains(log, strings.SplitN(env, "=", 2)[0]) {
			t.Errorf("%s: %v, want bad usage naming it\n%s", env, err, log)
		}
	}
}
