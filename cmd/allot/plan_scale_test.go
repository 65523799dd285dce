package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanMarkdownAtScale keeps the pull-request comment short in an organisation
// of 500 teams, whatever the change: one team, every team, every team with
// errors. It leads with the errors, lists the changed team before the fold and
// sums up the cost moved to the others in one line.
func TestPlanMarkdownAtScale(t *testing.T) {
	const teams, limit = 500, 30000
	base := t.TempDir()
	writeFleet(t, base, 10, teams, 0)
	// One job per team, on its second flavor, for the what-if.
	var w strings.Builder
	w.WriteString("id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer\n")
	for i := range teams {
		fmt.Fprintf(&w, "job-%03d,%d,3600,team-%03d,production,1,8,gpu%d,,\n", i, i, i, (i+1)%5)
	}
	jobs := filepath.Join(t.TempDir(), "jobs.csv")
	if err := os.WriteFile(jobs, []byte(w.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, head string)
		code   int
		want   []string
	}{
		{"one team", func(t *testing.T, head string) {
			edit(t, head, "teams/team-007.cue", "{nominal: 8}", "{nominal: 16}")
		}, 0, []string{
			"| team-007 | gpu3 | 8 | 16 | +8 |",
			"other teams by pooled prices: ",
		}},
		{"every team", func(t *testing.T, head string) {
			for i := range teams {
				edit(t, head, fmt.Sprintf("teams/team-%03d.cue", i), "{nominal: 8}", "{nominal: 16}")
			}
		}, 0, []string{"more quota changes: see `allot plan -o json`"}},
		{"every team over budget", func(t *testing.T, head string) {
			for i := range teams {
				edit(t, head, fmt.Sprintf("teams/team-%03d.cue", i), "{nominal: 8}", "{nominal: 16}")
				edit(t, head, fmt.Sprintf("teams/team-%03d.cue", i), "monthlyUSD: 10000000", "monthlyUSD: 1")
			}
		}, 1, []string{"### allot plan: ✗ 500 errors: team-budget — **Monthly cost", "more findings"}},
		{"every team simulated", func(t *testing.T, head string) {
			for i := range teams {
				edit(t, head, fmt.Sprintf("teams/team-%03d.cue", i), "{nominal: 8}", "{nominal: 16}")
			}
		}, 0, []string{"#### What-if: 500 jobs of `", "460 more teams' figures are in `allot plan -o json`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := t.TempDir()
			writeFleet(t, head, 10, teams, 0)
			tc.change(t, head)
			args := []string{"plan", head, "--base", base, "-o", "markdown"}
			if strings.HasSuffix(tc.name, "simulated") {
				args = append(args, "--simulate", jobs)
			}
			code, out, errOut := allot(t, nil, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, errOut)
			}
			if len(out) >= limit {
				t.Errorf("the comment is %d bytes, want under %d", len(out), limit)
			}
			t.Logf("%d bytes", len(out))
			if !strings.HasPrefix(out, "<!-- allot-plan -->\n### allot plan: ") {
				t.Errorf("the comment does not start with the marker and the verdict:\n%s", out[:min(len(out), 300)])
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the comment lacks %q:\n%s", w, out[:min(len(out), 3000)])
				}
			}
		})
	}
}
