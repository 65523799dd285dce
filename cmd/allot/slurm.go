package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	slurmctl "github.com/allot-dev/allot/controllers/slurm"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
)

func init() { commands = append(commands, newSlurmCommand) }

func newSlurmCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "slurm",
		Short: "Converge a Slurm cluster's accounts, QOS and GPU limits to the repository",
		Long: `Converge the accounting of a Slurm cluster of the repository (docs/slurm.md),
through sacctmgr on this host (SLURM_CONF names the cluster's slurm.conf).

  plan   shows what apply would add (+), change (~) and remove (-), and the
         names the repository wants that exist but are not allot's (!)
  apply  makes it so: QOS before accounts before limits; removes only what
         allot created; a second apply changes nothing`,
	}
	for _, apply := range []bool{false, true} {
		c.AddCommand(newSlurmConvergeCommand(apply))
	}
	return c
}

func newSlurmConvergeCommand(apply bool) *cobra.Command {
	var cluster string
	use, short := "plan DIR --cluster NAME", "Show the difference between the repository and the live accounting"
	if apply {
		use, short = "apply DIR --cluster NAME", "Make the live accounting what the repository says"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return usageHint(cmd, errors.New("--cluster NAME: the Slurm cluster of the repository to converge"))
			}
			c, err := checkDir(args[0], nil)
			if err != nil {
				return err
			}
			printFindings(cmd.ErrOrStderr(), c.findings)
			if c.cfg == nil || c.findings.HasErrors() {
				return exitError{exitFindings}
			}
			if cl := c.cfg.Clusters[schema.ClusterName(cluster)]; cl == nil || cl.Scheduler != schema.SchedulerSlurm {
				return usageError{fmt.Errorf("--cluster %q: want one of the repository's Slurm clusters %v", cluster, c.cfg.ClustersRunBy(schema.SchedulerSlurm))}
			}
			want, err := slurm.Build(c.cfg, c.plan, schema.ClusterName(cluster))
			if err != nil {
				return fmt.Errorf("rendering slurm cluster %s: %w", cluster, err)
			}
			r := slurmctl.Runner{}
			ctx := context.Background()
			live, err := r.Read(ctx)
			if err != nil {
				return fmt.Errorf("reading the accounting of %s: %w", cluster, err)
			}
			changes := slurm.Diff(want, live)
			printChanges(cmd.OutOrStdout(), changes)
			if !apply {
				return nil
			}
			if err := r.Apply(ctx, changes); err != nil {
				return fmt.Errorf("applying to %s: %w", cluster, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d change(s) applied\n", cluster, runnable(changes))
			return nil
		},
	}
	c.Flags().StringVar(&cluster, "cluster", "", "the Slurm cluster of the repository (required)")
	return c
}

func printChanges(w io.Writer, changes []slurm.Change) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no changes")
	}
	for _, c := range changes {
		mark := map[string]string{"add": "+", "modify": "~", "remove": "-", "conflict": "!"}[c.Op]
		fmt.Fprintf(w, "%s %s %s %s\n", mark, c.Kind, c.Name, c.Detail)
	}
}

func runnable(changes []slurm.Change) int {
	n := 0
	for _, c := range changes {
		if c.Argv != nil {
			n++
		}
	}
	return n
}
