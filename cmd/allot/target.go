package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/planner/render/kueue"
)

// targetFlag is --target: the scheduler the quotas are rendered for.
type targetFlag struct{ value string }

func (t *targetFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&t.value, "target", string(render.TargetAllot),
		"the scheduler that enforces the quotas: allot (its embedded scheduler) or kueue (Kueue's ClusterQueues; the rules Kueue cannot say are reported as warnings)")
}

func (t *targetFlag) target() (render.Target, error) {
	tg := render.Target(t.value)
	if !slices.Contains(render.Targets(), tg) {
		return "", usageError{fmt.Errorf("--target %q: want one of %v", t.value, render.Targets())}
	}
	return tg, nil
}

// addTargetFindings adds to c the findings of the target: for kueue, allot's
// rules Kueue cannot say.
func addTargetFindings(c *checked, tg render.Target) {
	if tg == render.TargetKueue && c.cfg != nil {
		c.findings = append(c.findings, kueue.Findings(c.cfg)...).Sort()
	}
}
