package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderCodeowners renders the examples' CODEOWNERS (golden) to a file and to
// stdout, and refuses an owner CODEOWNERS would not take, writing nothing.
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

	edit(t, dir, "teams/robotics.cue", `"@acme/robotics-leads"`, `"@acme/robotics-leads\n* @evil"`)
	bad := filepath.Join(t.TempDir(), "CODEOWNERS")
	code, _, errOut = allot(t, nil, "render", dir, "--codeowners", bad)
	if code != exitUsage || !strings.Contains(errOut, "teams.robotics.owners (teams/robotics.cue:") || !strings.Contains(errOut, "is not a CODEOWNERS owner") {
		t.Errorf("bad owner: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("a CODEOWNERS was written for a bad owner: %v", err)
	}
}
