package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/gittest"
)

// prChange sets up base/ (examples as they are) and head/ (robotics' H100 quota
// raised from 128 to 160) side by side, and changes into their parent directory so
// that the paths in the output are stable.
func prChange(t *testing.T) {
	t.Helper()
	base, head := copyExamples(t), copyExamples(t)
	edit(t, head, "teams/robotics.cue", "nominal: 128", "nominal: 160")
	parent := t.TempDir()
	for name, dir := range map[string]string{"base": base, "head": head} {
		if err := os.Rename(dir, filepath.Join(parent, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(parent)
}

func TestPlanGolden(t *testing.T) {
	for _, format := range []string{"text", "markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			prChange(t)
			code, out, errOut := allot(t, nil, "plan", "head", "-o", format, "--base", "base")
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			golden(t, "plan-pr."+format, out)
		})
	}
	t.Run("no base", func(t *testing.T) {
		prChange(t)
		code, out, _ := allot(t, nil, "plan", "base")
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		golden(t, "plan-base.text", out)
	})
}

// TestPlanEnvelopeGolden locks the plan of a change that adds a burst of 8
// nodes to gke-h100, whose repair the base already declares: the envelopes,
// the ceiling's change, and finance's approval of it though the planned cost
// does not move.
func TestPlanEnvelopeGolden(t *testing.T) {
	for _, format := range []string{"text", "markdown"} {
		t.Run(format, func(t *testing.T) {
			prChange(t)
			edit(t, "base", "pools.cue", "spareNodes: 1\n", "spareNodes: 1\n\t\trepair: {}\n")
			edit(t, "head", "pools.cue", "spareNodes: 1\n", "spareNodes: 1\n\t\trepair: {}\n\t\tburst: maxNodes: 8\n")
			edit(t, "head", "teams/robotics.cue", "nominal: 160", "nominal: 128")
			code, out, errOut := allot(t, nil, "plan", "head", "-o", format, "--base", "base")
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			golden(t, "plan-envelope."+format, out)
		})
	}
}

func TestPlanJSONContract(t *testing.T) {
	prChange(t)
	code, out, _ := allot(t, nil, "plan", "head", "-o", "json", "--base", "base")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Pools []map[string]any `json:"pools"`
		Teams []struct {
			Team       string           `json:"team"`
			Quota      map[string]int64 `json:"quota"`
			MonthlyUSD json.Number      `json:"monthly_usd"`
		} `json:"teams"`
		Total    json.Number `json:"total_monthly_usd"`
		Findings []any       `json:"findings"`
		Diff     struct {
			Teams []struct {
				Team          string `json:"team"`
				Flavor        string `json:"flavor"`
				NominalBefore int64  `json:"nominal_before"`
				NominalAfter  int64  `json:"nominal_after"`
			} `json:"teams"`
			Pools     []map[string]any `json:"pools"`
			Before    json.Number      `json:"monthly_usd_before"`
			After     json.Number      `json:"monthly_usd_after"`
			Delta     json.Number      `json:"monthly_usd_delta"`
			Approvals []struct{ Who, Why string }
		} `json:"diff"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Diff.Teams) != 1 || doc.Diff.Teams[0].Team != "robotics" || doc.Diff.Teams[0].NominalBefore != 128 || doc.Diff.Teams[0].NominalAfter != 160 {
		t.Fatalf("diff.teams = %+v", doc.Diff.Teams)
	}
	if doc.Total != doc.Diff.After {
		t.Fatalf("total %s != diff after %s", doc.Total, doc.Diff.After)
	}
	var who []string
	for _, a := range doc.Diff.Approvals {
		who = append(who, a.Who)
	}
	if got := strings.Join(who, ";"); got != "@acme/finance;@acme/robotics-leads" {
		t.Fatalf("approvals = %q", got)
	}
	if len(doc.Pools) != 5 || doc.Findings == nil {
		t.Fatalf("pools %d, findings %v", len(doc.Pools), doc.Findings)
	}
}

// git runs git in dir (internal/gittest).
var git = gittest.Run

// TestPlanBaseGitRef plans a work tree against a branch of its own repository: the
// diff comes from Git's objects and the work tree is left as it was.
func TestPlanBaseGitRef(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	if err := os.Rename(copyExamples(t), filepath.Join(repo, "capacity")); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "base")
	git(t, repo, "checkout", "-q", "-b", "raise")
	dir := filepath.Join(repo, "capacity")
	edit(t, dir, "teams/speech.cue", "nominal: 48", "nominal: 64")
	status := git(t, repo, "status", "--porcelain")

	code, out, errOut := allot(t, nil, "plan", dir, "--base", "main", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, `"team": "speech"`) || !strings.Contains(out, `"nominal_before": 48`) || !strings.Contains(out, `"nominal_after": 64`) {
		t.Fatalf("diff does not show speech 48 -> 64:\n%s", out)
	}
	if got := git(t, repo, "status", "--porcelain"); got != status {
		t.Fatalf("work tree changed: %q -> %q", status, got)
	}
	if code, _, errOut := allot(t, nil, "plan", dir, "--base", "no-such-branch"); code != 2 || !strings.Contains(errOut, "no-such-branch") {
		t.Fatalf("unknown ref: exit %d, %s", code, errOut)
	}
}

func TestPlanOfBrokenConfigStillAnswersInJSON(t *testing.T) {
	dir := copyExamples(t)
	edit(t, dir, "pools.cue", "gpusPerNode: 8", "gpusPerNod: 8")
	t.Chdir(dir)
	code, out, _ := allot(t, nil, "plan", ".", "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Pools    []any `json:"pools"`
		Findings []struct {
			Rule string `json:"rule"`
			File string `json:"file"`
			Line int    `json:"line"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Pools) != 0 || len(doc.Findings) == 0 || doc.Findings[0].Rule != "unknown-field" || doc.Findings[0].File != "pools.cue" {
		t.Fatalf("doc = %+v", doc)
	}
}

// TestPlanCommentEscapesTheRepository: whoever opens a pull request writes the
// text the PR comment quotes (a cost centre, a finding's message, a file's
// name). In the comment finance reviews it reads as written and does nothing
// else: no image, no link, no raw HTML, no @mention that notifies a team, no
// code span it can end. The approvers the comment asks for stay mentions.
func TestPlanCommentEscapesTheRepository(t *testing.T) {
	base, head := copyExamples(t), copyExamples(t)
	edit(t, head, "teams/robotics.cue", "nominal: 128", "nominal: 160")
	hostile := "CC ![x](https://evil.example/p.png) [pay here](https://evil.example) <img src=x onerror=alert(1)> @acme/everyone `code` | cell"
	edit(t, head, "teams/robotics.cue", `costCenter: "`, `costCenter: "`+strings.ReplaceAll(hostile, `"`, `\"`)+` `)
	// A file whose name would end a code span, with an error in it.
	if err := os.WriteFile(filepath.Join(head, "a`![y](https:x)`.cue"), []byte("package capacity\ntiers: \"system-x\": priority: 12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A pool of a name no rule lets through, with a burst: its envelope is listed.
	edit(t, head, "pools.cue", "pools: {\n", "pools: {\n\t\"e ![z](https://evil.example/z.png)\": {cluster: \"gke-usc1\", flavor: \"h100-80gb\", machineType: \"a3-highgpu-8g\", "+
		"gpusPerNode: 8, nodes: {min: 0, max: 2}, price: onDemandPerNodeHour: 1, burst: maxNodes: 1}\n")
	t.Chdir(head) // the file is named as the working directory sees it
	code, out, stderr := allot(t, nil, "plan", ".", "--base", base, "-o", "markdown")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the file's error):\n%s%s", code, out, stderr)
	}
	// Each construct unescaped (the file's name is inside a code span that
	// it cannot end: checked below).
	for _, bad := range []string{"![x](", "![z](", "[pay here](", "<img", "@acme/everyone", " `code`", " | cell"} {
		if strings.Contains(out, bad) {
			t.Errorf("the comment holds %q as Markdown:\n%s", bad, out)
		}
	}
	for _, want := range []string{`\!\[x\](https:&#8203;//evil.example/p.png)`, "&lt;img", "@&#8203;acme/everyone", `\| cell`,
		"``a`![y](https:x)`.cue:", "- [ ] **@acme/robotics-leads**", "#### Envelopes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment lacks %q:\n%s", want, out)
		}
	}
}
