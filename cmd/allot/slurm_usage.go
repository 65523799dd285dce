package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/scheduler/workload"
)

// usageFields are what allot slurm usage asks sacct for: what allot import
// needs (docs/cli.md).
const usageFields = "JobID,Account,User,Partition,QOS,Submit,Start,End,State,NNodes,AllocTRES"

// sinceDays is a --since of days (30d) or a duration Go reads (12h).
var sinceDays = regexp.MustCompile(`^([0-9]{1,5})d$`)

// parseSince reads --since: a date (2026-11-01), a date and time
// (2026-11-01T08:00:00) or a span back from now (30d, 12h).
func parseSince(s string, now time.Time) (time.Time, error) {
	for _, l := range []string{"2006-01-02", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return t, nil
		}
	}
	if m := sinceDays.FindStringSubmatch(s); m != nil {
		d, _ := strconv.Atoi(m[1])
		return now.AddDate(0, 0, -d), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a date (2026-11-01), a date and time (2026-11-01T08:00:00) or a span back from now (30d, 12h)", s)
}

func newSlurmUsageCommand() *cobra.Command {
	var since, output string
	c := &cobra.Command{
		Use:   "usage --since D",
		Short: "GPU-hours per Slurm account and GPU type, from sacct",
		Long: `Read the jobs that ran since D from Slurm's accounting (sacct -a -X -P
--truncate -S D -E now on this host; SLURM_CONF names the cluster's slurm.conf)
and print the GPU-hours per account, GRES type (empty: untyped GPUs) and
partition: the GPUs of each job times how long it ran within the window (a
job still running counts up to now). Jobs are read as allot import reads
them (docs/cli.md): steps and jobs that never started are left out.
allot report --usage reads the json as what the teams used.

Output: text or json. Exit status: 0 printed, 2 bad usage or sacct failed.`,
		Example: `  allot slurm usage --since 2026-11-01
  allot slurm usage --since 30d -o json > usage.json && allot report . --usage usage.json -o report.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return usageError{fmt.Errorf("-o %s: want text or json", output)}
			}
			now := time.Now()
			from, err := parseSince(since, now)
			if err != nil {
				return usageError{err}
			}
			const layout = "2006-01-02T15:04:05" // sacct's, in local time
			argv := []string{"-a", "-X", "-P", "--truncate", "-S", from.Format(layout), "-E", now.Format(layout), "-o", usageFields}
			sacct := exec.CommandContext(cmd.Context(), "sacct", argv...)
			var stderr bytes.Buffer
			sacct.Stderr = &stderr
			out, err := sacct.Output()
			if err != nil {
				return usageError{fmt.Errorf("sacct %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))}
			}
			jobs, format, err := workload.Read(bytes.NewReader(out), "sacct")
			if err != nil {
				return usageError{err}
			}
			if format != workload.FormatSacct && len(jobs) > 0 {
				return usageError{fmt.Errorf("sacct printed %s, not its -P output", format)}
			}
			usage := workload.SumSlurmUsage(jobs)
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"since": from.Format(time.RFC3339), "until": now.Format(time.RFC3339), "usage": usage}); err != nil {
					return fmt.Errorf("writing the usage: %w", err)
				}
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "GPU-hours since %s\nACCOUNT\tGRES TYPE\tPARTITION\tGPU-HOURS\n", from.Format(layout))
			for _, u := range usage {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\n", u.Account, cmp.Or(u.GRESType, "-"), cmp.Or(u.Partition, "-"), u.GPUHours)
			}
			return tw.Flush()
		},
	}
	f := c.Flags()
	f.StringVar(&since, "since", "", "start of the window: a date, a date and time, or a span back from now (30d)")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = c.MarkFlagRequired("since")
	return c
}
