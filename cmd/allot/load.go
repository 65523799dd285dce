package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/allot-dev/allot/planner"
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
func check(name string, fsys fs.FS, base *schema.Config) checked {
	r := policies.Evaluate(fsys, base)
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
func loadBase(dir, base string) (checked, error) {
	if st, err := os.Stat(base); err == nil && st.IsDir() {
		return checkDir(base, nil)
	}
	fsys, err := source.GitRef(dir, base)
	if err != nil {
		return checked{}, usageError{fmt.Errorf("--base %s is neither a directory nor a Git ref: %w", base, err)}
	}
	return check(base, fsys, nil), nil
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
