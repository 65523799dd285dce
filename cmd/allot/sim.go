package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/reference"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

func init() { commands = append(commands, newSimCommand) }

func newSimCommand() *cobra.Command {
	var workloadFile, eventsFile, nodesFile, output, policy string
	opts := scheduler.DefaultOptions()
	c := &cobra.Command{
		Use:   "sim DIR --workload FILE",
		Short: "Replay a workload against the declared fleet with the real scheduler core",
		Long: `Replay a workload against the fleet of a capacity repository on a virtual clock,
through the same scheduling core the cluster runs: quotas, cohorts, tiers,
preemption, fair share, gangs and topology. Every pool is built at the planner's
node target, nodes named <pool>-<index>. Invariants (no over-committed node, no
partial gang, quotas, required topology) are checked after every step.

--workload takes the project CSV (id,submit,duration,team,tier,pods,gpus_per_pod,
flavor,require,prefer[,cluster]), the normalized trace schema, or the raw Helios and openb
files; trace users are dealt onto the repository's teams. --nodes replaces the
fleet with a node list (openb's sn,...,gpu,model, or name,gpus,flavor).
--events is a CSV time,node,event with event fail or recover; node may be
cluster/NAME (every node of that cluster: a cluster lost, or back).

Pools that declare burst grow for pending gangs as the manager grows them
(docs/elastic.md, "In the simulator"): the report adds their nodes' hours and
on-demand cost per pool and team, and the wait saved against a second replay
without burst.

A cluster is a hard boundary: no gang spans two. A job with a cluster column
runs there; one without is routed to the cheapest cluster (its pool's on-demand
price per GPU-hour) where it fits now, then the best fit.

Output: text or json (nothing but JSON on stdout). A progress bar is shown on
stderr when it is a terminal.
Exit status: 0 ran (even with unschedulable jobs), 1 the configuration has errors
or an invariant was broken, 2 bad usage or unreadable input.`,
		Example: `  allot sim examples --workload examples/workloads/mixed.csv
  allot sim examples -o json --workload ../shared/traces/helios/helios_15k_users.csv
  allot sim examples --workload jobs.csv --events faults.csv --policy reference`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usageError{fmt.Errorf("-o %s: want text or json", output)}
			}
			if policy != "allot" && policy != "reference" {
				return usageError{fmt.Errorf("--policy %s: want allot or reference", policy)}
			}
			if workloadFile == "" {
				return usageError{errors.New("sim needs --workload FILE")}
			}
			dir := args[0]
			c, err := checkDir(dir, nil)
			if err != nil {
				return err
			}
			if c.cfg == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s does not load:\n", dir)
				printFindings(cmd.ErrOrStderr(), c.findings)
				return exitError{exitFindings}
			}
			in := sim.FromRepository(c.cfg, fleet.Layout(c.cfg, c.plan.NodesTargets()))
			if nodesFile != "" {
				nodes, err := readWith(nodesFile, workload.ReadNodes)
				if err != nil {
					return usageError{err}
				}
				// The list is the fleet: a name it lacks is an error.
				in.Nodes, in.Clusters, in.MayLack, in.Burst = sim.FromNodeList(nodes), nil, nil, nil
			}
			jobs, err := readWorkload(workloadFile, c.cfg)
			if err != nil {
				return usageError{err}
			}
			sim.AssignToConfig(jobs, in.Quota)
			in.Jobs = jobs
			if eventsFile != "" {
				if in.Events, err = readWith(eventsFile, sim.ReadEvents); err != nil {
					return usageError{err}
				}
			}
			var p sim.Scheduler
			if policy == "reference" {
				p = reference.New(in.Nodes)
				in.Quota, in.Burst = scheduler.Config{}, nil
			} else {
				core, err := sim.NewCore(in.Quota, in.Nodes, opts)
				if err != nil {
					return usageError{fmt.Errorf("building the scheduler for %s: %w", dir, err)}
				}
				p = core
			}
			runOpts := sim.Options{Clock: time.Now}
			stderr := cmd.ErrOrStderr()
			if isTerminal(stderr) {
				runOpts.Progress = progressBar(stderr)
			}
			rep, err := sim.Run(p, in, runOpts)
			if err != nil {
				return usageError{fmt.Errorf("simulating %s: %w", dir, err)}
			}
			if len(in.Burst) > 0 {
				// The same replay without burst: the wait it saves.
				without := sim.WithoutBurst(in)
				core, err := sim.NewCore(without.Quota, without.Nodes, opts)
				if err != nil {
					return usageError{fmt.Errorf("building the scheduler for %s: %w", dir, err)}
				}
				wo, err := sim.Run(core, without, sim.Options{})
				if err != nil {
					return usageError{fmt.Errorf("simulating %s without burst: %w", dir, err)}
				}
				sim.CompareBurst(rep, wo)
			}
			if runOpts.Progress != nil {
				fmt.Fprint(stderr, "\r\033[K")
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				// The contract's lists are lists even when empty, never null.
				if rep.Teams == nil {
					rep.Teams = []sim.TeamReport{}
				}
				if rep.Jobs == nil {
					rep.Jobs = []sim.JobReport{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return fmt.Errorf("writing the report: %w", err)
				}
			} else {
				writeSimText(out, rep)
			}
			if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 {
				fmt.Fprintf(stderr, "allot: invariants broken: %d gang, %d quota, %d topology violations\n", s.GangViolations, s.QuotaViolations, s.TopologyViolations)
				return exitError{exitFindings}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&workloadFile, "workload", "", "workload file (project CSV, normalized trace, Helios or openb)")
	f.StringVar(&eventsFile, "events", "", "node events CSV: time,node,event (fail|recover)")
	f.StringVar(&nodesFile, "nodes", "", "node list that replaces the repository's fleet (openb node list, or name,gpus,flavor)")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVar(&policy, "policy", "allot", "scheduling policy: allot (the core) or reference (greedy first-fit backfill, no quotas)")
	f.DurationVar(&opts.ReserveAfter, "reserve-after", opts.ReserveAfter, "wait after which a gang that does not fit gets its nodes reserved (negative: never)")
	f.DurationVar(&opts.StarvationAfter, "starvation-after", opts.StarvationAfter, "wait after which a workload may take back what other teams borrow for work submitted after it (0: never)")
	f.BoolVar(&opts.NodeLevelFit, "node-level-fit", opts.NodeLevelFit, "place work that names no topology level by node-level fit alone, not in the fullest domain (to compare fragmentation)")
	f.DurationVar(&opts.BorrowFirstAfter, "borrow-first-after", opts.BorrowFirstAfter, "wait on the cohort's idle quota after which a gang borrows before other teams' later, smaller work (0: never)")
	walkFlags(f, &opts)
	return c
}

// readWorkload reads a workload file. A job of the project's own layout names
// what it asks for: a team, tier, flavor or cluster cfg does not declare is an
// error at its line (a trace's users and priorities are dealt onto the
// repository's teams and tiers instead, by sim.AssignToConfig).
func readWorkload(file string, cfg *schema.Config) ([]workload.Spec, error) {
	flavors := map[string]bool{}
	for _, p := range cfg.Pools {
		flavors[string(p.Flavor)] = true
	}
	return readWith(file, func(r io.Reader, name string) ([]workload.Spec, error) {
		jobs, _, err := workload.ReadChecked(r, name, func(f workload.Format, j workload.Spec) error {
			if f != workload.FormatAllot {
				return nil
			}
			if cfg.Teams[schema.TeamName(j.Team)] == nil {
				return fmt.Errorf("team %q is not declared in the repository", j.Team)
			}
			if cfg.Tiers[schema.TierName(j.Tier)] == nil {
				return fmt.Errorf("tier %q is not declared in the repository", j.Tier)
			}
			for _, fl := range j.Flavors {
				if !flavors[fl] {
					return fmt.Errorf("flavor %q is not the flavor of any pool in the repository", fl)
				}
			}
			if j.Cluster != "" && cfg.Clusters[schema.ClusterName(j.Cluster)] == nil {
				return fmt.Errorf("cluster %q is not declared in the repository", j.Cluster)
			}
			return nil
		})
		if err == nil { // sacct's jobs take the flavor their GRES type or partition names
			byGRES, byPartition := sim.SlurmFlavorMaps(cfg)
			workload.SlurmFlavors(jobs, byGRES, byPartition)
		}
		return jobs, err
	})
}

// MaxInputBytes bounds what a verb reads from one input file (a workload, a
// report, a list of Pools or Teams): a workload of workload.MaxJobs rows fits.
const MaxInputBytes = 2 << 30

// readWith opens file and parses it with read. Only a regular file is read, and
// at most MaxInputBytes of it: a FIFO or a device is an error, not a hang.
func readWith[T any](file string, read func(io.Reader, string) (T, error)) (T, error) {
	var zero T
	fh, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO does not block the open
	if err != nil {
		return zero, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return zero, fmt.Errorf("%s: not a regular file", file)
	}
	if st.Size() > MaxInputBytes {
		// Read cut at the bound, it would be replayed in part, silently.
		return zero, fmt.Errorf("%s: %d bytes, more than the %d an input file may have", file, st.Size(), int64(MaxInputBytes))
	}
	return read(io.LimitReader(fh, MaxInputBytes), file)
}

// readInput reads the whole of file, as readWith does.
func readInput(file string) ([]byte, error) {
	b, err := readWith(file, func(r io.Reader, _ string) ([]byte, error) { return io.ReadAll(r) })
	if err == nil && len(b) == MaxInputBytes {
		return nil, fmt.Errorf("%s: more than %d bytes", file, MaxInputBytes)
	}
	return b, err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func progressBar(w io.Writer) func(done, total int) { return progressBarOf(w, "jobs") }

// progressBarOf draws done out of total things named unit.
func progressBarOf(w io.Writer, unit string) func(done, total int) {
	return func(done, total int) {
		if total == 0 {
			return
		}
		const width = 40
		n := done * width / total
		fmt.Fprintf(w, "\r[%s%s] %d/%d %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total, unit)
	}
}

func writeSimText(w io.Writer, rep *sim.Report) {
	s := rep.Summary
	fmt.Fprintf(w, "jobs %d: %d completed, %d unschedulable\n", s.Jobs, s.Completed, s.Unschedulable)
	fmt.Fprintf(w, "GPU utilization %.1f%%, wait p50 %.0fs, p95 %.0fs, makespan %.0fs, %d preemptions\n",
		100*s.GPUUtilization, s.WaitP50S, s.WaitP95S, s.MakespanS, s.Preemptions)
	fmt.Fprintf(w, "violations: gang %d, quota %d, topology %d\n", s.GangViolations, s.QuotaViolations, s.TopologyViolations)
	if s.WholeDomainShare != nil {
		fmt.Fprintf(w, "a whole top-level domain free %.1f%% of the time there were enough free GPUs for one\n", 100**s.WholeDomainShare)
	}
	fmt.Fprintf(w, "wall %.2fs, %.0f decisions/s\n\n", s.WallS, s.DecisionsPerS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "team\tGPU-hours\tshare\tnominal share\twait p95 (s)\tpreempted\t")
	for _, t := range rep.Teams {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f%%\t%.1f%%\t%.0f\t%d\t\n", t.Team, t.GPUSeconds/3600, 100*t.Share, 100*t.NominalShare, t.WaitP95S, t.Preempted)
	}
	tw.Flush()
	if len(rep.Clusters) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "cluster\tjobs\tGPU-hours\tmoved in\t")
		for _, c := range rep.Clusters {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t\n", c.Cluster, c.Jobs, c.GPUSeconds/3600, c.MovedIn)
		}
		tw.Flush()
	}
	if b := rep.Burst; b != nil {
		writeBurstText(w, b)
	}
	var stuck []sim.JobReport
	for _, j := range rep.Jobs {
		if j.End == nil {
			stuck = append(stuck, j)
		}
	}
	if len(stuck) == 0 {
		return
	}
	fmt.Fprintf(w, "\nnot completed (%d):\n", len(stuck))
	for _, j := range stuck[:min(len(stuck), 20)] {
		fmt.Fprintf(w, "  %s (%s/%s, %d GPUs): %s\n", j.ID, j.Team, j.Tier, j.GPUs, j.Reason)
	}
	if len(stuck) > 20 {
		fmt.Fprintf(w, "  ... and %d more (-o json lists them all)\n", len(stuck)-20)
	}
}

// writeBurstText writes what the pools that burst held and cost, and the
// wait they saved.
func writeBurstText(w io.Writer, b *sim.BurstReport) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "burst pool\tpeak nodes\tnode-hours\tGPU-hours\tcost\t")
	for _, p := range b.Pools {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t\n", p.Pool, p.PeakNodes, p.NodeHours, p.GPUHours, quantity.USD(p.CostUSD))
	}
	for _, t := range b.Teams {
		fmt.Fprintf(tw, "  team %s\t\t\t%.1f\t%s\t\n", cmp.Or(t.Team, "(none)"), t.GPUHours, quantity.USD(t.CostUSD))
	}
	tw.Flush()
	if c := b.Without; c != nil {
		fmt.Fprintf(w, "without burst: wait mean %.0fs, p95 %.0fs, %d unschedulable; burst saves %.0fs of mean wait and %.0fs of p95 for %s\n",
			c.WaitMeanS, c.WaitP95S, c.Unschedulable, c.WaitMeanSavedS, c.WaitP95SavedS, quantity.USD(c.CostAddedUSD))
	}
}
