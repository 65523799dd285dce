package ci

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var (
	// metricLiteral is a metric name as the code declares it.
	metricLiteral = regexp.MustCompile(`"(allot_[a-z0-9_]+)"`)
	// metricRef is a metric name as a query uses it.
	metricRef = regexp.MustCompile(`\ballot_[a-z0-9_]+\b`)
)

// exportedMetrics are the allot_* metric names the code (not its tests) declares.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("found only %d metrics in the code: the scan is wrong", len(out))
	}
	return out
}

// checkQuery fails for a query naming a metric the code does not export, or
// whose parentheses and braces do not balance.
func checkQuery(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: %q names no allot metric", where, expr)
	}
	for _, r := range refs {
		base := r
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(r, suf); ok && exported[b] {
				base = b
			}
		}
		if !exported[base] {
			t.Errorf("%s: %s is not a metric allot exports", where, r)
		}
	}
	depth := map[rune]int{}
	for _, c := range expr {
		switch c {
		case '(', '{', '[':
			depth[c]++
		case ')':
			depth['(']--
		case '}':
			depth['{']--
		case ']':
			depth['[']--
		}
	}
	for c, d := range depth {
		if d != 0 {
			t.Errorf("%s: unbalanced %c in %q", where, c, expr)
		}
	}
}

// The alerts reference only metrics that exist, and each says what to do.
func TestAlertsUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	b, err := os.ReadFile("../config/monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Kind       string
		Metadata   map[string]any
		Spec       struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Alert       string
					Expr        string
					For         string
					Labels      map[string]string
					Annotations map[string]string
				}
			}
		}
	}
	if err := yaml.UnmarshalStrict(b, &rule); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Fatalf("alerts.yaml is a %q, want a PrometheusRule", rule.Kind)
	}
	var names []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			checkQuery(t, "alert "+r.Alert, r.Expr, exported)
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
		}
	}
	// The alerts issue 7 asks for.
	for _, want := range []string{"AllotTeamPendingWhileQuotaIdle", "AllotPoolBelowQuota", "AllotGPUFatalFault", "AllotCapacitySourceStalled"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

// The dashboard's panels query only metrics that exist.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	b, err := os.ReadFile("../config/monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 && p.Type != "row" {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkQuery(t, "panel "+p.Title, tg.Expr, exported)
			for _, r := range metricRef.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(r, "_bucket")] = true
			}
		}
	}
	// What a team and an operator look at first is on it.
	for _, m := range []string{"allot_team_used_gpus", "allot_team_quota_nominal_gpus", "allot_team_pending_workloads",
		"allot_scheduler_admission_wait_seconds", "allot_scheduler_preemptions_total", "allot_pool_healthy_gpus", "allot_team_gpu_seconds_total"} {
		if !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}
