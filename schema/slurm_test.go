package schema

import (
	"regexp"
	"testing"
)

// TestSlurmNameOnePattern: the CUE definition and the Go pattern that the
// policies and the renderer check are one.
func TestSlurmNameOnePattern(t *testing.T) {
	src, err := definitions.ReadFile("pool.cue")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#SlurmName: =~"(.*)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("pool.cue has no #SlurmName")
	}
	if string(m[1]) != SlurmName.String() {
		t.Errorf("#SlurmName %s, schema.SlurmName %s", m[1], SlurmName)
	}
	for name, want := range map[string]bool{"gpu": true, "h100-80gb": true, "a_b": true, "": false, "1gpu": false,
		"Gpu": false, "gpu[1-4]": false, "a,b": false, "a=b": false, "-a": false, "a b": false, "a\n": false} {
		if SlurmName.MatchString(name) != want {
			t.Errorf("SlurmName(%q) = %v, want %v", name, !want, want)
		}
	}
}
