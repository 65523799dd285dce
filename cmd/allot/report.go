package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/finance"
	"github.com/allot-dev/allot/planner/report"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

func init() { commands = append(commands, newReportCommand) }

func newReportCommand() *cobra.Command {
	var base, output string
	var simulate simulateFlags
	c := &cobra.Command{
		Use:   "report DIR -o FILE",
		Short: "Write the finance report: one self-contained HTML page",
		Long: `Write the finance report of a capacity repository as one HTML file that needs
nothing else to open (styles and charts inline, no script, no network): monthly
cost per team, cost centre and pool; committed against on-demand spend; quota
against capacity per flavor. With --base (a directory, or a Git ref of the
repository containing DIR) also the change: before, after and the approvals it
needs; with --simulate, the what-if of replaying a workload on both.

-o - writes the page to stdout.
Exit status: 0 no errors, 1 the configuration has errors (the report shows
them), 2 bad usage.`,
		Example: `  allot report . --base origin/main -o report.html
  allot report examples --simulate examples/workloads/mixed.csv -o report.html`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if output == "" {
				return usageError{fmt.Errorf("report needs -o FILE (- for stdout)")}
			}
			in, baseCfg, err := planInput(cmd.ErrOrStderr(), dir, base, &simulate)
			if err != nil {
				return err
			}
			rep := finance.Build(finance.Input{Input: in, BaseConfig: baseCfg})
			var page bytes.Buffer
			if err := finance.HTML(&page, rep); err != nil {
				return fmt.Errorf("rendering the report: %w", err)
			}
			if output == "-" {
				if _, err := cmd.OutOrStdout().Write(page.Bytes()); err != nil {
					return fmt.Errorf("writing the report: %w", err)
				}
			} else {
				if err := writeAtomic(output, page.Bytes()); err != nil {
					return usageError{fmt.Errorf("writing the report: %w", err)}
				}
				fmt.Fprintln(cmd.OutOrStdout(), reportSummary(output, rep))
			}
			printFindings(cmd.ErrOrStderr(), dir, in.Findings)
			if in.Findings.HasErrors() {
				return exitError{exitFindings}
			}
			return nil
		},
	}
	c.Flags().StringVar(&base, "base", "", "base of the change: a directory or a Git ref")
	c.Flags().StringVarP(&output, "output", "o", "", "the HTML file to write, - for stdout")
	simulate.register(c)
	return c
}

// planInput loads dir and, when base is set, the base of the change (a base that
// does not load is bad usage: its findings go to stderr), and compares them; it
// replays the what-if when asked and dir has no errors. It returns the base's
// configuration too (nil without a base).
func planInput(stderr io.Writer, dir, base string, simulate *simulateFlags) (report.Input, *schema.Config, error) {
	in := report.Input{Name: dir}
	var b checked
	if base != "" {
		var err error
		if b, err = loadBase(dir, base); err != nil {
			return in, nil, err
		}
		if b.cfg == nil {
			fmt.Fprintf(stderr, "allot: the base %s does not load:\n", base)
			printFindings(stderr, base, b.findings)
			return in, nil, exitError{exitUsage}
		}
	}
	c, err := checkDir(dir, b.cfg)
	if err != nil {
		return in, nil, err
	}
	in.Config, in.Plan, in.Findings = c.cfg, c.plan, c.findings
	if b.cfg != nil && c.cfg != nil {
		in.BaseName, in.Base = base, b.plan
		in.Diff = planner.Compare(b.plan, c.plan)
		in.Diff.Approvals = policies.Approvals(b.cfg, c.cfg, in.Diff)
	}
	if !c.findings.HasErrors() {
		if in.WhatIf, err = simulate.run(b.cfg, c.cfg); err != nil {
			return in, nil, err
		}
	}
	return in, b.cfg, nil
}

// reportSummary is the line report prints, e.g.
// "report.html: 5 pools, 7 teams, $2,559,010.62 a month (+$160,716.80 against base)".
func reportSummary(file string, r *finance.Report) string {
	if !r.Loaded {
		return file + ": the configuration does not load; the report lists its findings"
	}
	s := fmt.Sprintf("%s: %d pools, %d teams, %s a month", file, len(r.Pools), r.TeamCount(), quantity.USD(r.Total))
	if r.HasBase() {
		s += fmt.Sprintf(" (%s against %s)", quantity.SignedUSD(r.Delta), r.BaseName)
	}
	return s
}
