package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

const minimal = `package capacity
clusters: lab: provider: "kwok"
pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: 1.5}
tiers: t: priority: 1
cohorts: c: {}
teams: x: {cohort: "c", quota: f: {nominal: 8, borrowingLimit: 4}}
`

func TestLoadTypedValuesAndDefaults(t *testing.T) {
	cfg, findings := Load(mapFS(map[string]string{"capacity.cue": minimal}))
	if len(findings) > 0 || cfg == nil {
		t.Fatalf("findings: %v", findings)
	}
	p := cfg.Pools["a"]
	if p.MinNodes != 0 || p.MaxNodes != 4 || p.SpareNodes != 0 || !p.Headroom.IsZero() || p.Price.OnDemandPerNodeHour.String() != "1.5" {
		t.Fatalf("pool = %+v", p)
	}
	q := cfg.Teams["x"].Quota["f"]
	if q.Nominal != 8 || q.BorrowingLimit == nil || *q.BorrowingLimit != 4 || q.LendingLimit != nil {
		t.Fatalf("quota = %+v", q)
	}
	if cfg.Teams["x"].Weight.String() != "1" || cfg.Tiers["t"].Preemptible {
		t.Fatalf("defaults: weight %s", cfg.Teams["x"].Weight)
	}
	if want := (Pos{File: "capacity.cue", Line: 6, Col: 8}); cfg.Teams["x"].Pos != want {
		t.Fatalf("team pos = %v, want %v", cfg.Teams["x"].Pos, want)
	}
	if got := cfg.Pos("teams", "x", "quota", "f", "borrowingLimit"); got.Line != 6 {
		t.Fatalf("borrowingLimit pos = %v", got)
	}
	if diff := cmp.Diff([]string{"capacity.cue"}, cfg.Files); diff != "" {
		t.Fatal(diff)
	}
}

func TestLoadRepairAndBurst(t *testing.T) {
	src := minimal + `pools: a: repair: {}
pools: a: burst: maxNodes: 2
pools: b: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: 1.5}
pools: b: repair: {after: "1h30m", maxNodes: 3, broken: "keep", flaps: 5, flapWindow: "72h"}
pools: b: burst: {maxNodes: 4, idleAfter: "2h"}
`
	cfg, findings := Load(mapFS(map[string]string{"capacity.cue": src}))
	if len(findings) > 0 || cfg == nil {
		t.Fatalf("findings: %v", findings)
	}
	for name, want := range map[PoolName][2]any{
		"a": {&Repair{After: 15 * time.Minute, MaxNodes: 1, Broken: BrokenRemove, Flaps: 3, FlapWindow: 24 * time.Hour}, &Burst{MaxNodes: 2, IdleAfter: 30 * time.Minute}},
		"b": {&Repair{After: 90 * time.Minute, MaxNodes: 3, Broken: BrokenKeep, Flaps: 5, FlapWindow: 72 * time.Hour}, &Burst{MaxNodes: 4, IdleAfter: 2 * time.Hour}},
	} {
		p := cfg.Pools[name]
		if diff := cmp.Diff(want[0], p.Repair); diff != "" {
			t.Errorf("pool %s repair (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(want[1], p.Burst); diff != "" {
			t.Errorf("pool %s burst (-want +got):\n%s", name, diff)
		}
	}
	cfg, _ = Load(mapFS(map[string]string{"capacity.cue": minimal}))
	if p := cfg.Pools["a"]; p.Repair != nil || p.Burst != nil {
		t.Errorf("a pool that declares neither: repair %v, burst %v", p.Repair, p.Burst)
	}
}

func TestLoadSubfoldersAreOnePackage(t *testing.T) {
	cfg, findings := Load(mapFS(map[string]string{
		"a.cue":              "package capacity\nclusters: lab: provider: \"kwok\"\n",
		"teams/deep/b.cue":   "package capacity\nteams: y: quota: {}\n",
		"cue.mod/module.cue": "module: \"x.example/y@v0\"\n",
		"_ignored.cue":       "this is not cue",
		".hidden/c.cue":      "nor this",
		"notes.md":           "# notes",
	}))
	if len(findings) > 0 {
		t.Fatalf("findings: %v", findings)
	}
	if cfg.Teams["y"] == nil || cfg.Teams["y"].Pos.File != "teams/deep/b.cue" || cfg.Clusters["lab"] == nil {
		t.Fatalf("cfg = %+v", cfg)
	}
}

func TestLoadReportsEverySyntaxErrorOfEveryFile(t *testing.T) {
	_, findings := Load(mapFS(map[string]string{
		"a.cue": "package capacity\nteams: x: {\n",
		"b.cue": "package capacity\nclusters: lab: provider: \"kwok\" }\n",
	}))
	files := map[string]bool{}
	for _, f := range findings {
		if f.Rule != RuleSyntax || f.Pos.Line == 0 {
			t.Errorf("finding %v: want a syntax error with a line", f)
		}
		files[f.Pos.File] = true
	}
	if !files["a.cue"] || !files["b.cue"] {
		t.Fatalf("want syntax errors in both files: %v", findings)
	}
}

func TestLoadEmptyAndForeignImports(t *testing.T) {
	if _, f := Load(mapFS(map[string]string{"x.txt": "hi"})); len(f) != 1 || !strings.Contains(f[0].Message, "no .cue files") {
		t.Fatalf("empty: %v", f)
	}
	_, f := Load(mapFS(map[string]string{"a.cue": "package capacity\nimport \"example.com/x\"\nteams: {}\n"}))
	if len(f) == 0 || f[0].Rule != RulePackage || f[0].Pos.Line != 2 {
		t.Fatalf("foreign import: %v", f)
	}
	// The standard library is fine.
	cfg, f := Load(mapFS(map[string]string{"a.cue": "package capacity\nimport \"strings\"\nclusters: (strings.ToLower(\"LAB\")): provider: \"kwok\"\n"}))
	if len(f) > 0 || cfg.Clusters["lab"] == nil {
		t.Fatalf("std import: %v", f)
	}
}

func TestLoadExamples(t *testing.T) {
	cfg, findings := Load(os.DirFS(filepath.Join("..", "examples")))
	if len(findings) > 0 {
		t.Fatalf("examples: %v", findings)
	}
	if len(cfg.Clusters) != 3 || len(cfg.Tiers) != 4 || len(cfg.Teams) < 6 {
		t.Fatalf("examples: %d clusters, %d tiers, %d teams", len(cfg.Clusters), len(cfg.Tiers), len(cfg.Teams))
	}
}

// FuzzLoad checks that no input, however broken, panics the loader or returns a
// configuration together with errors. Its corpus (testdata/fuzz/FuzzLoad)
// holds the hostile inputs the loading process stops before evaluating: deep
// nesting, long numbers and exponents, tool/ and foreign imports, attributes,
// binary bytes (source.FuzzLoadBounded has those the evaluator's bounds stop).
func FuzzLoad(f *testing.F) {
	f.Add(minimal, "")
	f.Add("package capacity\nteams: x: quota: f: nominal: 1.5\n", "package capacity\nteams: x: quota: f: nominal: 2\n")
	f.Add("package capacity\npools: a: {gpusPerNod: 8}\n", "package other\n")
	f.Add("package capacity\n_x: 1\n#D: {a: int}\nteams: [string]: quota: {}\n", "package capacity\nteams: a: {}\n")
	f.Add("package capacity\nx: y\ny: x\n", "package capacity\nclusters: (\"a\"+\"b\"): provider: \"gke\"\n")
	for _, name := range []string{"pools.cue", "teams/nlp.cue", "tiers.cue"} {
		if b, err := os.ReadFile(filepath.Join("..", "examples", name)); err == nil {
			f.Add(string(b), minimal)
		}
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		cfg, findings := Load(mapFS(map[string]string{"a.cue": a, "sub/b.cue": b}))
		if cfg != nil && findings.HasErrors() {
			t.Fatalf("a configuration together with errors: %v", findings)
		}
		if cfg == nil && len(findings) == 0 {
			t.Fatal("no configuration and no finding")
		}
		for _, fd := range findings {
			if strings.HasPrefix(fd.Pos.File, schemaFilePrefix) {
				t.Fatalf("finding points into the embedded schema: %v", fd)
			}
		}
	})
}

// TestApproximateAccepts: approximate: true on a tier, team or pool is read
// (default false), an approximation of that object is accepted and stays a
// warning under Strict, and one of an object without it becomes an error
// that names the object.
func TestApproximateAccepts(t *testing.T) {
	src := strings.NewReplacer(`tiers: t: priority: 1`, `tiers: t: {priority: 1, approximate: true}
tiers: u: priority: 2`,
		`teams: x: {cohort: "c", `, `teams: x: {approximate: true, cohort: "c", `,
		`price: onDemandPerNodeHour: 1.5}`, `price: onDemandPerNodeHour: 1.5, approximate: true}`).Replace(minimal)
	cfg, findings := Load(mapFS(map[string]string{"capacity.cue": src}))
	if len(findings) > 0 || cfg == nil {
		t.Fatalf("findings: %v", findings)
	}
	if !cfg.Tiers["t"].Approximate || cfg.Tiers["u"].Approximate || !cfg.Teams["x"].Approximate || !cfg.Pools["a"].Approximate {
		t.Fatalf("approximate: tier t %v, u %v, team x %v, pool a %v", cfg.Tiers["t"].Approximate, cfg.Tiers["u"].Approximate, cfg.Teams["x"].Approximate, cfg.Pools["a"].Approximate)
	}
	fs := Findings{
		cfg.Approximation("r", Pos{}, "tier", "t", "m"), cfg.Approximation("r", Pos{}, "tier", "u", "m"),
		cfg.Approximation("r", Pos{}, "team", "x", "m"), cfg.Approximation("r", Pos{}, "pool", "a", "m"),
		cfg.Approximation("r", Pos{}, "pool", "gone", "m"),
		{Severity: SeverityWarning, Rule: "other", Message: "not an approximation"},
	}
	strict := fs.Strict()
	want := []Severity{SeverityWarning, SeverityError, SeverityWarning, SeverityWarning, SeverityError, SeverityWarning}
	for i, f := range strict {
		if f.Severity != want[i] {
			t.Errorf("%d %q (%s): %s under Strict, want %s", i, f.Approximation, f.Message, f.Severity, want[i])
		}
	}
	if m := strict[1].Message; !strings.Contains(m, "approximate: true on tier u") {
		t.Errorf("refused approximation's message %q names not the object to accept it on", m)
	}
	if m := strict[0].Message; !strings.Contains(m, "accepted: tier t says approximate: true") {
		t.Errorf("accepted approximation's message %q does not say so", m)
	}
	if fs[1].Severity != SeverityWarning || len(fs.Approximations()) != 5 {
		t.Errorf("Strict changed its input, or Approximations found %d of 5", len(fs.Approximations()))
	}
}
