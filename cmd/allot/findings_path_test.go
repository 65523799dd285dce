package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestFindingPathsAgree: a finding names its file the same way in the text,
// the JSON and the GitHub annotation, as compilers do: relative to the working
// directory, or absolute when the file is outside it. Run from the parent of
// the capacity folder, from inside it and from a sibling folder.
func TestFindingPathsAgree(t *testing.T) {
	parent := t.TempDir()
	capDir := filepath.Join(parent, "cap")
	if err := os.Rename(copyExamples(t), capDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(parent, "sib"), 0o755); err != nil {
		t.Fatal(err)
	}
	edit(t, capDir, "teams/robotics.cue", "costCenter:", "costCentre:")
	line := lineOf(t, capDir, "teams/robotics.cue", "costCentre:")
	for _, tc := range []struct{ wd, dir, want string }{
		{parent, "cap", "cap/teams/robotics.cue"},
		{capDir, ".", "teams/robotics.cue"},
		{capDir, capDir, "teams/robotics.cue"},
		{filepath.Join(parent, "sib"), "../cap", filepath.ToSlash(filepath.Join(capDir, "teams", "robotics.cue"))},
	} {
		t.Run(tc.want+" from "+filepath.Base(tc.wd), func(t *testing.T) {
			t.Chdir(tc.wd)
			code, out, _ := allot(t, map[string]string{"GITHUB_ACTIONS": "true"}, "validate", tc.dir)
			if code != 1 {
				t.Fatalf("validate: exit %d\n%s", code, out)
			}
			text := regexp.MustCompile(`(?m)^(.*):(\d+):\d+: error: unknown-field: `).FindStringSubmatch(out)
			annotation := regexp.MustCompile(`(?m)^::error file=([^,]*),line=(\d+),`).FindStringSubmatch(out)
			if text == nil || annotation == nil {
				t.Fatalf("validate printed no finding or no annotation:\n%s", out)
			}
			code, out, _ = allot(t, nil, "plan", tc.dir, "-o", "json")
			var doc struct {
				Findings []struct {
					File string `json:"file"`
					Line int    `json:"line"`
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(out), &doc); code != 1 || err != nil || len(doc.Findings) == 0 {
				t.Fatalf("plan -o json: exit %d, %v\n%s", code, err, out)
			}
			_, md, _ := allot(t, nil, "plan", tc.dir, "-o", "markdown")
			for what, got := range map[string]string{"text": text[1], "annotation": strings.ReplaceAll(annotation[1], "%3A", ":"), "json": doc.Findings[0].File} {
				if got != tc.want {
					t.Errorf("%s names %q, want %q", what, got, tc.want)
				}
			}
			if !strings.Contains(md, tc.want+":"+text[2]+":") || text[2] != annotation[2] || text[2] != strconv.Itoa(line) || doc.Findings[0].Line != line {
				t.Errorf("lines disagree: text %s, annotation %s, json %d, want %d; markdown:\n%s", text[2], annotation[2], doc.Findings[0].Line, line, md)
			}
		})
	}
}

// TestTargetFindingPaths: findings added after the repository is checked
// (--target kueue's approximations) name their files as the repository's
// own do, from the working directory.
func TestTargetFindingPaths(t *testing.T) {
	parent := t.TempDir()
	if err := os.Rename(copyExamples(t), filepath.Join(parent, "cap")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(parent)
	code, out, _ := allot(t, nil, "validate", "cap", "--target", "kueue")
	warnings := regexp.MustCompile(`(?m)^(\S+):\d+:\d+: warning: kueue-`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(warnings) == 0 {
		t.Fatalf("validate --target kueue: exit %d, no kueue warning\n%s", code, out)
	}
	for _, w := range warnings {
		if !strings.HasPrefix(w[1], "cap/") {
			t.Errorf("a kueue warning names %q, not cap/…", w[1])
		}
	}
}
