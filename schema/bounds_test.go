package schema

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoadRejectsHostileValues: every string that names a cloud thing is
// restricted to the characters such a name has, and every number has an upper
// bound; each is an error at its own line, naming the field.
func TestLoadRejectsHostileValues(t *testing.T) {
	const head = "package capacity\nclusters: lab: provider: \"kwok\"\ntiers: t: priority: 1\n"
	const pool = `pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: 1.5}` + "\n"
	const team = `teams: x: quota: f: nominal: 8` + "\n"
	for name, tc := range map[string]struct {
		line      string // the fourth line of the file
		wantField string
		wantText  string
	}{
		"template in machineType":  {`pools: a: machineType: "${file(\"/var/run/secrets/kubernetes.io/serviceaccount/token\")}"`, "pools.a.machineType", "a cloud name has letters"},
		"directive in machineType": {`pools: a: machineType: "%{ if true }x%{ endif }"`, "pools.a.machineType", "cloud name"},
		"newline in region":        {`clusters: lab: region: "us-east1\nx"`, "clusters.lab.region", "cloud name"},
		"space in region":          {`clusters: lab: region: "us east1"`, "clusters.lab.region", "cloud name"},
		"long machineType":         {`pools: a: machineType: "` + strings.Repeat("a", 64) + `"`, "pools.a.machineType", "cloud name"},
		"gpusPerNode 10^8":         {`pools: a: gpusPerNode: 100000000`, "pools.a.gpusPerNode", "<=128"},
		"nodes.max 10^8":           {`pools: a: nodes: max: 100000000`, "pools.a.nodes.max", "<=100000"},
		"nodes.min 10^8":           {`pools: a: nodes: min: 100000000`, "pools.a.nodes.min", "<=100000"},
		"spareNodes":               {`pools: a: spareNodes: 1000000`, "pools.a.spareNodes", "<=100000"},
		"committedNodes":           {`pools: a: price: committedNodes: 1000000`, "pools.a.price.committedNodes", "<=100000"},
		"price":                    {`pools: a: price: onDemandPerNodeHour: 1e300`, "pools.a.price.onDemandPerNodeHour", "<=1000000"},
		"headroom":                 {`pools: a: headroom: 1e18`, "pools.a.headroom", "<=10"},
		"hostsPerRack":             {`pools: a: topology: {levels: ["rack", "host"], hostsPerRack: 1000000000}`, "pools.a.topology.hostsPerRack", "<=100000"},
		"domainSize":               {`pools: a: topology: {levels: ["host"], domainSize: host: 1000000000}`, "pools.a.topology.domainSize.host", "<=100000"},
		"nominal near 2^62":        {`teams: x: quota: f: nominal: 4611686018427387904`, "teams.x.quota.f.nominal", "<=10000000"},
		"borrowingLimit":           {`teams: x: quota: f: borrowingLimit: 9223372036854775807`, "teams.x.quota.f.borrowingLimit", "<=10000000"},
		"lendingLimit":             {`teams: x: quota: f: lendingLimit: 20000000`, "teams.x.quota.f.lendingLimit", "<=10000000"},
		"budget":                   {`teams: x: budget: monthlyUSD: 1e30`, "teams.x.budget.monthlyUSD", "<=1000000000000"},
		"weight":                   {`teams: x: weight: 1e30`, "teams.x.weight", "<=1000000"},
		"finance threshold":        {`policy: financeApprovalAboveMonthlyUSD: 1e30`, "policy.financeApprovalAboveMonthlyUSD", "<=1000000000000"},
	} {
		t.Run(name, func(t *testing.T) {
			src := head + tc.line + "\n" + pool + team
			cfg, findings := Load(mapFS(map[string]string{"c.cue": src}))
			if cfg != nil {
				t.Fatalf("loaded; want an error at c.cue:4")
			}
			for _, f := range findings {
				if f.Severity == SeverityError && f.Pos.File == "c.cue" && f.Pos.Line == 4 &&
					strings.HasPrefix(f.Message, tc.wantField+":") && strings.Contains(f.Message, tc.wantText) {
					return
				}
			}
			t.Errorf("findings = %v, want an error at c.cue:4: %s: ...%s...", findings, tc.wantField, tc.wantText)
		})
	}
}

// TestLoadBoundsTheFleet: pools each within their bound still cannot add up to
// more nodes than render and sim are built for.
func TestLoadBoundsTheFleet(t *testing.T) {
	var b strings.Builder
	b.WriteString("package capacity\nclusters: lab: provider: \"kwok\"\n")
	for i := range MaxFleetNodes/100000 + 1 {
		fmt.Fprintf(&b, "pools: p%02d: {cluster: \"lab\", flavor: \"f\", gpusPerNode: 8, nodes: max: 100000, price: onDemandPerNodeHour: 1}\n", i)
	}
	cfg, findings := Load(mapFS(map[string]string{"c.cue": b.String()}))
	if cfg != nil || len(findings) != 1 {
		t.Fatalf("want one finding, got %v", findings)
	}
	if f := findings[0]; f.Pos.Line != 13 || !strings.Contains(f.Message, "pools.p10.nodes.max: the pools' nodes.max add up to more than 1000000 nodes") {
		t.Errorf("finding = %s", f)
	}
}

// TestLoadBoundsTheSources: the .cue files are read and parsed in the loading
// process (the manager's), so their size is bounded before any parsing.
func TestLoadBoundsTheSources(t *testing.T) {
	big := "package capacity\n// " + strings.Repeat("x", MaxSourceBytes/2) + "\n"
	cfg, findings := Load(mapFS(map[string]string{"a.cue": big, "b.cue": big, "c.cue": big}))
	if cfg != nil || len(findings) != 1 || findings[0].Pos.File != "b.cue" || !strings.Contains(findings[0].Message, "hold more than 16 MiB") {
		t.Errorf("findings = %.300v", findings)
	}
}
