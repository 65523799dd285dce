package report

import (
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
)

// Input is everything a report shows.
type Input struct {
	// Name labels the configuration, e.g. the directory.
	Name     string
	Config   *schema.Config
	Plan     *planner.Plan
	Findings schema.Findings
	// Base and Diff are set when the plan is compared with a base.
	BaseName string
	Base     *planner.Plan
	Diff     *planner.Diff
	// WhatIf is the simulated effect of the change on every team (plan --simulate).
	WhatIf *whatif.Result
}

// Marker is the hidden line that identifies allot's pull-request comment, so CI
// updates one comment instead of adding another.
const Marker = "<!-- allot-plan -->"
