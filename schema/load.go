package schema

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"

	"github.com/allot-dev/allot/schema/quantity"
)

//go:embed *.cue
var definitions embed.FS

// schemaFilePrefix marks positions inside the embedded definitions, so that they are
// never shown to a user as the place to change.
const schemaFilePrefix = "allot-schema:"

// Rule names of the findings the loader reports.
const (
	RuleSyntax       = "syntax"
	RulePackage      = "package"
	RuleUnknownField = "unknown-field"
	RuleConflict     = "conflict"
	RuleRequired     = "required-field"
	RuleSchema       = "schema"
	RuleInternal     = "internal"
	// RuleFileScope: a file sets a part of the configuration that its
	// owners do not own (policies.PartOf tells them by the file's path).
	RuleFileScope = "file-scope"
)

// Load evaluates the CUE package at the root of fsys (files in subfolders belong
// to the same package) against the embedded definitions. It returns the typed
// configuration, or nil and the findings when the files do not evaluate to a valid
// configuration. Paths in positions are relative to the root of fsys. Load never
// panics: an evaluator failure is reported as a finding.
//
// Load evaluates in this process, with no bound on the time and memory a
// hostile input can make CUE take; LoadWith can evaluate elsewhere.
func Load(fsys fs.FS) (*Config, Findings) { return LoadWith(fsys, Evaluate) }

// An Evaluator evaluates the user's files (path to source, all of one package,
// already parsed without error) against the embedded definitions, as Evaluate
// does: it returns the concrete configuration as JSON, or the findings that
// stop it. source.Evaluator runs Evaluate in a child process with a memory and
// a time limit.
type Evaluator func(files map[string][]byte) (config []byte, findings Findings)

// LoadWith is Load with the CUE evaluation done by eval. The files are read,
// parsed and checked here; the JSON that eval returns is decoded here, with
// positions from the files read here.
func LoadWith(fsys fs.FS, eval Evaluator) (*Config, Findings) {
	files, sources, findings := parseFiles(fsys)
	if len(findings) > 0 {
		return nil, findings.Sort()
	}
	if len(files) == 0 {
		return nil, Findings{{Severity: SeverityError, Rule: RulePackage, Message: "no .cue files found"}}
	}
	ix := newIndex()
	names := make([]string, 0, len(files))
	for _, f := range files {
		ix.addFile(f)
		names = append(names, f.Filename)
	}
	b, findings := eval(sources)
	if len(findings) > 0 {
		return nil, findings.Sort()
	}
	cfg, findings := decode(b, ix)
	if cfg != nil {
		cfg.Files, cfg.Writes = names, writesOf(files)
	}
	return cfg, findings.Sort()
}

// Evaluate is the Evaluator of this process: it parses files, unifies them
// with the embedded definitions and returns the concrete configuration as
// JSON, or the findings, at the user's positions. It never panics: an evaluator
// failure is reported as a finding.
func Evaluate(files map[string][]byte) (config []byte, findings Findings) {
	defer func() {
		if r := recover(); r != nil {
			config = nil
			findings = append(findings, Finding{Severity: SeverityError, Rule: RuleInternal,
				Message: fmt.Sprintf("the CUE evaluator failed on this input: %v", r)})
		}
	}()
	ctx := cuecontext.New()
	def, err := compileDefinitions(ctx)
	if err != nil {
		return nil, Findings{{Severity: SeverityError, Rule: RuleInternal, Message: err.Error()}}
	}
	inst := build.NewContext().NewInstance("capacity", nil)
	ix := newIndex()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := parser.ParseFile(name, files[name], parser.ParseComments, parser.AllErrors)
		if err != nil {
			return nil, fromCUE(err, nil)
		}
		if err := inst.AddSyntax(f); err != nil {
			return nil, fromCUE(err, ix)
		}
		ix.addFile(f)
	}
	v := ctx.BuildInstance(inst)
	u := def.Unify(v)
	err = u.Validate(cue.Concrete(true), cue.All())
	if err == nil && v.Err() != nil {
		err = v.Err()
	}
	if err != nil {
		return nil, fromCUE(err, ix)
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, fromCUE(err, ix)
	}
	return b, nil
}

// parseFiles reads every .cue file of fsys, skipping cue.mod, hidden files and
// folders, and CUE tool files, within the bounds of limits.go; all syntax
// errors are reported, not only the first.
func parseFiles(fsys fs.FS) ([]*ast.File, map[string][]byte, Findings) {
	var files []*ast.File
	sources := map[string][]byte{}
	var findings Findings
	pkg, pkgFile := "", ""
	walked := WalkSources(fsys, func(p string, src []byte) {
		f, err := parser.ParseFile(p, src, parser.ParseComments, parser.AllErrors)
		if err != nil {
			findings = append(findings, fromCUE(err, nil)...)
			return
		}
		if bad := checkSyntax(f); len(bad) > 0 {
			findings = append(findings, bad...)
			return
		}
		switch name := f.PackageName(); {
		case name == "":
			findings = append(findings, Finding{Severity: SeverityError, Rule: RulePackage, Pos: Pos{File: p, Line: 1, Col: 1},
				Message: "file has no package clause; every file of a capacity repository belongs to one package"})
		case pkg == "":
			pkg, pkgFile = name, p
			files = append(files, f)
			sources[p] = src
		case name != pkg:
			findings = append(findings, Finding{Severity: SeverityError, Rule: RulePackage, Pos: packagePos(f),
				Message: fmt.Sprintf("package %s, but %s is package %s; every file belongs to one package", name, pkgFile, pkg)})
		default:
			files = append(files, f)
			sources[p] = src
		}
	})
	findings = append(findings, walked...)
	for _, f := range files {
		for imp := range f.ImportSpecs() {
			p, _ := strings.CutPrefix(imp.Path.Value, `"`)
			switch {
			case strings.Contains(strings.Split(p, "/")[0], "."):
				findings = append(findings, Finding{Severity: SeverityError, Rule: RulePackage, Pos: posOf(imp.Pos()),
					Message: fmt.Sprintf("import %s: only CUE's standard library can be imported", imp.Path.Value)})
			case strings.HasPrefix(p, "tool/"):
				findings = append(findings, Finding{Severity: SeverityError, Rule: RulePackage, Pos: posOf(imp.Pos()),
					Message: fmt.Sprintf("import %s: CUE's tool packages run commands and read files under cue cmd only; a capacity repository cannot import them", strings.TrimSuffix(p, `"`))})
			}
		}
	}
	return files, sources, findings
}

func packagePos(f *ast.File) Pos {
	for _, d := range f.Decls {
		if p, ok := d.(*ast.Package); ok {
			return posOf(p.Name.Pos())
		}
	}
	return Pos{File: f.Filename, Line: 1, Col: 1}
}

func compileDefinitions(ctx *cue.Context) (cue.Value, error) {
	inst := build.NewContext().NewInstance("schema", nil)
	entries, err := fs.ReadDir(definitions, ".")
	if err != nil {
		return cue.Value{}, err
	}
	for _, e := range entries {
		src, _ := fs.ReadFile(definitions, e.Name())
		f, err := parser.ParseFile(schemaFilePrefix+e.Name(), src, parser.ParseComments)
		if err != nil {
			return cue.Value{}, fmt.Errorf("embedded schema: %w", err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return cue.Value{}, fmt.Errorf("embedded schema: %w", err)
		}
	}
	v := ctx.BuildInstance(inst)
	if v.Err() != nil {
		return cue.Value{}, fmt.Errorf("embedded schema: %w", v.Err())
	}
	return v.LookupPath(cue.ParsePath("#Config")), nil
}

// cloudNameBound is how CUE describes a value that #CloudName rejects.
const cloudNameBound = `(out of bound =~"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")`

// MaxFleetNodes bounds the sum of nodes.max over all pools: it keeps render and
// sim, which lay out every node, bounded in time and memory (pool.cue bounds
// each pool by #MaxNodes).
const MaxFleetNodes = 1_000_000

// fromCUE turns CUE errors into findings at the user's positions; ix, when not nil,
// supplies a position for errors that carry none in a user file.
func fromCUE(err error, ix *Index) Findings {
	var out Findings
	for _, e := range cueerrors.Errors(err) {
		var user []Pos
		for _, p := range append([]Pos{posOf(e.Position())}, posList(e.InputPositions())...) {
			if p.IsValid() && !strings.HasPrefix(p.File, schemaFilePrefix) && !slices.Contains(user, p) {
				user = append(user, p)
			}
		}
		fieldPath := trimDefinition(e.Path())
		if len(user) == 0 && ix != nil {
			if p := ix.Lookup(fieldPath...); p.IsValid() {
				user = append(user, p)
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		f := Finding{Severity: SeverityError, Rule: RuleSchema, Message: msg}
		if len(user) > 0 {
			f.Pos, f.Related = user[0], user[1:]
		}
		field := strings.Join(fieldPath, ".")
		switch {
		case ix == nil && len(fieldPath) == 0:
			f.Rule = RuleSyntax
		case msg == "field not allowed":
			f.Rule = RuleUnknownField
			f.Message = unknownFieldMessage(fieldPath)
		case strings.HasPrefix(msg, "field is required but not present"):
			f.Rule = RuleRequired
			f.Message = fmt.Sprintf("%s: required field %q is missing", strings.Join(fieldPath[:max(0, len(fieldPath)-1)], "."), last(fieldPath))
		case strings.HasPrefix(msg, "conflicting values") && len(f.Related) > 0 && !strings.Contains(msg, "mismatched types"):
			f.Rule = RuleConflict
			f.Message = fmt.Sprintf("%s: %s (also set at %s)", field, msg, joinPos(f.Related))
		case strings.Contains(msg, "mismatched types") && strings.HasSuffix(msg, "and int (mismatched types float and int)"):
			f.Message = fmt.Sprintf("%s: want a whole number, got %s", field, strings.Fields(msg)[2])
		case strings.Contains(msg, cloudNameBound):
			f.Message = field + ": " + strings.Replace(msg, cloudNameBound,
				"(a cloud name has letters, digits, '.', '_' and '-' only, starts with a letter or digit and has at most 63 characters)", 1)
		case field != "":
			f.Message = field + ": " + msg
		}
		out = append(out, f)
	}
	return out
}

func posList(ps []cueTokenPos) []Pos {
	out := make([]Pos, 0, len(ps))
	for _, p := range ps {
		out = append(out, posOf(p))
	}
	return out
}

func trimDefinition(p []string) []string {
	if len(p) > 0 && strings.HasPrefix(p[0], "#") {
		return p[1:]
	}
	return p
}

func last(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

func joinPos(ps []Pos) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// raw mirrors the CUE configuration as JSON, with exact numbers.
type raw struct {
	Clusters map[string]struct {
		Provider  string `json:"provider"`
		Region    string `json:"region"`
		Scheduler string `json:"scheduler"`
	} `json:"clusters"`
	Pools map[string]struct {
		Cluster     string `json:"cluster"`
		Flavor      string `json:"flavor"`
		MachineType string `json:"machineType"`
		GPUsPerNode int64  `json:"gpusPerNode"`
		Nodes       struct {
			Min int64 `json:"min"`
			Max int64 `json:"max"`
		} `json:"nodes"`
		Topology *struct {
			Levels        []string         `json:"levels"`
			HostsPerRack  int64            `json:"hostsPerRack"`
			RacksPerBlock int64            `json:"racksPerBlock"`
			DomainSize    map[string]int64 `json:"domainSize"`
		} `json:"topology"`
		Price struct {
			OnDemand       json.Number  `json:"onDemandPerNodeHour"`
			Committed      *json.Number `json:"committedPerNodeHour"`
			CommittedNodes int64        `json:"committedNodes"`
		} `json:"price"`
		Headroom   json.Number `json:"headroom"`
		SpareNodes int64       `json:"spareNodes"`
		Repair     *struct {
			After      string `json:"after"`
			MaxNodes   int64  `json:"maxNodes"`
			Broken     string `json:"broken"`
			Flaps      int    `json:"flaps"`
			FlapWindow string `json:"flapWindow"`
		} `json:"repair"`
		Burst *struct {
			MaxNodes  int64  `json:"maxNodes"`
			IdleAfter string `json:"idleAfter"`
		} `json:"burst"`
		Slurm *struct {
			Partition  string `json:"partition"`
			NodePrefix string `json:"nodePrefix"`
			NodeDigits int    `json:"nodeDigits"`
			FirstIndex int64  `json:"firstIndex"`
			GRESType   string `json:"gresType"`
		} `json:"slurm"`
		Approximate bool `json:"approximate"`
	} `json:"pools"`
	Tiers map[string]struct {
		Priority    int64  `json:"priority"`
		Preemptible bool   `json:"preemptible"`
		BorrowOnly  bool   `json:"borrowOnly"`
		Description string `json:"description"`
		Approximate bool   `json:"approximate"`
	} `json:"tiers"`
	Cohorts map[string]struct {
		Parent string `json:"parent"`
	} `json:"cohorts"`
	Teams map[string]struct {
		CostCenter string   `json:"costCenter"`
		Owners     []string `json:"owners"`
		Cohort     string   `json:"cohort"`
		Tiers      []string `json:"tiers"`
		Namespaces []string `json:"namespaces"`
		Quota      map[string]struct {
			Nominal        int64  `json:"nominal"`
			BorrowingLimit *int64 `json:"borrowingLimit"`
			LendingLimit   *int64 `json:"lendingLimit"`
		} `json:"quota"`
		Budget *struct {
			MonthlyUSD *json.Number `json:"monthlyUSD"`
		} `json:"budget"`
		Weight      json.Number `json:"weight"`
		Approximate bool        `json:"approximate"`
	} `json:"teams"`
	Policy *struct {
		FinanceApprovalAbove *json.Number `json:"financeApprovalAboveMonthlyUSD"`
		FinanceApprovers     []string     `json:"financeApprovers"`
		PlatformApprovers    []string     `json:"platformApprovers"`
		AllowDisruption      bool         `json:"allowDisruption"`
	} `json:"policy"`
}

func decode(b []byte, ix *Index) (*Config, Findings) {
	var r raw
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return nil, Findings{{Severity: SeverityError, Rule: RuleInternal, Message: fmt.Sprintf("decoding the evaluated configuration: %v", err)}}
	}
	var findings Findings
	num := func(n json.Number, path ...string) quantity.Decimal {
		d, err := quantity.Parse(string(n))
		if err != nil {
			findings = append(findings, Finding{Severity: SeverityError, Rule: RuleSchema, Pos: ix.Lookup(path...), Message: err.Error()})
		}
		return d
	}
	cfg := &Config{
		Clusters: map[ClusterName]*Cluster{}, Pools: map[PoolName]*Pool{}, Tiers: map[TierName]*Tier{},
		Cohorts: map[CohortName]*Cohort{}, Teams: map[TeamName]*Team{}, Index: ix,
	}
	for name, c := range r.Clusters {
		cfg.Clusters[ClusterName(name)] = &Cluster{Name: ClusterName(name), Provider: Provider(c.Provider), Region: c.Region,
			Scheduler: Scheduler(c.Scheduler), Pos: ix.Lookup("clusters", name)}
	}
	for name, p := range r.Pools {
		pool := &Pool{
			Name: PoolName(name), Cluster: ClusterName(p.Cluster), Flavor: Flavor(p.Flavor), MachineType: p.MachineType,
			GPUsPerNode: p.GPUsPerNode, MinNodes: p.Nodes.Min, MaxNodes: p.Nodes.Max, SpareNodes: p.SpareNodes, Approximate: p.Approximate,
			Headroom: num(p.Headroom, "pools", name, "headroom"),
			Price: Price{
				OnDemandPerNodeHour: num(p.Price.OnDemand, "pools", name, "price", "onDemandPerNodeHour"),
				CommittedNodes:      p.Price.CommittedNodes,
			},
			Pos: ix.Lookup("pools", name),
		}
		if p.Price.Committed != nil {
			pool.Price.CommittedPerNodeHour = num(*p.Price.Committed, "pools", name, "price", "committedPerNodeHour")
			pool.Price.HasCommittedPrice = true
		}
		span := func(v string, least, most time.Duration, path ...string) time.Duration {
			d, err := ParseDuration(v, least, most)
			if err != nil {
				findings = append(findings, Finding{Severity: SeverityError, Rule: RuleSchema, Pos: ix.Lookup(path...),
					Message: fmt.Sprintf("%s: %v", strings.Join(path, "."), err)})
			}
			return d
		}
		if r := p.Repair; r != nil {
			pool.Repair = &Repair{MaxNodes: r.MaxNodes, Broken: RepairBroken(r.Broken), Flaps: r.Flaps,
				After:      span(r.After, 0, MaxRepairAfter, "pools", name, "repair", "after"),
				FlapWindow: span(r.FlapWindow, time.Hour, MaxFlapWindow, "pools", name, "repair", "flapWindow")}
		}
		if b := p.Burst; b != nil {
			pool.Burst = &Burst{MaxNodes: b.MaxNodes, IdleAfter: span(b.IdleAfter, time.Minute, MaxIdleAfter, "pools", name, "burst", "idleAfter")}
		}
		if c := cfg.Clusters[pool.Cluster]; p.Slurm != nil || c != nil && c.Scheduler == SchedulerSlurm {
			pool.Slurm = &SlurmNodes{Partition: name, NodePrefix: name + "-", GRESType: p.Flavor}
			if s := p.Slurm; s != nil {
				pool.Slurm.Partition = cmp.Or(s.Partition, pool.Slurm.Partition)
				pool.Slurm.NodePrefix = cmp.Or(s.NodePrefix, pool.Slurm.NodePrefix)
				pool.Slurm.GRESType = cmp.Or(s.GRESType, pool.Slurm.GRESType)
				pool.Slurm.NodeDigits, pool.Slurm.FirstIndex = s.NodeDigits, s.FirstIndex
			}
		}
		if t := p.Topology; t != nil {
			sizes := map[string]int64{}
			for _, l := range t.Levels {
				switch {
				case t.DomainSize[l] > 0:
					sizes[l] = t.DomainSize[l]
				case l == "rack" && t.HostsPerRack > 0:
					sizes[l] = t.HostsPerRack
				case l == "block" && t.RacksPerBlock > 0:
					sizes[l] = t.RacksPerBlock
				}
			}
			pool.Topology = &Topology{Levels: t.Levels, Sizes: sizes}
			for l := range t.DomainSize {
				if !slices.Contains(t.Levels, l) {
					pool.Topology.UnknownSizes = append(pool.Topology.UnknownSizes, l)
				}
			}
			slices.Sort(pool.Topology.UnknownSizes)
		}
		cfg.Pools[pool.Name] = pool
	}
	var fleetNodes int64
	for _, name := range cfg.PoolNames() {
		if fleetNodes += cfg.Pools[name].MaxNodes; fleetNodes > MaxFleetNodes {
			findings = append(findings, Finding{Severity: SeverityError, Rule: RuleSchema, Pos: ix.Lookup("pools", string(name), "nodes", "max"),
				Message: fmt.Sprintf("pools.%s.nodes.max: the pools' nodes.max add up to more than %d nodes", name, MaxFleetNodes)})
			break
		}
	}
	for name, t := range r.Tiers {
		cfg.Tiers[TierName(name)] = &Tier{Name: TierName(name), Priority: t.Priority, Preemptible: t.Preemptible,
			BorrowOnly: t.BorrowOnly, Description: t.Description, Approximate: t.Approximate, Pos: ix.Lookup("tiers", name)}
	}
	for name, c := range r.Cohorts {
		cfg.Cohorts[CohortName(name)] = &Cohort{Name: CohortName(name), Parent: CohortName(c.Parent), Pos: ix.Lookup("cohorts", name)}
	}
	for name, t := range r.Teams {
		team := &Team{Name: TeamName(name), CostCenter: t.CostCenter, Owners: t.Owners, Cohort: CohortName(t.Cohort), Namespaces: t.Namespaces,
			Quota: map[Flavor]Quota{}, Weight: num(t.Weight, "teams", name, "weight"), Approximate: t.Approximate, Pos: ix.Lookup("teams", name)}
		for _, tier := range t.Tiers {
			team.Tiers = append(team.Tiers, TierName(tier))
		}
		for f, q := range t.Quota {
			team.Quota[Flavor(f)] = Quota{Nominal: q.Nominal, BorrowingLimit: q.BorrowingLimit, LendingLimit: q.LendingLimit}
		}
		if t.Budget != nil && t.Budget.MonthlyUSD != nil {
			d := num(*t.Budget.MonthlyUSD, "teams", name, "budget", "monthlyUSD")
			team.BudgetMonthlyUSD = &d
		}
		cfg.Teams[team.Name] = team
	}
	if p := r.Policy; p != nil {
		if p.FinanceApprovalAbove != nil {
			cfg.Policy.FinanceApprovalAboveMonthlyUSD = num(*p.FinanceApprovalAbove, "policy", "financeApprovalAboveMonthlyUSD")
		}
		if len(p.FinanceApprovers) > 0 {
			cfg.Policy.FinanceApprovers = p.FinanceApprovers
		}
		if len(p.PlatformApprovers) > 0 {
			cfg.Policy.PlatformApprovers = p.PlatformApprovers
		}
		cfg.Policy.AllowDisruption = p.AllowDisruption
	}
	if len(findings) > 0 {
		return nil, findings
	}
	return cfg, nil
}
