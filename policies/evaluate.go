package policies

import (
	"io/fs"

	"github.com/allot-dev/allot/planner"
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

// Evaluate loads the capacity repository in fsys, plans it and runs the rules;
// base, when not nil, is the configuration the change starts from. The CLI and
// the manager both judge a revision with it.
func Evaluate(fsys fs.FS, base *schema.Config) Result {
	cfg, findings := schema.Load(fsys)
	r := Result{Config: cfg, Findings: findings}
	if cfg == nil {
		return r
	}
	r.Plan = planner.Build(cfg)
	r.Findings = append(r.Findings, Check(cfg, r.Plan, base)...).Sort()
	return r
}
