package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/allot-dev/allot/internal/plaintext"
	"github.com/spf13/cobra"
)

func newSlurmStatusCommand() *cobra.Command {
	var cluster, statusFile string
	var asJSON bool
	c := &cobra.Command{
		Use:   "status --cluster NAME [--status-file F] [--json]",
		Short: "Print what the last allot slurm apply with a status file recorded",
		Long: `Print the status file of allot slurm apply (--interval or --status-file):
the last applied and attempted revisions, when the last attempt ended, its
changes, and one line per condition (Ready, Stalled) with its age.

Exit status: 0 Ready, 1 not Ready (or no status yet), 2 bad usage or an
unreadable status file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cluster == "" {
				return usageHint(cmd, errors.New("--cluster NAME: the Slurm cluster whose status to print"))
			}
			file, err := slurmStatusFile(cluster, statusFile)
			if err != nil {
				return err
			}
			st, err := readSlurmStatus(file)
			if errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s: no status yet (has allot slurm apply --cluster %s --interval run?)\n", file, cluster)
				return exitError{exitFindings}
			}
			if err != nil {
				return usageError{err}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return err
				}
			} else {
				printSlurmStatus(cmd.OutOrStdout(), st, time.Now())
			}
			if r := st.condition("Ready"); r == nil || r.Status != "True" {
				return exitError{exitFindings}
			}
			return nil
		},
	}
	c.Flags().StringVar(&cluster, "cluster", "", "the Slurm cluster (required)")
	c.Flags().StringVar(&statusFile, "status-file", "", "the status file (default: $XDG_STATE_HOME/allot/slurm-<cluster>.json)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the status file's JSON")
	return c
}

// printSlurmStatus writes st as text, e.g.
//
//	cluster hpc, source /srv/capacity
//	applied   sha1:4f1c…  attempted sha1:4f1c…  handled 2m ago
//	changes   +0 ~1 -0 !0
//	Ready     True   Succeeded  2m ago  Applied revision sha1:4f1c…: 1 change(s), 0 conflict(s)
func printSlurmStatus(w io.Writer, st slurmStatus, now time.Time) {
	orNone := func(s string) string {
		if s == "" {
			return "none"
		}
		return plaintext.Escape(s)
	}
	fmt.Fprintf(w, "cluster %s, source %s\n", plaintext.Escape(st.Cluster), plaintext.Escape(st.Source))
	fmt.Fprintf(w, "applied   %s  attempted %s  handled %s\n", orNone(st.LastAppliedRevision), orNone(st.LastAttemptedRevision), age(now, st.LastHandledAt))
	fmt.Fprintf(w, "changes   +%d ~%d -%d !%d\n", st.Changes["add"], st.Changes["modify"], st.Changes["remove"], st.Changes["conflict"])
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "%-9s %-6s %s  %s  %s\n", plaintext.Escape(c.Type), plaintext.Escape(c.Status), plaintext.Escape(c.Reason), age(now, c.LastTransitionTime), plaintext.Escape(c.Message))
	}
}

// age is how long before now t was, to the second, e.g. "2m5s ago".
func age(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		return "in " + strings.TrimPrefix((-d).String(), "-")
	}
	return d.String() + " ago"
}
