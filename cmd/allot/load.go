package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/internal/plaintext"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/evaluate"
	"github.com/allot-dev/allot/planner/finance"
	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/source"
)

// checked is a loaded, planned and checked configuration.
type checked struct {
	name string
	// dir is the directory checked (checkDir), "" for a Git ref: the
	// findings' files are named relative to it.
	dir      string
	cfg      *schema.Config // nil when the files do not load
	plan     *planner.Plan
	findings schema.Findings
}

// check loads fsys, plans it and runs the policies; base, when not nil, is the
// configuration a change starts from.
// The CUE is evaluated in a child process bounded by source.DefaultLimits: a
// repository that exceeds them is a finding of rule limit (exit 1), and the
// child's own fatal error (Go exits 2 when out of memory) is never allot's.
func check(name string, fsys fs.FS, base *schema.Config) checked {
	r := evaluate.RepositoryWith(source.Evaluator(context.Background(), source.DefaultLimits), fsys, base)
	return checked{name: name, cfg: r.Config, plan: r.Plan, findings: r.Findings}
}

// checkDir checks the directory dir. Its findings name their files as
// compilers do (wdPath), in text, JSON and annotations alike.
func checkDir(dir string, base *schema.Config) (checked, error) {
	fsys, err := source.Dir(dir)
	if err != nil {
		return checked{}, usageError{err}
	}
	c := check(dir, fsys, base)
	c.dir = dir
	for i := range c.findings {
		c.findings[i].Pos = wdPos(dir, c.findings[i].Pos)
	}
	return c, nil
}

// addFindings adds findings of c's configuration made after it was checked
// (a target's, observed health's, CODEOWNERS'), their files named as
// checkDir names the others.
func (c *checked) addFindings(fs ...schema.Finding) {
	for _, f := range fs {
		if c.dir != "" {
			f.Pos = wdPos(c.dir, f.Pos)
		}
		c.findings = append(c.findings, f)
	}
	c.findings = c.findings.Sort()
}

// wdPos is pos, a position in a file of dir, with the file named by wdPath.
func wdPos(dir string, pos schema.Pos) schema.Pos {
	if pos.IsValid() {
		pos.File = wdPath(filepath.Join(dir, pos.File))
	}
	return pos
}

// wdPath names a file as compilers do: relative to the working directory, or
// absolute when it lies outside it (or the working directory is unknown).
func wdPath(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return filepath.ToSlash(filepath.Clean(file))
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(abs)
}

// A baseSpec is what --base names: a Git ref of the repository that holds
// DIR, or a directory; never both, never guessed. --base ref:REF and
// --base dir:DIR say which; a bare --base X is the one of the two that
// exists, and an error when both do: a folder a change adds (origin/main/)
// cannot stand in for the ref it shadows.
type baseSpec struct {
	ref, dir string
	repo     source.Repo // ref's
	commit   string      // ref's, resolved once
	sub      string      // DIR's path in repo
}

// name is how the base is named in reports: the ref or the directory.
func (b baseSpec) name() string { return b.ref + b.dir }

// parseBase reads --base for the change in dir.
func parseBase(dir, base string) (baseSpec, error) {
	if d, ok := strings.CutPrefix(base, "dir:"); ok {
		return baseSpec{dir: d}, nil
	}
	findRef := func(ref string) (baseSpec, error) {
		r, sub, err := source.FindRepo(dir)
		if err != nil {
			return baseSpec{}, err
		}
		commit, err := r.Commit(ref)
		if err != nil {
			return baseSpec{}, err
		}
		return baseSpec{ref: ref, repo: r, commit: commit, sub: sub}, nil
	}
	if ref, ok := strings.CutPrefix(base, "ref:"); ok {
		b, err := findRef(ref)
		if err != nil {
			return b, usageError{fmt.Errorf("--base %s: %w", base, err)}
		}
		return b, nil
	}
	st, statErr := os.Stat(base)
	isDir := statErr == nil && st.IsDir()
	b, refErr := findRef(base)
	switch {
	case isDir && refErr == nil:
		return baseSpec{}, usageError{fmt.Errorf("--base %s is both a directory and a Git ref of %s: say which, --base ref:%s or --base dir:%s", base, b.repo.Top, base, base)}
	case isDir:
		return baseSpec{dir: base}, nil
	case refErr == nil:
		return b, nil
	}
	return baseSpec{}, usageError{fmt.Errorf("--base %s is neither a directory nor a Git ref: %w", base, refErr)}
}

// loadBase reads the base of a change (parseBase).
// A base that does not load is bad usage (exit 2), its findings written to stderr:
// without it, the rules that compare a change with its base could not run.
func loadBase(stderr io.Writer, dir, base string) (checked, error) {
	spec, err := parseBase(dir, base)
	if err != nil {
		return checked{}, err
	}
	return spec.load(stderr)
}

func (spec baseSpec) load(stderr io.Writer) (checked, error) {
	var b checked
	if spec.dir != "" {
		var err error
		if b, err = checkDir(spec.dir, nil); err != nil {
			return b, err
		}
	} else {
		fsys, err := spec.repo.Tree(spec.commit, spec.sub)
		if err != nil {
			return checked{}, usageError{fmt.Errorf("--base %s: %w", spec.ref, err)}
		}
		b = check(spec.ref, fsys, nil)
		for i, f := range b.findings {
			if f.Pos.IsValid() { // as Git names a file of a commit: REF:path
				b.findings[i].Pos.File = spec.ref + ":" + path.Join(filepath.ToSlash(spec.sub), f.Pos.File)
			}
		}
	}
	if b.cfg == nil {
		fmt.Fprintf(stderr, "allot: the base %s does not load:\n", spec.name())
		printFindings(stderr, b.findings)
		return b, exitError{exitUsage}
	}
	return b, nil
}

// printFindings writes one line per finding, path:line:col: severity: rule:
// message, with the paths as checkDir names them and their control characters
// escaped (a newline in a file name starts no line); under GitHub Actions it
// also writes the workflow commands that annotate the pull request.
func printFindings(w io.Writer, findings schema.Findings) {
	github := os.Getenv("GITHUB_ACTIONS") == "true"
	for _, f := range findings {
		f.Pos.File = plaintext.Escape(f.Pos.File)
		fmt.Fprintln(w, f.String())
		if github {
			writeCommand(w, githubAnnotation(f))
		}
	}
}

// workflowSafe returns w, or under GitHub Actions (GITHUB_ACTIONS=true) a
// workflowWriter over it, unless w is a regular file (a plan written to a
// file is data, not the job's log). flush writes what is left of a last line.
func workflowSafe(w io.Writer) (_ io.Writer, flush func()) {
	if os.Getenv("GITHUB_ACTIONS") != "true" {
		return w, func() {}
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return w, func() {}
		}
	}
	ww := &workflowWriter{w: w}
	return ww, ww.flush
}

// A workflowWriter keeps GitHub Actions from reading a line written to it as
// a workflow command: GitHub runs any line of a job's log that starts with ::
// (after blanks; lines end at \n or \r) and any ##[ in a line, so a file name
// or a message holding a newline and "::stop-commands::x" would otherwise
// silence or forge annotations. Such a line gets its first ':' written %3A
// (its first "##[", "#%23["). allot's own commands go through command,
// unchanged: writeCommand.
type workflowWriter struct {
	mu   sync.Mutex
	w    io.Writer
	line []byte // the line being written, up to its end
}

func (ww *workflowWriter) Write(p []byte) (int, error) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	for _, c := range p {
		ww.line = append(ww.line, c)
		if c == '\n' || c == '\r' {
			if err := ww.writeLine(); err != nil {
				return 0, err
			}
		}
	}
	return len(p), nil
}

func (ww *workflowWriter) writeLine() error {
	l := ww.line
	ww.line = ww.line[:0]
	if t := bytes.TrimLeft(l, " \t"); bytes.HasPrefix(t, []byte("::")) {
		i := len(l) - len(t)
		l = slices.Concat(l[:i], []byte("%3A"), l[i+1:])
	}
	l = bytes.ReplaceAll(l, []byte("##["), []byte("#%23["))
	_, err := ww.w.Write(l)
	return err
}

// command writes one workflow command of allot's own, on a line of its own.
func (ww *workflowWriter) command(line string) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if len(ww.line) > 0 {
		ww.line = append(ww.line, '\n')
		_ = ww.writeLine()
	}
	fmt.Fprintln(ww.w, line)
}

func (ww *workflowWriter) flush() {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if len(ww.line) > 0 {
		_ = ww.writeLine()
	}
}

// writeCommand writes a workflow command that allot made (githubAnnotation:
// every repository string in it escaped) to w.
func writeCommand(w io.Writer, line string) {
	if ww, ok := w.(*workflowWriter); ok {
		ww.command(line)
		return
	}
	fmt.Fprintln(w, line)
}

// githubAnnotation formats a finding as a GitHub Actions workflow command,
// naming its file as the text does: relative to the working directory, which
// in a workflow is the repository root.
func githubAnnotation(f schema.Finding) string {
	level := "error"
	if f.Severity == schema.SeverityWarning {
		level = "warning"
	}
	var props []string
	if f.Pos.IsValid() {
		props = append(props, "file="+escapeProperty(f.Pos.File))
		if f.Pos.Line > 0 {
			props = append(props, fmt.Sprintf("line=%d,col=%d", f.Pos.Line, f.Pos.Col))
		}
	}
	props = append(props, "title="+escapeProperty("allot "+f.Rule))
	return fmt.Sprintf("::%s %s::%s", level, strings.Join(props, ","), escapeData(f.Message))
}

// escapeData and escapeProperty escape as GitHub's toolkit does
// (actions/toolkit, packages/core/src/command.ts).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// planned is a change loaded for plan and report: the head, its base (zero
// without one) and the report input made of them.
type planned struct {
	in         planreport.Input
	head, base checked
	spec       baseSpec // the base's, when there is one
	// burst is what the observed Pools' managers metered of their burst.
	burst []finance.BurstMetered
}

// loadPlan loads dir and, when base is set, the base of the change (a base that
// does not load is bad usage: its findings go to stderr), and compares them.
// With observed, the pools' observed health adds replacement nodes and
// findings to the head's plan; with simulate, the what-if is replayed when dir
// has no errors.
func loadPlan(stderr io.Writer, dir, base, observed string, simulate *simulateFlags) (planned, error) {
	pl := planned{in: planreport.Input{Name: dir}}
	if base != "" {
		var err error
		if pl.spec, err = parseBase(dir, base); err != nil {
			return pl, err
		}
		if pl.base, err = pl.spec.load(stderr); err != nil {
			return pl, err
		}
	}
	c, err := checkDir(dir, pl.base.cfg)
	if err != nil {
		return pl, err
	}
	if observed != "" && c.cfg != nil {
		obs, burst, err := readObserved(observed)
		pl.burst = burst
		if err != nil {
			return pl, usageError{err}
		}
		var extra schema.Findings
		c.plan, extra = planner.WithObserved(c.cfg, c.plan, obs)
		c.addFindings(extra...)
	}
	pl.head = c
	in := &pl.in
	in.Config, in.Plan, in.Findings = c.cfg, c.plan, c.findings
	if b := pl.base; b.cfg != nil && c.cfg != nil {
		in.BaseName, in.Base = pl.spec.name(), b.plan
		in.Diff = planner.Compare(b.plan, c.plan)
		in.Diff.Approvals = policies.Approvals(b.cfg, c.cfg, in.Diff)
		in.Slurm = slurm.Compare(b.cfg, b.plan, c.cfg, c.plan)
	}
	if !c.findings.HasErrors() {
		if in.WhatIf, err = simulate.run(pl.base.cfg, c.cfg); err != nil {
			return pl, err
		}
	}
	return pl, nil
}

// readObserved reads the pools' observed health and the burst their managers
// metered from a PoolList (JSON or YAML).
func readObserved(file string) (map[schema.PoolName]planner.Observed, []finance.BurstMetered, error) {
	var list allotv1.PoolList
	if err := readKubeList("--observed", file, "Pool", "kubectl get pools.allot.dev -o yaml", &list); err != nil {
		return nil, nil, err
	}
	out := map[schema.PoolName]planner.Observed{}
	var burst []finance.BurstMetered
	for i, p := range list.Items {
		s := p.Status
		if b := s.Burst; b != nil && b.MeteredSince != nil && b.MeteredAt != nil {
			if len(b.Metered) > elastic.MaxMeteredTeams {
				return nil, nil, fmt.Errorf("--observed %s: items[%d] (Pool %s): status.burst.metered has %d teams; want at most %d", file, i, p.Name, len(b.Metered), elastic.MaxMeteredTeams)
			}
			for j, m := range b.Metered {
				if m.NodeSeconds < 0 {
					return nil, nil, fmt.Errorf("--observed %s: items[%d] (Pool %s): status.burst.metered[%d]: nodeSeconds %d; want >= 0", file, i, p.Name, j, m.NodeSeconds)
				}
				burst = append(burst, finance.BurstMetered{Pool: schema.PoolName(p.Name), Team: m.Team, NodeSeconds: m.NodeSeconds, Since: b.MeteredSince.Time, At: b.MeteredAt.Time})
			}
		}
		if s.Nodes < 0 || s.ReadyNodes < 0 || s.HealthyGPUs < 0 || s.ReadyNodes > s.Nodes || s.Nodes > schema.MaxFleetNodes {
			return nil, nil, fmt.Errorf("--observed %s: items[%d] (Pool %s): nodes %d, readyNodes %d, healthyGPUs %d: want 0 <= readyNodes <= nodes <= %d and healthyGPUs >= 0",
				file, i, p.Name, s.Nodes, s.ReadyNodes, s.HealthyGPUs, schema.MaxFleetNodes)
		}
		out[schema.PoolName(p.Name)] = planner.Observed{Nodes: s.Nodes, UsableNodes: s.ReadyNodes, HealthyGPUs: s.HealthyGPUs}
	}
	return out, burst, nil
}

// readKubeList reads file, kubectl's output of a list of kind (JSON or YAML),
// into list; get is the command that prints it. A file that holds no list at
// all (empty, or only comments: a redirect that failed) is an error at its
// line 1, as an empty workload is; a list without items is kubectl's answer
// for none.
func readKubeList(flag, file, kind, get string, list runtime.Object) error {
	b, err := readInput(file)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return parseKubeList(flag, file, b, kind, get, list)
}

// parseKubeList is readKubeList of b, already read from file.
func parseKubeList(flag, file string, b []byte, kind, get string, list runtime.Object) error {
	if err := yaml.Unmarshal(b, list); err != nil {
		return fmt.Errorf("%s %s: not a list of %ss: %w", flag, file, kind, err)
	}
	switch k := list.GetObjectKind().GroupVersionKind().Kind; {
	case k != "" && k != "List" && k != kind+"List":
		return fmt.Errorf("%s %s: a %s, want a %sList (%s)", flag, file, k, kind, get)
	case k == "" && isEmptyYAML(b):
		return fmt.Errorf("%s %s:1: empty file: want a %sList (%s)", flag, file, kind, get)
	}
	return nil
}

// isEmptyYAML reports whether b holds no YAML value: nothing, blanks or comments.
func isEmptyYAML(b []byte) bool {
	var v any
	return yaml.Unmarshal(b, &v) == nil && v == nil
}
