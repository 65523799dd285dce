package main

import (
	"github.com/spf13/pflag"

	"github.com/allot-dev/allot/scheduler"
)

// walkFlags registers how far a cycle after a release walks the queue
// (scheduler.Options.WalkDepth, FullWalkEvery): the same flags wherever the
// core runs, so a replay can be made to decide as the cluster does.
func walkFlags(f *pflag.FlagSet, o *scheduler.Options) {
	f.IntVar(&o.WalkDepth, "walk-depth", o.WalkDepth, "after GPUs or quota are released, a cycle stops once this many workloads in a row did not fit, the rest walked within --full-walk-every: cheaper events in a long queue, less prompt backfill (0: always the whole queue)")
	f.DurationVar(&o.FullWalkEvery, "full-walk-every", o.FullWalkEvery, "least time between two walks of the whole queue when --walk-depth bounds the others")
}
