package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
)

func init() { commands = append(commands, newImportCommand) }

func newImportCommand() *cobra.Command {
	var dir, teams, tiers, def string
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "Convert a trace (normalized, Helios, openb) into allot's workload CSV",
		Long: `Convert a job trace into the workload CSV that allot sim reads
(id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer), on stdout.
The layout is told by the header: the normalized trace schema, the raw Helios
(DIR-LAB) file, or openb's pod list. Jobs that span several nodes become gangs
of whole nodes; CPU-only jobs are left out; a fractional GPU counts as one.

Users are dealt round-robin onto teams (--teams, or the teams of the capacity
repository --repo), one user staying in one team; priorities map onto tiers by
rank (openb's Guaranteed/LS, Burstable, BE).
Exit status: 0 converted, 2 bad usage or unreadable input.`,
		Example: `  allot import ../shared/traces/helios/helios_15k_users.csv --repo examples > helios.csv
  allot import openb_pod_list_default.csv --teams vision,nlp --tiers production,research`,
		Args: exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jobs, err := readWith(args[0], func(r io.Reader, name string) ([]workload.Spec, error) {
				jobs, _, err := workload.Read(r, name)
				return jobs, err
			})
			if err != nil {
				return usageError{err}
			}
			switch {
			case dir != "":
				c, err := checkDir(dir, nil)
				if err != nil {
					return err
				}
				if c.cfg == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s does not load:\n", dir)
					printFindings(cmd.ErrOrStderr(), dir, c.findings)
					return exitError{exitFindings}
				}
				sim.AssignToConfig(jobs, sim.QuotaFromSchema(c.cfg))
			default:
				tierList := split(tiers)
				if def == "" && len(tierList) > 0 {
					def = tierList[len(tierList)-1]
				}
				workload.Assign(jobs, split(teams), tierList, def)
				for i := range jobs {
					if jobs[i].Team == "" {
						jobs[i].Team = "default"
					}
					if jobs[i].Tier == "" {
						jobs[i].Tier = def
					}
					if jobs[i].Tier == "" {
						jobs[i].Tier = "default"
					}
				}
			}
			if err := workload.Write(cmd.OutOrStdout(), jobs); err != nil {
				return fmt.Errorf("writing the workload: %w", err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "repo", "", "capacity repository whose teams and tiers the trace maps onto")
	f.StringVar(&teams, "teams", "", "comma-separated teams to deal users onto (default: keep users as teams)")
	f.StringVar(&tiers, "tiers", "", "comma-separated tiers, highest priority first")
	f.StringVar(&def, "default-tier", "", "tier for jobs whose priority maps to none (default: the last of --tiers)")
	return c
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
