package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/planner/render/kueue"
)

// targetFlag is --target: the scheduler the quotas are rendered for; and
// --strict: the rules it can only approximate are errors.
type targetFlag struct {
	value  string
	strict bool
}

// targetSlurm renders the Slurm clusters' accounting and configuration
// fragments (planner/slurm) instead of Kubernetes manifests.
const targetSlurm render.Target = "slurm"

func targets() []render.Target { return append(render.Targets(), targetSlurm) }

func (t *targetFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&t.value, "target", string(render.TargetAllot),
		"the scheduler that enforces the quotas: allot (its embedded scheduler), kueue (Kueue's ClusterQueues; the rules Kueue cannot say are reported as warnings) or slurm (the Slurm clusters' accounts, QOS, limits and slurm.conf fragments: docs/slurm.md)")
	c.Flags().BoolVar(&t.strict, "strict", false,
		"report the rules the scheduler can only approximate (kueue-* with --target kueue, slurm-* for Slurm clusters) as errors, unless their tier, team or pool says approximate: true")
}

func (t *targetFlag) target() (render.Target, error) {
	tg := render.Target(t.value)
	if !slices.Contains(targets(), tg) {
		return "", usageError{fmt.Errorf("--target %q: want one of %v", t.value, targets())}
	}
	return tg, nil
}

// addFindings adds the target's findings to c; with --strict, the rules a
// scheduler only approximates are errors unless their tier, team or pool
// says approximate: true.
func (t *targetFlag) addFindings(c *checked, tg render.Target) {
	addTargetFindings(c, tg)
	if t.strict {
		c.findings = c.findings.Strict()
	}
}

// addTargetFindings adds to c the findings of the target: for kueue, allot's
// rules Kueue cannot say.
func addTargetFindings(c *checked, tg render.Target) {
	if tg == render.TargetKueue && c.cfg != nil {
		c.addFindings(kueue.Findings(c.cfg)...)
	}
}
