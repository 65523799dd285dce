// Package evaluate is where a capacity repository is judged: loaded, planned
// and checked against the policies, the same way for the CLI (validate, plan,
// render, report) and the manager (each CapacitySource revision).
package evaluate

import (
	"io/fs"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
)

// Result is a capacity repository loaded, planned and checked.
type Result struct {
	// Config is nil when the files do not load.
	Config *schema.Config
	// Plan is nil when Config is.
	Plan     *planner.Plan
	Findings schema.Findings
}

// Repository loads the capacity repository in fsys, plans it and runs the rules;
// base, when not nil, is the configuration the change starts from. It
// evaluates the CUE in this process: RepositoryWith can bound it.
func Repository(fsys fs.FS, base *schema.Config) Result {
	return RepositoryWith(schema.Evaluate, fsys, base)
}

// RepositoryWith is Repository with the CUE evaluation done by eval. The CLI and
// the manager both judge a revision with it, and source.Evaluator, so that a
// hostile revision exhausts only a child process. What follows the evaluation
// (decoding, planning, the rules) is bounded by the schema's bounds.
func RepositoryWith(eval schema.Evaluator, fsys fs.FS, base *schema.Config) Result {
	cfg, findings := schema.LoadWith(fsys, eval)
	r := Result{Config: cfg, Findings: findings}
	if cfg == nil {
		return r
	}
	r.Plan = planner.Build(cfg)
	r.Findings = append(r.Findings, policies.Check(cfg, r.Plan, base)...).Sort()
	return r
}
