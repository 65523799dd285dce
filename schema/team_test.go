package schema

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A team's namespaces are loaded; one that is no namespace name is refused at
// its file:line.
func TestTeamNamespaces(t *testing.T) {
	src := strings.Replace(minimal, `teams: x: {cohort: "c",`, `teams: x: {cohort: "c", namespaces: ["shared", "ml-jobs"],`, 1)
	cfg, findings := Load(mapFS(map[string]string{"capacity.cue": src}))
	if len(findings) > 0 || cfg == nil {
		t.Fatalf("findings: %v", findings)
	}
	if got := cfg.Teams["x"].Namespaces; !slices.Equal(got, []string{"shared", "ml-jobs"}) {
		t.Fatalf("namespaces = %v", got)
	}
	bad := strings.Replace(minimal, `teams: x: {cohort: "c",`, `teams: x: {cohort: "c", namespaces: ["Shared_NS"],`, 1)
	_, findings = Load(mapFS(map[string]string{"capacity.cue": bad}))
	if !findings.HasErrors() || !strings.Contains(fmt.Sprint(findings), "capacity.cue:6:") {
		t.Fatalf("findings = %v, want an error at capacity.cue:6", findings)
	}
}
