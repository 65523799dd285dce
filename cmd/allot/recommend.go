package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/recommend"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
)

func init() { commands = append(commands, newRecommendCommand) }

func newRecommendCommand() *cobra.Command {
	var workloadFile, eventsFile, output string
	grid := "auto"
	var targets []string
	in := recommend.Input{Parallel: 2, CurveSteps: 3, MaxReplays: 200}
	opts := scheduler.DefaultOptions()
	c := &cobra.Command{
		Use:   "recommend DIR --workload FILE --target wait_p95=DURATION",
		Short: "Size quotas (and so pools) from replayed demand for a wait target, with their cost",
		Long: `Replay a workload history against the fleet of a capacity repository with the
real scheduling core and find, per team and flavor, the smallest nominal quota in
whole nodes of the flavor's pools whose simulated p95 queue wait meets the
target; then plan the fleet for those quotas and print the change and its
monthly cost next to today's, the committed node count of each pool that
minimises its cost for the replayed use (with the break-even use), and the
cost-versus-wait curve of each flavor around the recommendation.

--target wait_p95=D is the default target; --target NAME:wait_p95=D sets one for
a team (it replaces the default for that team) or a tier (its jobs of every
team must meet it too). A job that never starts counts as waiting forever.

Every team and flavor is searched at once: each replay tries one candidate
quota of every team (bisection; --parallel replays per round), then the
quotas are settled against each other's final values. That search replays the
history moved onto a grid (--grid: arrivals, ends and node events on whole
steps, far fewer scheduling cycles); its answer is then replayed exactly and
every team that misses its target there is raised a node at a time until all
meet it. --exact confirms, one exact replay per team, that one node less
misses the target (and lowers the teams for which it does not).

Output: text, markdown or json (nothing but JSON on stdout). Progress is shown
on stderr when it is a terminal.
Exit status: 0 done, 1 the configuration does not load or an invariant was
broken, 2 bad usage or unreadable input.`,
		Example: `  allot recommend examples --workload examples/workloads/mixed.csv --target wait_p95=15m
  allot recommend examples --workload jobs.csv --target wait_p95=1h --target production:wait_p95=10m -o json`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if output != "text" && output != "markdown" && output != "json" {
				return usageError{fmt.Errorf("-o %s: want text, markdown or json", output)}
			}
			if workloadFile == "" {
				return usageError{errors.New("recommend needs --workload FILE")}
			}
			if len(targets) == 0 {
				return usageError{errors.New("recommend needs --target wait_p95=DURATION (e.g. 15m)")}
			}
			if in.GridS, err = parseGrid(grid); err != nil {
				return usageError{err}
			}
			if in.Parallel < 1 || in.Parallel > 64 {
				return usageError{fmt.Errorf("--parallel %d: want 1 to 64", in.Parallel)}
			}
			for _, s := range targets {
				t, err := recommend.ParseTarget(s)
				if err != nil {
					return usageError{fmt.Errorf("--target: %w", err)}
				}
				in.Targets = append(in.Targets, t)
			}
			dir := args[0]
			ck, err := checkDir(dir, nil)
			if err != nil {
				return err
			}
			if ck.cfg == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s does not load:\n", dir)
				printFindings(cmd.ErrOrStderr(), ck.findings)
				return exitError{exitFindings}
			}
			in.Config, in.Workload, in.Options = ck.cfg, workloadFile, &opts
			if in.Jobs, err = readWorkload(workloadFile, ck.cfg); err != nil {
				return usageError{err}
			}
			if eventsFile != "" {
				if in.Events, err = readWith(eventsFile, sim.ReadEvents); err != nil {
					return usageError{err}
				}
			}
			stderr := cmd.ErrOrStderr()
			if isTerminal(stderr) {
				in.Progress = progressBarOf(stderr, "replays")
			}
			res, err := recommend.Run(in)
			if in.Progress != nil {
				fmt.Fprint(stderr, "\r\033[K")
			}
			if err != nil {
				if errors.Is(err, recommend.ErrInvariant) {
					fmt.Fprintf(stderr, "allot: %v\n", err)
					return exitError{exitFindings}
				}
				return usageError{fmt.Errorf("recommending for %s: %w", dir, err)}
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				err = enc.Encode(res)
			case "markdown":
				err = recommend.Markdown(out, res)
			default:
				err = recommend.Text(out, res)
			}
			if err != nil {
				return fmt.Errorf("writing the recommendation: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&workloadFile, "workload", "", "workload history (project CSV, normalized trace, Helios or openb)")
	f.StringArrayVar(&targets, "target", nil, "[TEAM_OR_TIER:]wait_p95=DURATION; repeat for teams and tiers")
	f.StringVar(&eventsFile, "events", "", "node events CSV: time,node,event (fail|recover), replayed every time")
	f.StringVarP(&output, "output", "o", "text", "output format: text, markdown or json")
	f.BoolVar(&in.Exact, "exact", false, "confirm every bounded quota with its own replay at one node less")
	f.IntVar(&in.CurveSteps, "curve", in.CurveSteps, "cost-versus-wait points on each side of the recommendation (0: none)")
	f.IntVar(&in.Parallel, "parallel", in.Parallel, "replays run at once")
	f.IntVar(&in.MaxReplays, "max-replays", in.MaxReplays, "stop the search after this many replays")
	f.StringVar(&grid, "grid", grid, "grid of the search's replays (e.g. 2m), 'auto' (a fifteenth of the smallest target, when it cuts the history's event times at least 4x) or 'off' (every replay exact)")
	walkFlags(f, &opts)
	return c
}

// parseGrid reads --grid: auto (0), off (-1) or a positive duration in seconds.
func parseGrid(s string) (float64, error) {
	switch s {
	case "auto":
		return 0, nil
	case "off":
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("--grid %q: want auto, off or a duration of at least 1s (e.g. 2m)", s)
	}
	return d.Seconds(), nil
}
