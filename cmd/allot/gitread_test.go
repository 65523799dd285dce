package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/gittest"
)

// hostileChange makes a repository whose main holds the examples under
// capacity/, and checks out a change raising robotics' H100 quota (finance
// must approve) whose files try to make Git obey them (gittest.Hostile); it
// returns the work tree's top and the marker a program run would write.
func hostileChange(t *testing.T) (top, marker string) {
	t.Helper()
	top, marker = t.TempDir(), filepath.Join(t.TempDir(), "ran")
	git(t, top, "init", "-q", "-b", "main")
	if err := os.CopyFS(filepath.Join(top, "capacity"), os.DirFS(copyExamples(t))); err != nil {
		t.Fatal(err)
	}
	git(t, top, "add", "-A")
	git(t, top, "commit", "-qm", "capacity")
	git(t, top, "update-ref", "refs/remotes/origin/main", "main")
	git(t, top, "checkout", "-q", "-b", "change")
	edit(t, filepath.Join(top, "capacity"), "teams/robotics.cue", "nominal: 128", "nominal: 160")
	gittest.Hostile(t, top, "capacity", marker)
	git(t, top, "add", "-A")
	git(t, top, "commit", "-qm", "robotics: 160 H100, and a repository of its own")
	return top, marker
}

// asksFinance reports whether a plan -o json's approvals include finance.
func asksFinance(t *testing.T, out string) bool {
	t.Helper()
	var p struct {
		Diff struct {
			Approvals []struct{ Role string } `json:"approvals"`
		} `json:"diff"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%.300s", err, out)
	}
	for _, a := range p.Diff.Approvals {
		if a.Role == "finance" {
			return true
		}
	}
	return false
}

// TestGitIsOnlyReadNeverObeyed: a change whose capacity folder looks like a
// Git repository naming programs and its own origin/main, with attributes
// asking for a textconv and a filter, and a folder origin/main holding its own
// files: planned from the top of the checkout as CI does (and from inside the
// capacity folder), nothing it names runs and the base is the checkout's
// origin/main, whose cost change finance must approve. A bare --base that is
// both a folder and a ref is refused, never guessed.
func TestGitIsOnlyReadNeverObeyed(t *testing.T) {
	top, marker := hostileChange(t)
	t.Chdir(top)
	for _, tc := range []struct{ dir, base string }{
		{"capacity", "ref:origin/main"},
		{"capacity", "ref:main"},
		{"capacity", "main"},
		{".", "ref:refs/remotes/origin/main"}, // from inside the capacity folder
	} {
		if tc.dir == "." {
			t.Chdir(filepath.Join(top, "capacity"))
		}
		for _, format := range []string{"json", "markdown"} {
			code, out, errOut := allot(t, map[string]string{"SOURCE_DATE_EPOCH": "", "GITHUB_ACTIONS": "true"}, "plan", tc.dir, "--base", tc.base, "-o", format)
			if code != 0 {
				t.Fatalf("plan %s --base %s: exit %d\n%s", tc.dir, tc.base, code, errOut)
			}
			if format == "json" && !asksFinance(t, out) {
				t.Errorf("plan %s --base %s: finance is not asked:\n%.600s", tc.dir, tc.base, out)
			}
		}
		for _, cmd := range []string{"validate", "report"} {
			args := []string{cmd, tc.dir, "--base", tc.base}
			if cmd == "report" {
				args = append(args, "-o", filepath.Join(t.TempDir(), "r.html"))
			}
			if code, _, errOut := allot(t, nil, args...); code != 0 {
				t.Errorf("%v: exit %d\n%s", args, code, errOut)
			}
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a program the change named ran (%s exists)", marker)
	}

	t.Chdir(top)
	code, _, errOut := allot(t, nil, "plan", "capacity", "--base", "origin/main", "-o", "json")
	if code != exitUsage || !strings.Contains(errOut, "--base origin/main is both a directory and a Git ref") || !strings.Contains(errOut, "--base ref:origin/main or --base dir:origin/main") {
		t.Errorf("a bare --base naming both a folder and a ref: exit %d, want %d saying which to write:\n%s", code, exitUsage, errOut)
	}
	// dir: is the folder, as asked: the change against itself.
	code, out, errOut := allot(t, nil, "plan", "capacity", "--base", "dir:origin/main", "-o", "json")
	if code != 0 || asksFinance(t, out) {
		t.Errorf("--base dir:origin/main: exit %d, finance asked %v, want 0 and not asked (the change itself)\n%s", code, asksFinance(t, out), errOut)
	}
}

// TestHostileFileNamesStartNoWorkflowCommand: .cue files named with a newline
// and "::stop-commands::", a forged "::notice", "##[error]", '%', ':' and ','
// hold errors; under GitHub Actions no line of allot's output starts with ::
// (after blanks, lines ending at \n or \r) but allot's own annotations, whose
// file property escapes every one of those characters.
func TestHostileFileNamesStartNoWorkflowCommand(t *testing.T) {
	dir := copyExamples(t)
	names := []string{"a\n::stop-commands::x.cue", "b\r::notice::forged.cue", "::error::c.cue", " ##[error]d.cue", "50%:,e.cue"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("package capacity\nnot valid {\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	own := regexp.MustCompile(`^::(error|warning) file=[^:,\r\n]*,line=\d+,col=\d+,title=allot [a-z-]+::[^\r\n]*$`)
	for _, args := range [][]string{{"validate", dir}, {"plan", dir}, {"plan", dir, "--base", "dir:" + dir}} {
		code, out, errOut := allot(t, map[string]string{"GITHUB_ACTIONS": "true"}, args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want the errors found", args)
		}
		annotations := 0
		for _, line := range regexp.MustCompile(`\r\n|\r|\n`).Split(out+errOut, -1) {
			if strings.Contains(line, "##[") && !own.MatchString(line) { // GitHub reads an own annotation as one
				t.Errorf("%v: a line holds ##[: %q", args, line)
			}
			if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "::") {
				continue
			}
			if !own.MatchString(line) {
				t.Errorf("%v: a line GitHub reads as a command that allot did not make: %q", args, line)
			}
			annotations++
		}
		if annotations < len(names) {
			t.Errorf("%v: %d annotations, want one per file at least:\n%s%s", args, annotations, out, errOut)
		}
	}
}
