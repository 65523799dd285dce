package planreport

import (
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/slurm"
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
	// NotSimulated says why a requested what-if was not replayed.
	NotSimulated string
	// Provenance says what was planned: commits and date.
	Provenance Provenance
	// Terraform is the speculative Terraform plan of each cluster (plan
	// --terraform); nil without it.
	Terraform *TerraformPlan
	// Slurm is what the change does to each Slurm cluster's accounting
	// (slurm.Compare of base and head), when compared with a base.
	Slurm []slurm.ClusterChanges
}

// Provenance is where a report comes from. It is injected (from Git and
// SOURCE_DATE_EPOCH), never read from the clock, so that reports are reproducible.
type Provenance struct {
	// Commit and BaseCommit are Git object names; empty outside a Git repository.
	Commit, BaseCommit string
	// Date is an RFC 3339 date; empty when unknown.
	Date string
}

// Empty reports whether nothing is known.
func (p Provenance) Empty() bool { return p == Provenance{} }

// String is e.g. "commit 1a2b3c4d5e6f (base 0f9e8d7c6b5a), 2026-11-23T22:00:00Z".
func (p Provenance) String() string {
	var parts []string
	if p.Commit != "" {
		s := "commit " + short(p.Commit)
		if p.BaseCommit != "" {
			s += " (base " + short(p.BaseCommit) + ")"
		}
		parts = append(parts, s)
	} else if p.BaseCommit != "" {
		parts = append(parts, "base commit "+short(p.BaseCommit))
	}
	if p.Date != "" {
		parts = append(parts, p.Date)
	}
	return strings.Join(parts, ", ")
}

func short(commit string) string { return commit[:min(len(commit), 12)] }

// Marker is the hidden line that identifies allot's pull-request comment, so CI
// updates one comment instead of adding another.
const Marker = "<!-- allot-plan -->"
