package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestVersionTextJSONAndFlag(t *testing.T) {
	code, text, stderr := allot(t, nil, "version")
	if code != 0 || stderr != "" {
		t.Fatalf("version: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"allot ", "commit:", "built:", "terraform:  >= 1.5.0 (tested with ", "k8s.io/client-go v0.", "cuelang.org/go v0.", "sigs.k8s.io/controller-runtime v0."} {
		if !strings.Contains(text, want) {
			t.Errorf("version text lacks %q:\n%s", want, text)
		}
	}
	code, flag, _ := allot(t, nil, "--version")
	if code != 0 || flag != text {
		t.Errorf("--version: exit %d, %q; want exit 0 and the text of allot version %q", code, flag, text)
	}
	code, out, _ := allot(t, nil, "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("version -o json: exit %d, %v:\n%s", code, err, out)
	}
	if v.Version == "" || v.Go == "" || v.Terraform.Required == "" || v.Dependencies["k8s.io/client-go"] == "" || v.Dependencies["cuelang.org/go"] == "" {
		t.Errorf("version -o json = %+v: want version, go, terraform and the dependencies", v)
	}
	if code, _, stderr := allot(t, nil, "version", "-o", "yaml"); code != 2 || !strings.Contains(stderr, "want text or json") {
		t.Errorf("version -o yaml: exit %d, %q; want 2 and the choices", code, stderr)
	}
}

// TestVersionFromLdflags: what make build stamps with -ldflags -X wins over the
// build info.
func TestVersionFromLdflags(t *testing.T) {
	old := [3]string{version, commit, date}
	t.Cleanup(func() { version, commit, date = old[0], old[1], old[2] })
	version, commit, date = "v1.2.3", "abc123", "2026-01-02T03:04:05Z"
	v := readVersion()
	if v.Version != "v1.2.3" || v.Commit != "abc123" || v.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("readVersion() = %+v, want the -X values", v)
	}
	if code, out, _ := allot(t, nil, "--version"); code != 0 || !strings.HasPrefix(out, "allot v1.2.3\n  commit:     abc123") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}
