package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var writeFleetDir = flag.String("write-fleet", "", "write the 500-team benchmark repository to DIR/base and DIR/head")

// writeFleet writes a generated capacity repository: clusters, 5 pools per
// cluster over 5 flavors, nested cohorts, and one file per team. bump raises every
// tenth team's first quota, as a pull request would.
func writeFleet(tb testing.TB, dir string, clusters, teams, bump int) {
	tb.Helper()
	providers := []string{"gke", "eks", "onprem", "kwok"}
	var b strings.Builder
	b.WriteString("package capacity\n\n")
	for c := range clusters {
		fmt.Fprintf(&b, "clusters: \"c%02d\": provider: %q\n", c, providers[c%len(providers)])
	}
	for c := range clusters {
		for p := range 5 {
			fmt.Fprintf(&b, `pools: "c%02d-p%d": {
	cluster: "c%02d", flavor: "gpu%d", machineType: "gpu-8g", gpusPerNode: 8, nodes: {min: 0, max: 2000}
	topology: {levels: ["block", "rack", "host"], hostsPerRack: 16, racksPerBlock: 8}
	price: {onDemandPerNodeHour: %d.%02d, committedPerNodeHour: 20.5, committedNodes: 10}
	headroom: 0.1, spareNodes: 2
}
`, c, p, c, p, 20+p*7+c, c*3)
		}
	}
	b.WriteString(`tiers: {
	critical: priority: 1000
	production: priority: 500
	research: {priority: 100, preemptible: true}
	opportunist: {priority: 0, preemptible: true, borrowOnly: true}
}
cohorts: org: {}
`)
	for k := range 10 {
		fmt.Fprintf(&b, "cohorts: \"co%d\": parent: \"org\"\n", k)
	}
	write := func(name, s string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("fleet.cue", b.String())
	for t := range teams {
		n := 16 + (t%7)*8
		if bump > 0 && t%10 == 0 {
			n += bump
		}
		write(fmt.Sprintf("teams/team-%03d.cue", t), fmt.Sprintf(`package capacity

teams: "team-%03d": {
	costCenter: "CC-%d"
	owners: ["@team-%03d"]
	cohort: "co%d"
	quota: {
		"gpu%d": {nominal: %d, borrowingLimit: 64}
		"gpu%d": {nominal: %d}
	}
	budget: monthlyUSD: 10000000
}
`, t, 1000+t%40, t, t%10, t%5, n, (t+1)%5, 8))
	}
}

// BenchmarkValidateAndPlanBase runs what CI runs on a pull request, validate and
// plan --base, on a generated repository of 500 teams, 50 pools and 10 clusters.
func BenchmarkValidateAndPlanBase(b *testing.B) {
	base, head := b.TempDir(), b.TempDir()
	writeFleet(b, base, 10, 500, 0)
	writeFleet(b, head, 10, 500, 8)
	b.ResetTimer()
	for b.Loop() {
		if code := run([]string{"validate", head, "--base", base}, io.Discard, io.Discard); code != 0 {
			b.Fatalf("validate: exit %d", code)
		}
		if code := run([]string{"plan", head, "--base", base, "-o", "markdown"}, io.Discard, io.Discard); code != 0 {
			b.Fatalf("plan: exit %d", code)
		}
	}
	b.StopTimer()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
	}
}

// TestGeneratedFleetIsValid keeps the benchmark honest: its input is a valid
// repository whose plan has a diff.
func TestGeneratedFleetIsValid(t *testing.T) {
	if *writeFleetDir != "" { // make bench: write the full-size repository for the binary's figures
		writeFleet(t, filepath.Join(*writeFleetDir, "base"), 10, 500, 0)
		writeFleet(t, filepath.Join(*writeFleetDir, "head"), 10, 500, 8)
		return
	}
	base, head := t.TempDir(), t.TempDir()
	writeFleet(t, base, 2, 20, 0)
	writeFleet(t, head, 2, 20, 8)
	code, out, errOut := allot(t, nil, "plan", head, "--base", base, "-o", "json")
	if code != 0 || !strings.Contains(out, `"nominal_after": 24`) {
		t.Fatalf("exit %d\n%s\n%s", code, errOut, out[:min(len(out), 2000)])
	}
}
