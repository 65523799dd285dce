package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecommendOnExamples: the JSON carries docs/contracts.md's contract, and the
// report draws its curve from it.
func TestRecommendOnExamples(t *testing.T) {
	ex := filepath.Join("..", "..", "examples")
	code, stdout, stderr := allot(t, nil, "recommend", ex, "--workload", filepath.Join(ex, "workloads", "mixed.csv"),
		"--target", "wait_p95=15m", "--target", "production:wait_p95=10m", "-o", "json", "--curve", "1")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not only JSON: %v\n%s", err, stdout)
	}
	for _, k := range []string{"target", "teams", "pools", "monthly_usd_before", "monthly_usd_after", "committed", "curve"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in the JSON", k)
		}
	}
	teams := got["teams"].([]any)
	for _, k := range []string{"team", "flavor", "nominal_before", "nominal_after", "wait_p95_s_before", "wait_p95_s_after"} {
		if _, ok := teams[0].(map[string]any)[k]; !ok {
			t.Errorf("no %q in a team", k)
		}
	}
	if w := got["target"].(map[string]any)["wait_p95_s"]; w != 900.0 {
		t.Errorf("target wait %v, want 900", w)
	}
	file := filepath.Join(t.TempDir(), "rec.json")
	if err := os.WriteFile(file, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(t.TempDir(), "report.html")
	if code, _, stderr := allot(t, nil, "report", ex, "--recommendation", file, "-o", html); code != 0 {
		t.Fatalf("report: exit %d, %s", code, stderr)
	}
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), `<section id="sizing">`) || !strings.Contains(string(page), "← recommended") {
		t.Errorf("the report has no cost-versus-wait chart")
	}
}

func TestRecommendBadUsage(t *testing.T) {
	ex := filepath.Join("..", "..", "examples")
	wl := filepath.Join(ex, "workloads", "mixed.csv")
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no target":    {[]string{"--workload", wl}, "needs --target"},
		"bad target":   {[]string{"--workload", wl, "--target", "p95=1m"}, "want [TEAM_OR_TIER:]wait_p95=DURATION"},
		"unknown team": {[]string{"--workload", wl, "--target", "nobody:wait_p95=1m"}, "no team or tier is named nobody"},
		"no workload":  {[]string{"--target", "wait_p95=1m"}, "needs --workload"},
		"bad output":   {[]string{"--workload", wl, "--target", "wait_p95=1m", "-o", "yaml"}, "want text, markdown or json"},
		"bad grid":     {[]string{"--workload", wl, "--target", "wait_p95=1m", "--grid", "500ms"}, "want auto, off or a duration of at least 1s"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, stderr := allot(t, nil, append([]string{"recommend", ex}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}
