package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

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
         allot created; a second apply changes nothing. With --interval, again
         every interval (a head node with no Kubernetes), recording each
         attempt in a status file
  status prints that status file: revisions, conditions, changes
  usage  GPU-hours per account and GPU type from Slurm's accounting (sacct)`,
	}
	for _, apply := range []bool{false, true} {
		c.AddCommand(newSlurmConvergeCommand(apply))
	}
	c.AddCommand(newSlurmStatusCommand())
	c.AddCommand(newSlurmUsageCommand())
	return c
}

func newSlurmConvergeCommand(apply bool) *cobra.Command {
	var cluster, statusFile string
	var interval time.Duration
	use, short := "plan DIR --cluster NAME", "Show the difference between the repository and the live accounting"
	if apply {
		use, short = "apply DIR --cluster NAME [--interval D]", "Make the live accounting what the repository says, once or every interval"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster == "" {
				return usageHint(cmd, errors.New("--cluster NAME: the Slurm cluster of the repository to converge"))
			}
			if apply && (interval > 0 || statusFile != "") {
				return slurmApplyRecorded(cmd, args[0], cluster, statusFile, interval)
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
	if apply {
		c.Flags().DurationVar(&interval, "interval", 0, "converge again every interval until SIGINT or SIGTERM, reading DIR anew each time (0: once)")
		c.Flags().StringVar(&statusFile, "status-file", "", "record each attempt here (default with --interval: $XDG_STATE_HOME/allot/slurm-<cluster>.json)")
	}
	return c
}

// slurmApplyRecorded is apply with a status file: once, or every interval
// until SIGINT or SIGTERM (exit 0). Once, it exits 1 when the attempt failed.
func slurmApplyRecorded(cmd *cobra.Command, dir, cluster, statusFile string, interval time.Duration) error {
	file, err := slurmStatusFile(cluster, statusFile)
	if err != nil {
		return err
	}
	o := slurmLoopOptions{dir: dir, cluster: cluster, statusFile: file, interval: interval,
		attemptTimeout: 10 * time.Minute, now: time.Now}
	if interval > 0 {
		if interval < time.Second {
			return usageError{fmt.Errorf("--interval %s: at least 1s", interval)}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: converging %s every %s; status in %s\n", cluster, dir, interval, file)
		return slurmLoop(ctx, o, cmd.ErrOrStderr())
	}
	st, err := readSlurmStatus(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return usageError{err}
	}
	st.Cluster, st.Source = cluster, dir
	changes, _, aerr := slurmAttempt(context.Background(), dir, cluster, o.runner, &st, o.now)
	if err := writeSlurmStatus(file, st); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	if aerr != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s: %s\n", cluster, safeMessage(aerr.Error()))
		return exitError{exitFindings}
	}
	printChanges(cmd.OutOrStdout(), changes)
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d change(s) applied\n", cluster, runnable(changes))
	return nil
}

// slurmStatusFile is file, or the default one of cluster.
func slurmStatusFile(cluster, file string) (string, error) {
	if !schema.SlurmName.MatchString(cluster) {
		return "", usageError{fmt.Errorf("--cluster %q: not a Slurm cluster name", cluster)}
	}
	if file != "" {
		return file, nil
	}
	f, err := defaultStatusFile(cluster)
	if err != nil {
		return "", usageError{err}
	}
	return f, nil
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
