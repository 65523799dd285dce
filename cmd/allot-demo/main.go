package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/allot-dev/allot/controllers/testenv"
)

// options are the demo's flags.
type options struct {
	// allot is the allot binary the manager runs from.
	allot string
	// examples is the capacity repository put in Git.
	examples string
	// maxNodes caps the Node objects created per pool.
	maxNodes int64
	// fleet runs the fleet demo (a hub and two workers) instead.
	fleet bool
	// slurm runs the Slurm demo (a real Slurm cluster) instead.
	slurm bool
	// out receives the demo's story; errors are returned.
	out io.Writer
}

func main() {
	o := options{out: os.Stdout}
	fs := flag.NewFlagSet("allot-demo", flag.ContinueOnError)
	fs.StringVar(&o.allot, "allot", "bin/allot", "the allot binary the manager runs from (make build)")
	fs.StringVar(&o.examples, "examples", filepath.Join(testenv.Root(), "examples"), "the capacity repository to put in Git")
	fs.Int64Var(&o.maxNodes, "max-nodes-per-pool", 4, "create at most this many Node objects per pool")
	fs.BoolVar(&o.slurm, "slurm", false, "the Slurm demo instead: a real Slurm cluster, a job pending on its team's GPU limit, a quota change through Git, the job running")
	fs.BoolVar(&o.fleet, "fleet", false, "the fleet demo instead: a hub and two worker clusters, a Job routed to the cheaper, then moved when it is lost")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: allot-demo [--allot bin/allot] [--examples DIR] [--max-nodes-per-pool N] [--fleet | --slurm]")
		fmt.Fprintln(fs.Output(), "\nRuns allot's manager and scheduler on an embedded control plane (make controlplane),\nsubmits a workload, commits a quota change and shows its effect.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 || o.maxNodes < 1 || o.fleet && o.slurm {
		fs.Usage()
		os.Exit(2)
	}
	// The signal context stays registered until the demo has cleaned up, so a
	// second interrupt cannot kill it half-way through stopping its children.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	switch {
	case o.fleet:
		_, err = runFleet(ctx, o)
	case o.slurm:
		_, err = runSlurm(ctx, o)
	default:
		_, err = run(ctx, o)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "allot-demo:", err)
		os.Exit(1)
	}
}
