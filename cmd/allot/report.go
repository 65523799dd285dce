package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/finance"
	"github.com/allot-dev/allot/planner/recommend"
	"github.com/allot-dev/allot/schema/quantity"
)

func init() { commands = append(commands, newReportCommand) }

func newReportCommand() *cobra.Command {
	var base, output, observed, recommendation string
	var usage []string
	var simulate simulateFlags
	c := &cobra.Command{
		Use:   "report DIR -o FILE",
		Short: "Write the finance report: one self-contained HTML page",
		Long: `Write the finance report of a capacity repository as one HTML file that needs
nothing else to open (styles and charts inline, no script, no network): monthly
cost per team, cost centre and pool; committed against on-demand spend; quota
against capacity per flavor. With --base (a directory, or a Git ref of the
repository containing DIR) also the change: before, after and the approvals it
needs; with --simulate, the what-if of replaying a workload on both; with
--usage (the Teams as a cluster has them, or the JSON of allot slurm usage;
repeat it for several clusters), each team's cost of quota beside the cost
of what its jobs used, so idle quota shows in money; with --observed (the Pools
as a cluster has them), the burst nodes each pool's manager held, per team,
billed at the pool's on-demand price; with --recommendation (the JSON of allot
recommend), the cost-versus-wait curve of each flavor as a chart.

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
			pl, err := loadPlan(cmd.ErrOrStderr(), dir, base, observed, &simulate)
			if err != nil {
				return err
			}
			if err := pl.describe(dir, base, &simulate); err != nil {
				return err
			}
			in := pl.in
			var metered []finance.Metered
			if len(usage) > 0 {
				if metered, err = readMetered(cmd.ErrOrStderr(), usage, in.Config); err != nil {
					return usageError{err}
				}
			}
			fin := finance.Input{Input: in, BaseConfig: pl.base.cfg, Metered: metered, Burst: pl.burst}
			if recommendation != "" {
				if fin.Recommendation, err = readRecommendation(recommendation); err != nil {
					return usageError{err}
				}
			}
			rep := finance.Build(fin)
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
			printFindings(cmd.ErrOrStderr(), in.Findings)
			if in.Findings.HasErrors() {
				return exitError{exitFindings}
			}
			return nil
		},
	}
	c.Flags().StringVar(&base, "base", "", "base of the change: ref:REF (a Git ref) or dir:DIR (a directory)")
	c.Flags().StringVarP(&output, "output", "o", "", "the HTML file to write, - for stdout")
	c.Flags().StringArrayVar(&usage, "usage", nil, "what the teams used: a TeamList (kubectl get teams.allot.dev -o yaml) or allot slurm usage -o json; repeatable")
	c.Flags().StringVar(&recommendation, "recommendation", "", "what allot recommend -o json found: the report draws its cost-versus-wait curves")
	c.Flags().StringVar(&observed, "observed", "", "the Pools' observed health and metered burst: a PoolList (kubectl get pools.allot.dev -o yaml|json)")
	simulate.register(c)
	return c
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

// readRecommendation reads the JSON of allot recommend.
func readRecommendation(file string) (*recommend.Result, error) {
	b, err := readInput(file)
	if err != nil {
		return nil, fmt.Errorf("--recommendation: %w", err)
	}
	var r recommend.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("--recommendation %s: not the JSON of allot recommend: %w", file, err)
	}
	return &r, nil
}
