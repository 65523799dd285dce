package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			[]string{"teams/robotics.cue:5:11: error: name-format: team robotics: owners[0]: \"@acme/robotics-leads\\n* @evil\" is not a CODEOWNERS owner"}},
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
