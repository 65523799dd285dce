package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanProvenance plans a commit of a repository against its parent, with the
// directory given as an absolute path: the comment's footer and the HTML report
// name both commits and the commit's date (or SOURCE_DATE_EPOCH), and neither
// shows an absolute path.
func TestPlanProvenance(t *testing.T) {
	repo := t.TempDir()
	commit := func(msg, date string) string {
		git(t, repo, "add", "-A")
		cmd := exec.Command("git", "-C", repo, "commit", "-qm", msg)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE="+date, "GIT_AUTHOR_DATE="+date)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git commit: %v\n%s", err, out)
		}
		return strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))
	}
	git(t, repo, "init", "-q", "-b", "main")
	dir := filepath.Join(repo, "capacity")
	if err := os.Rename(copyExamples(t), dir); err != nil {
		t.Fatal(err)
	}
	base := commit("base", "2026-11-01T10:00:00Z")
	edit(t, dir, "teams/speech.cue", "nominal: 48", "nominal: 64")
	head := commit("raise", "2026-11-02T12:30:00Z")

	code, out, errOut := allot(t, map[string]string{"SOURCE_DATE_EPOCH": ""}, "plan", dir, "--base", "HEAD~1", "-o", "markdown")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	want := "<sub>allot plan of commit " + head[:12] + " (base " + base[:12] + "), 2026-11-02T12:30:00Z</sub>"
	if !strings.Contains(out, want) {
		t.Errorf("the comment lacks %q:\n%s", want, out[max(0, len(out)-400):])
	}
	if strings.Contains(out, repo) {
		t.Errorf("the comment shows the absolute path %s", repo)
	}

	code, out, errOut = allot(t, map[string]string{"SOURCE_DATE_EPOCH": "1790000000"}, "report", dir, "--base", "HEAD~1", "-o", "-")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, errOut)
	}
	for _, w := range []string{"Configuration <code>capacity</code>", "Made from commit " + head[:12] + " (base " + base[:12] + "), 2026-09-21T"} {
		if !strings.Contains(out, w) {
			t.Errorf("the report lacks %q", w)
		}
	}
	if strings.Contains(out, repo) {
		t.Errorf("the report shows the absolute path %s", repo)
	}

	code, _, errOut = allot(t, map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}, "plan", dir, "-o", "markdown")
	if code != exitUsage || !strings.Contains(errOut, `SOURCE_DATE_EPOCH="yesterday"`) {
		t.Errorf("bad SOURCE_DATE_EPOCH: exit %d, stderr %q", code, errOut)
	}
}

// TestPlanSimulateWithErrors: with errors the what-if is not replayed, and the
// comment says so instead of leaving it out silently; the first line leads with
// the error.
func TestPlanSimulateWithErrors(t *testing.T) {
	prChange(t)
	edit(t, "head", "teams/robotics.cue", "monthlyUSD: 500000", "monthlyUSD: 1")
	code, out, _ := allot(t, nil, "plan", "head", "--base", "base", "-o", "markdown", "--simulate", mixed)
	if code != exitFindings {
		t.Fatalf("exit %d, want %d", code, exitFindings)
	}
	lines := strings.SplitN(out, "\n", 3)
	if lines[0] != "<!-- allot-plan -->" || !strings.HasPrefix(lines[1], "### allot plan: ✗ 1 error: team-budget — **Monthly cost +$160,716.80") {
		t.Errorf("first lines:\n%s\n%s", lines[0], lines[1])
	}
	if !strings.Contains(out, "**What-if not simulated**: the configuration has errors") {
		t.Errorf("the comment does not say why the what-if was not replayed:\n%s", out)
	}
}
