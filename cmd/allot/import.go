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
		Short: "Convert a trace (sacct, normalized, Helios, openb, Alibaba PAI) into allot's workload CSV",
		Long: `Convert a job trace into the workload CSV that allot sim reads
(id,submit,duration,team,tier,pods,gpus_per_pod,flavor,require,prefer), on stdout.
The layout is told by the header (any column order, unknown columns ignored):
the normalized trace schema, HeliosData's cluster_log.csv (Venus, Earth,
Saturn, Uranus: a job's vc is its team), the Helios DIR-LAB layout, openb's pod
list, Alibaba's cluster-trace-gpu-v2020 pai_task_table (with or without its
header), or Slurm's sacct -P / -p output, separated by commas, tabs,
semicolons or pipes. FILE may be
gzip-compressed or a .tar.gz of one file. Times are
seconds, or dates and times (2020-06-09 18:41:01, ISO 8601 with or without a
zone) counted from the file's earliest submit time. Jobs that span several
nodes become gangs of whole nodes; CPU-only jobs, and jobs that never started
or never ended, are left out; failed and cancelled jobs are replayed for as
long as they ran; a fractional GPU counts as one.

Users are dealt round-robin onto teams (--teams, or the teams of the capacity
repository --repo), one user staying in one team; the jobs of a trace that
names no users (openb's pod lists) are dealt one by one; priorities map onto tiers by
rank (openb's Guaranteed/LS, Burstable, BE).

From sacct (sacct -a -X -P -o JobID,Account,User,Partition,QOS,Submit,Start,
End,State,NNodes,AllocTRES): only allocations are jobs (steps such as
123.batch are left out; array tasks 123_4 and het components 123+0 are jobs);
a job's Slurm account is its team when the repository has that team, else
its user is dealt; its QOS is its tier when the repository has that tier;
its GPUs' GRES type (gres/gpu:h100=8), else its partition, gives its flavor
when a pool of the repository has that Slurm GRES type or partition.
The file is read twice and the jobs are written as they are read, so a trace
of any length converts in bounded memory; an error writes nothing to stdout.
Exit status: 0 converted, 2 bad usage or unreadable input (file:line: what is
wrong, and the layout the header was read as).`,
		Example: `  allot import ../shared/traces/helios/helios_15k_users.csv --repo examples > helios.csv
  allot import Venus/cluster_log.csv --teams vision,nlp,speech > venus.csv
  allot import openb_pod_list_default.csv --teams vision,nlp --tiers production,research
  sacct -a -X -P -S 2026-01-01 -o JobID,Account,User,Partition,QOS,Submit,Start,End,State,NNodes,AllocTRES > jobs.txt
  allot import jobs.txt --repo capacity > slurm.csv`,
		Args: exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			// The first reading checks every row, and finds the origin of
			// the submit times and whether a job names a cluster.
			var shift float64
			pinned := false
			if err := scanTrace(file, func(j workload.Spec) error {
				pinned = pinned || j.Cluster != ""
				return nil
			}, func(rd *workload.Reader) { shift = rd.Shift() }); err != nil {
				return usageError{err}
			}
			assign, err := importAssigner(cmd, dir, split(teams), split(tiers), def)
			if err != nil {
				return err
			}
			w := workload.NewWriter(cmd.OutOrStdout(), pinned)
			batch := make([]workload.Spec, 0, 4096)
			flush := func() error {
				assign(batch)
				for _, j := range batch {
					if err := w.Write(j); err != nil {
						return fmt.Errorf("writing the workload: %w", err)
					}
				}
				batch = batch[:0]
				return nil
			}
			err = scanTrace(file, func(j workload.Spec) error {
				j.Submit += shift
				if batch = append(batch, j); len(batch) == cap(batch) {
					return flush()
				}
				return nil
			}, nil)
			if err == nil {
				err = flush()
			}
			if err != nil {
				return usageError{err}
			}
			if err := w.Flush(); err != nil {
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

// scanTrace reads every job of file, in order, into each; end (when set)
// sees the reader after the last job. A file of more than MaxInputBytes is
// an error, not a trace cut short.
func scanTrace(file string, each func(workload.Spec) error, end func(*workload.Reader)) error {
	_, err := readWith(file, func(in io.Reader, name string) (struct{}, error) {
		cin := &countingReader{r: in}
		rd, err := workload.NewReader(cin, name)
		if err != nil {
			return struct{}{}, err
		}
		for {
			j, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return struct{}{}, err
			}
			if err := each(j); err != nil {
				return struct{}{}, err
			}
		}
		if cin.n >= MaxInputBytes {
			return struct{}{}, fmt.Errorf("%s: more than %d bytes: split the trace", name, MaxInputBytes)
		}
		if end != nil {
			end(rd)
		}
		return struct{}{}, nil
	})
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// importAssigner returns what maps a batch of jobs onto the repository's
// teams and tiers (dir), or onto teams and tiers; the users seen are dealt
// onto the same teams from one batch to the next.
func importAssigner(cmd *cobra.Command, dir string, teams, tiers []string, def string) (func([]workload.Spec), error) {
	if dir != "" {
		c, err := checkDir(dir, nil)
		if err != nil {
			return nil, err
		}
		if c.cfg == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s does not load:\n", dir)
			printFindings(cmd.ErrOrStderr(), c.findings)
			return nil, exitError{exitFindings}
		}
		q := sim.QuotaFromSchema(c.cfg)
		var names []string
		for _, t := range q.Teams {
			names = append(names, string(t.Name))
		}
		// Dealt first, the jobs' teams are the repository's: AssignToConfig
		// then maps only their tiers, which needs nothing from other batches.
		dealer := workload.NewDealer(names)
		byGRES, byPartition := sim.SlurmFlavorMaps(c.cfg)
		return func(b []workload.Spec) {
			dealer.Deal(b)
			sim.AssignToConfig(b, q)
			workload.SlurmFlavors(b, byGRES, byPartition)
		}, nil
	}
	if def == "" && len(tiers) > 0 {
		def = tiers[len(tiers)-1]
	}
	dealer := workload.NewDealer(teams)
	return func(b []workload.Spec) {
		dealer.Deal(b)
		workload.Assign(b, teams, tiers, def)
		for i := range b {
			if b[i].Team == "" {
				b[i].Team = "default"
			}
			if b[i].Tier == "" {
				b[i].Tier = def
			}
			if b[i].Tier == "" {
				b[i].Tier = "default"
			}
		}
	}, nil
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
