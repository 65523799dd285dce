package main

import (
	"encoding/json"
	"fmt"
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

// TestRecommendCurveSaysWhyItRises: on the examples, every size of the cost-
// against-wait curve whose p95 is longer than the next smaller size's carries
// the reason in JSON (why), in the text (a mark on its row and a note) and in
// the report (the row's title); the sizes that do not rise carry none.
func TestRecommendCurveSaysWhyItRises(t *testing.T) {
	args := []string{"recommend", filepath.Join("..", "..", "examples"), "--workload", mixed, "--target", "wait_p95=15m", "--curve", "2"}
	code, out, errOut := allot(t, nil, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Curve []struct {
			Flavor   string   `json:"flavor"`
			GPUs     int      `json:"gpus"`
			WaitP95S *float64 `json:"wait_p95_s"`
			Why      string   `json:"why"`
		} `json:"curve"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	_, text, _ := allot(t, nil, args...)
	rises := 0
	for i, p := range doc.Curve {
		rise := i > 0 && doc.Curve[i-1].Flavor == p.Flavor && (p.WaitP95S == nil && doc.Curve[i-1].WaitP95S != nil ||
			p.WaitP95S != nil && doc.Curve[i-1].WaitP95S != nil && *p.WaitP95S > *doc.Curve[i-1].WaitP95S)
		if (p.Why != "") != rise {
			t.Errorf("%s at %d GPUs: why %q, rises: %v", p.Flavor, p.GPUs, p.Why, rise)
		}
		if rise {
			rises++
			if !strings.Contains(text, fmt.Sprintf("%s at %d GPUs: ", p.Flavor, p.GPUs)) || !strings.Contains(text, p.Why) {
				t.Errorf("the text does not say why %s at %d GPUs waits longer:\n%s", p.Flavor, p.GPUs, text)
			}
		}
	}
	if strings.Count(text, "↑ longer: see below") != rises {
		t.Errorf("%d rising sizes, %d marked:\n%s", rises, strings.Count(text, "↑ longer: see below"), text)
	}
	t.Logf("%d of %d sizes wait longer than the next smaller one", rises, len(doc.Curve))
}
