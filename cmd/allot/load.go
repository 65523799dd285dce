package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/evaluate"
	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/source"
)

// checked is a loaded, planned and checked configuration.
type checked struct {
	name     string
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

// checkDir checks the directory dir.
func checkDir(dir string, base *schema.Config) (checked, error) {
	fsys, err := source.Dir(dir)
	if err != nil {
		return checked{}, usageError{err}
	}
	return check(dir, fsys, base), nil
}

// loadBase reads the base of a change: a directory if base names one, otherwise a
// Git ref of the repository that contains dir.
// A base that does not load is bad usage (exit 2), its findings written to stderr:
// without it, the rules that compare a change with its base could not run.
func loadBase(stderr io.Writer, dir, base string) (checked, error) {
	var b checked
	if st, err := os.Stat(base); err == nil && st.IsDir() {
		if b, err = checkDir(base, nil); err != nil {
			return b, err
		}
	} else {
		fsys, err := source.GitRef(dir, base)
		if le := (*source.LimitError)(nil); errors.As(err, &le) {
			return checked{}, usageError{fmt.Errorf("--base %s: %w", base, err)}
		}
		if err != nil {
			return checked{}, usageError{fmt.Errorf("--base %s is neither a directory nor a Git ref: %w", base, err)}
		}
		b = check(base, fsys, nil)
	}
	if b.cfg == nil {
		fmt.Fprintf(stderr, "allot: the base %s does not load:\n", base)
		printFindings(stderr, base, b.findings)
		return b, exitError{exitUsage}
	}
	return b, nil
}

// printFindings writes one line per finding, path:line:col: severity: rule:
// message, with paths relative to the directory; under GitHub Actions it also
// writes the workflow commands that annotate the pull request.
func printFindings(w io.Writer, dir string, findings schema.Findings) {
	github := os.Getenv("GITHUB_ACTIONS") == "true"
	for _, f := range findings {
		fmt.Fprintln(w, f.String())
		if github {
			fmt.Fprintln(w, githubAnnotation(dir, f))
		}
	}
}

// githubAnnotation formats a finding as a GitHub Actions workflow command. GitHub
// wants the file relative to the repository root: the directory argument is joined
// in front of the finding's path.
func githubAnnotation(dir string, f schema.Finding) string {
	level := "error"
	if f.Severity == schema.SeverityWarning {
		level = "warning"
	}
	var props []string
	if f.Pos.IsValid() {
		file := filepath.ToSlash(filepath.Join(dir, f.Pos.File))
		if filepath.IsAbs(dir) {
			if wd, err := os.Getwd(); err == nil {
				if rel, err := filepath.Rel(wd, filepath.Join(dir, f.Pos.File)); err == nil && !strings.HasPrefix(rel, "..") {
					file = filepath.ToSlash(rel)
				}
			}
		}
		props = append(props, "file="+escapeProperty(file))
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
		if pl.base, err = loadBase(stderr, dir, base); err != nil {
			return pl, err
		}
	}
	c, err := checkDir(dir, pl.base.cfg)
	if err != nil {
		return pl, err
	}
	if observed != "" && c.cfg != nil {
		obs, err := readObserved(observed)
		if err != nil {
			return pl, usageError{err}
		}
		var extra schema.Findings
		c.plan, extra = planner.WithObserved(c.cfg, c.plan, obs)
		c.findings = append(c.findings, extra...)
	}
	pl.head = c
	in := &pl.in
	in.Config, in.Plan, in.Findings = c.cfg, c.plan, c.findings
	if b := pl.base; b.cfg != nil && c.cfg != nil {
		in.BaseName, in.Base = base, b.plan
		in.Diff = planner.Compare(b.plan, c.plan)
		in.Diff.Approvals = policies.Approvals(b.cfg, c.cfg, in.Diff)
	}
	if !c.findings.HasErrors() {
		if in.WhatIf, err = simulate.run(pl.base.cfg, c.cfg); err != nil {
			return pl, err
		}
	}
	return pl, nil
}

// readObserved reads the pools' observed health from a PoolList (JSON or YAML).
func readObserved(file string) (map[schema.PoolName]planner.Observed, error) {
	var list allotv1.PoolList
	if err := readKubeList("--observed", file, "Pool", "kubectl get pools.allot.dev -o yaml", &list); err != nil {
		return nil, err
	}
	out := map[schema.PoolName]planner.Observed{}
	for i, p := range list.Items {
		s := p.Status
		if s.Nodes < 0 || s.ReadyNodes < 0 || s.HealthyGPUs < 0 || s.ReadyNodes > s.Nodes || s.Nodes > schema.MaxFleetNodes {
			return nil, fmt.Errorf("--observed %s: items[%d] (Pool %s): nodes %d, readyNodes %d, healthyGPUs %d: want 0 <= readyNodes <= nodes <= %d and healthyGPUs >= 0",
				file, i, p.Name, s.Nodes, s.ReadyNodes, s.HealthyGPUs, schema.MaxFleetNodes)
		}
		out[schema.PoolName(p.Name)] = planner.Observed{Nodes: s.Nodes, UsableNodes: s.ReadyNodes, HealthyGPUs: s.HealthyGPUs}
	}
	return out, nil
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
