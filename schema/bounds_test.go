package schema

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
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
		"repair.after a year":      {`pools: a: repair: after: "8760h"`, "pools.a.repair.after", "outside"},
		"repair.after a word":      {`pools: a: repair: after: "soon"`, "pools.a.repair.after", ""},
		"repair.flapWindow 1s":     {`pools: a: repair: flapWindow: "1s"`, "pools.a.repair.flapWindow", "outside"},
		"repair.flaps 1":           {`pools: a: repair: flaps: 1`, "pools.a.repair.flaps", ">=2"},
		"repair.broken":            {`pools: a: repair: broken: "burn"`, "pools.a.repair.broken", ""},
		"burst.maxNodes 0":         {`pools: a: burst: maxNodes: 0`, "pools.a.burst.maxNodes", ">0"},
		"burst.idleAfter 0s":       {`pools: a: burst: {maxNodes: 2, idleAfter: "0s"}`, "pools.a.burst.idleAfter", "outside"},
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
// process (the manager's), so what it reads is bounded before any parsing:
// bytes, .cue files, files and folders looked at, folder depth. Each is a
// finding of rule limit naming where the bound was passed.
func TestLoadBoundsTheSources(t *testing.T) {
	big := "package capacity\n// " + strings.Repeat("x", MaxSourceBytes/2) + "\n"
	many, entries := fstest.MapFS{}, fstest.MapFS{"a.cue": {Data: []byte("package capacity\n")}}
	for i := range MaxSourceFiles + 1 {
		many[fmt.Sprintf("t%02d/f%03d.cue", i/1000, i%1000)] = &fstest.MapFile{Data: []byte("package capacity\n")}
	}
	for i := range MaxEntries {
		entries[fmt.Sprintf("docs/%06d.md", i)] = &fstest.MapFile{}
	}
	deep := strings.Repeat("d/", MaxFolderDepth+1)
	for name, tc := range map[string]struct {
		fsys      fstest.MapFS
		file, msg string
	}{
		"bytes":   {mapFS(map[string]string{"a.cue": big, "b.cue": big, "c.cue": big}), "b.cue", "the repository's .cue files hold more than 16 MiB"},
		"files":   {many, "t10/f000.cue", "the repository holds more than 10000 .cue files"},
		"entries": {entries, "docs", "the repository holds more than 100000 files and folders"},
		"depth":   {mapFS(map[string]string{"a.cue": "package capacity\n", deep + "b.cue": "package capacity\n"}), strings.TrimSuffix(deep, "/"), "folders nest more than 32 levels deep"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, findings := Load(tc.fsys)
			if cfg != nil || len(findings) != 1 {
				t.Fatalf("findings = %.300v, want one", findings)
			}
			if f := findings[0]; f.Rule != RuleLimit || f.Pos.File != tc.file || f.Message != tc.msg {
				t.Errorf("finding = %.300v, want %s: error: limit: %s", f, tc.file, tc.msg)
			}
		})
	}
	// Within the bounds: 32 nested folders.
	cfg, findings := Load(mapFS(map[string]string{"a.cue": minimal, strings.Repeat("d/", MaxFolderDepth) + "b.cue": "package capacity\n"}))
	if cfg == nil || len(findings) > 0 {
		t.Errorf("32 nested folders: %v", findings)
	}
}

// TestLoadRefusesHostileSyntax: what costs the loading process or the
// evaluator out of proportion to its size, or what CUE misreads, is an error
// at its file:line:col before any evaluation. Deep nesting (9,990 fields: 36
// KB) cost the loading process 1 GiB and 3.3 s to index, then the evaluator
// its 1 GiB; a number of 15 million digits, the evaluator its minute;
// 1e100001 was read as 1 and 1.1e-9999999 as 11; tool/exec was accepted.
func TestLoadRefusesHostileSyntax(t *testing.T) {
	const head = "package capacity\n"
	const pool = `pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: `
	for name, tc := range map[string]struct {
		src, pos, rule, msg string
	}{
		"nested fields":    {head + "x: " + strings.Repeat("a: ", 9990) + "1\n", "c.cue:2:148", RuleLimit, "nests more than 100 levels deep (fields, structs, lists and expressions)"},
		"nested structs":   {head + "x: " + strings.Repeat("{a: ", 9990) + "1" + strings.Repeat("}", 9990) + "\n", "c.cue:2:197", RuleLimit, "nests more than 100 levels deep"},
		"nested operators": {head + "x: 1" + strings.Repeat(" + 1", 200) + "\n", "c.cue:2:4", RuleLimit, "nests more than 100 levels deep"},
		"a long number":    {head + "tiers: t: priority: " + strings.Repeat("9", 1_000_000) + "\n", "c.cue:2:21", RuleLimit, "a number of 1000000 characters; at most 64"},
		"a large exponent": {head + pool + "1e100001}\n", "c.cue:2:100", RuleLimit, "1e100001: an exponent beyond ±1000"},
		"a small exponent": {head + pool + "1.1e-9999999}\n", "c.cue:2:100", RuleLimit, "1.1e-9999999: an exponent beyond ±1000"},
		"tool/exec":        {head + "import \"tool/exec\"\n_r: exec.Run & {cmd: [\"true\"]}\n", "c.cue:2:8", RulePackage, `import tool/exec: CUE's tool packages run commands and read files under cue cmd only`},
		"tool/file":        {head + "import \"tool/file\"\n_r: file.Read & {filename: \"/etc/passwd\"}\n", "c.cue:2:8", RulePackage, `import tool/file:`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, findings := Load(mapFS(map[string]string{"c.cue": tc.src}))
			if cfg != nil || len(findings) != 1 {
				t.Fatalf("findings = %.500v, want one", findings)
			}
			if f := findings[0]; f.Pos.String() != tc.pos || f.Rule != tc.rule || !strings.HasPrefix(f.Message, tc.msg) {
				t.Errorf("finding = %.300v, want %s: error: %s: %s", f, tc.pos, tc.rule, tc.msg)
			}
		})
	}
}

// TestCheckNumber: the bounds of a number literal, and the forms of CUE's
// numbers that are within them.
func TestCheckNumber(t *testing.T) {
	for lit, bad := range map[string]bool{
		"1e1000": false, "1.5E-1000": false, "1e+01000": false, "0x1e1001": false, "0b1": false, "0o7": false,
		"1_000_000": false, "1.5Gi": false, "98.32": false, strings.Repeat("9", MaxNumberLength): false,
		"1e1001": true, "1.5E-1001": true, "1e+0001001": true, "1e99999999999999999999": true, strings.Repeat("9", MaxNumberLength+1): true,
	} {
		if got := checkNumber(lit) != ""; got != bad {
			t.Errorf("checkNumber(%.70s) = %q, want an error: %v", lit, checkNumber(lit), bad)
		}
	}
}
