package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/schema"
)

// simulateFlags are the what-if flags of plan and report: the workload replayed
// against the base and the proposed configuration.
type simulateFlags struct {
	workload, events string
	opts             scheduler.Options
}

func (s *simulateFlags) register(c *cobra.Command) {
	f := c.Flags()
	s.opts = scheduler.DefaultOptions()
	f.StringVar(&s.workload, "simulate", "", "replay this workload (any format allot sim reads) against the base and the proposed configuration")
	f.StringVar(&s.events, "simulate-events", "", "node events CSV (time,node,event) for the --simulate replays")
}

// run replays the workload against base (may be nil) and head; it returns nil
// when --simulate was not given or head did not load.
func (s *simulateFlags) run(base, head *schema.Config) (*whatif.Result, error) {
	if s.workload == "" || head == nil {
		if s.events != "" && s.workload == "" {
			return nil, usageError{fmt.Errorf("--simulate-events needs --simulate WORKLOAD")}
		}
		return nil, nil
	}
	jobs, err := readWorkload(s.workload, head)
	if err != nil {
		return nil, usageError{fmt.Errorf("--simulate: %w", err)}
	}
	in := whatif.Input{Workload: s.workload, Jobs: jobs, Base: base, Head: head, Options: &s.opts}
	if s.events != "" {
		if in.Events, err = readWith(s.events, sim.ReadEvents); err != nil {
			return nil, usageError{fmt.Errorf("--simulate-events: %w", err)}
		}
	}
	res, err := whatif.Run(in)
	if err != nil {
		return nil, usageError{err}
	}
	return res, nil
}
