package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plan --observed reads the Pools' status (a kubectl PoolList): a pool below
// what its quotas need gets a warning at its declaration and replacement nodes,
// and the cost follows them.
func TestPlanObserved(t *testing.T) {
	obs := filepath.Join(t.TempDir(), "pools.yaml")
	writePools(t, obs, `{nodes: 9, readyNodes: 7, healthyGPUs: 56}`)
	plan := func(args ...string) map[string]any {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(append([]string{"plan", "../../examples", "-o", "json"}, args...), &out, &errb); code != 0 {
			t.Fatalf("plan exited %d: %s", code, errb.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	pool := func(m map[string]any, name string) map[string]any {
		for _, p := range m["pools"].([]any) {
			if p := p.(map[string]any); p["pool"] == name {
				return p
			}
		}
		t.Fatalf("no pool %s", name)
		return nil
	}
	before, after := plan(), plan("--observed", obs)
	if b, a := pool(before, "eks-p5")["nodes_target"].(float64), pool(after, "eks-p5"); a["nodes_target"].(float64) != b+1 || a["replacement_nodes"].(float64) != 1 {
		t.Errorf("eks-p5: %v nodes before, %v after (replacement %v); want one replacement", b, a["nodes_target"], a["replacement_nodes"])
	}
	// One more p5.48xlarge on demand: 730 x $55.04.
	if d := after["total_monthly_usd"].(float64) - before["total_monthly_usd"].(float64); d < 40179.19 || d > 40179.21 {
		t.Errorf("monthly cost grew by %.2f, want 40179.20", d)
	}
	var found bool
	for _, f := range after["findings"].([]any) {
		f := f.(map[string]any)
		// Named as the repository's own findings are: from the working
		// directory (here outside it: absolute), not from the repository.
		if file, _ := f["file"].(string); f["rule"] == "pool-unhealthy-capacity" && strings.HasSuffix(file, "/examples/pools.cue") && f["severity"] == "warning" {
			found = true
		}
	}
	if !found {
		t.Errorf("no pool-unhealthy-capacity warning at examples/pools.cue: %v", after["findings"])
	}

	var out, errb bytes.Buffer
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: Deployment\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"plan", "../../examples", "--observed", bad}, &out, &errb); code != exitUsage {
		t.Errorf("a Deployment as --observed: exit %d, %s", code, errb.String())
	}
}

// report --observed bills the burst the Pools' managers metered
// (status.burst.metered) per team at the pool's on-demand price; a
// negative meter is bad usage, said where.
func TestReportBillsMeteredBurst(t *testing.T) {
	dir := t.TempDir()
	obs := filepath.Join(dir, "pools.yaml")
	pools := func(seconds string) {
		t.Helper()
		writePools(t, obs, `
    nodes: 8
    readyNodes: 8
    healthyGPUs: 64
    burst:
      burstNodes: 0
      meteredSince: "2026-11-01T00:00:00Z"
      meteredAt: "2026-11-30T00:00:00Z"
      metered: [{team: "<b>search</b>", nodeSeconds: `+seconds+`}]`)
	}
	pools("36000") // 10 node-hours x $55.04
	page := filepath.Join(dir, "report.html")
	var out, errb bytes.Buffer
	if code := run([]string{"report", "../../examples", "-o", page, "--observed", obs}, &out, &errb); code != 0 {
		t.Fatalf("report exited %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, `<section id="burst">`) || !strings.Contains(text, "$550.40") || !strings.Contains(text, "&lt;b&gt;search&lt;/b&gt;") || strings.Contains(text, "<b>search") {
		t.Errorf("the report lacks the burst billed ($550.40 for the team, escaped)")
	}
	pools("-5")
	out.Reset()
	errb.Reset()
	if code := run([]string{"report", "../../examples", "-o", page, "--observed", obs}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "items[0] (Pool eks-p5): status.burst.metered[0]: nodeSeconds -5") {
		t.Errorf("a negative meter: exit %d, %s", code, errb.String())
	}
}

// writePools writes file, a PoolList of pool eks-p5 with status (YAML, after
// "status:").
func writePools(t *testing.T, file, status string) {
	t.Helper()
	list := `apiVersion: v1
kind: List
items:
- apiVersion: allot.dev/v1alpha1
  kind: Pool
  metadata: {name: eks-p5}
  status: ` + status + "\n"
	if err := os.WriteFile(file, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
}
