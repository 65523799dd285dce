package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
)

// renderSlurm is render --target slurm: per Slurm cluster, OUT/slurm/<cluster>/
// with its accounting and configuration fragments. Files of those names that
// allot no longer renders (a cluster removed, no topology) are removed;
// nothing else under OUT is touched.
func renderSlurm(cmd *cobra.Command, out string, c checked) error {
	files, err := slurm.Render(c.cfg, c.plan)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "allot: rendering %s: %v\n", c.name, err)
		return exitError{exitFindings}
	}
	changed := 0
	want := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(out, filepath.FromSlash(f.Path))
		want[p] = true
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := writeAtomic(p, f.Data); err != nil {
			return fmt.Errorf("writing %s: %w", out, err)
		}
		changed++
	}
	dirs, _ := filepath.Glob(filepath.Join(out, slurm.Dir, "*"))
	for _, dir := range dirs {
		for _, name := range []string{slurm.FileClusterJSON, slurm.FileAccounting, slurm.FileSlurmConf, slurm.FileGresConf, slurm.FileTopology} {
			p := filepath.Join(dir, name)
			if want[p] {
				continue
			}
			switch err := os.Remove(p); {
			case err == nil:
				changed++
			case !errors.Is(err, os.ErrNotExist):
				return fmt.Errorf("writing %s: %w", out, err)
			}
		}
	}
	clusters := c.cfg.ClustersRunBy(schema.SchedulerSlurm)
	names := make([]string, len(clusters))
	for i, n := range clusters {
		names[i] = string(n)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d Slurm clusters (%s); %d files changed\n", out, len(clusters), strings.Join(names, ", "), changed)
	return nil
}
