package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun"
	"github.com/allot-dev/allot/schema"
)

// terraformFlags are plan's --terraform flags: a speculative terraform plan of
// every cluster's module against its state.
type terraformFlags struct {
	dir      string
	clusters []string
	// err is set when a cluster's terraform failed (already reported).
	err error
}

func (f *terraformFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.dir, "terraform", "", "also plan each cluster's Terraform module against its state in `WORKDIR`/<cluster> (e.g. the OUT or OUT/terraform of allot render); WORKDIR is not changed")
	c.Flags().StringSliceVar(&f.clusters, "terraform-cluster", nil, "with --terraform, only these clusters (default: all)")
}

// run plans the clusters of c: the Terraform summary of the plan's report, nil
// without --terraform.
func (f *terraformFlags) run(cmd *cobra.Command, c checked) (*planreport.TerraformPlan, error) {
	if f.dir == "" {
		if len(f.clusters) > 0 {
			return nil, usageError{errors.New("--terraform-cluster needs --terraform WORKDIR")}
		}
		return nil, nil
	}
	root, err := workdirRoot(f.dir)
	if err != nil {
		return nil, usageError{err}
	}
	// A Slurm cluster's nodes are the site's: it has no module.
	var clusters []schema.ClusterName
	for _, name := range c.cfg.ClusterNames() {
		if c.cfg.Clusters[name].Scheduler != schema.SchedulerSlurm {
			clusters = append(clusters, name)
		}
	}
	if len(f.clusters) > 0 {
		clusters = nil
		for _, name := range f.clusters {
			switch cl := c.cfg.Clusters[schema.ClusterName(name)]; {
			case cl == nil:
				return nil, usageError{fmt.Errorf("--terraform-cluster %s: no such cluster in %s", name, c.name)}
			case cl.Scheduler == schema.SchedulerSlurm:
				return nil, usageError{fmt.Errorf("--terraform-cluster %s: Slurm runs it, and its nodes are not made with Terraform", name)}
			}
			clusters = append(clusters, schema.ClusterName(name))
		}
	}
	modules, err := terraform.Modules(c.cfg, c.plan, terraform.Options{})
	if err != nil {
		return nil, fmt.Errorf("rendering terraform: %w", err)
	}
	out := &planreport.TerraformPlan{Workdir: f.dir, Clusters: []planreport.TerraformCluster{}}
	for _, cluster := range clusters {
		tc := planCluster(cmd.Context(), cluster, filepath.Join(root, string(cluster)), modules[cluster])
		if tc.Error != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s\n", tc.Error)
			f.err = exitError{exitUsage}
		}
		out.Clusters = append(out.Clusters, tc)
	}
	return out, nil
}

// workdirRoot is the directory that holds one working directory per cluster:
// dir/terraform when dir is the output of allot render, else dir.
func workdirRoot(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("--terraform: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("--terraform %s: not a directory", dir)
	}
	if st, err := os.Stat(filepath.Join(dir, render.TerraformDir)); err == nil && st.IsDir() {
		return filepath.Join(dir, render.TerraformDir), nil
	}
	return dir, nil
}

// planCluster makes a speculative plan of module against the state of the
// working directory src (which may not exist: a new cluster), in a copy.
func planCluster(ctx context.Context, cluster schema.ClusterName, src string, module []byte) planreport.TerraformCluster {
	tc := planreport.TerraformCluster{Cluster: cluster, Pools: []terraform.PoolPlan{}}
	fail := func(err error) planreport.TerraformCluster {
		tc.Error = err.Error()
		return tc
	}
	tmp, err := os.MkdirTemp("", "allot-plan-"+string(cluster)+"-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	if err := copyWorkdir(src, tmp); err != nil {
		return fail(fmt.Errorf("terraform working directory of cluster %s: %w", cluster, err))
	}
	if err := os.WriteFile(filepath.Join(tmp, terraform.ModuleFile), module, 0o644); err != nil {
		return fail(err)
	}
	r, err := tfrun.New(ctx, cluster, tmp)
	if err != nil {
		return fail(fmt.Errorf("terraform of cluster %s: %w", cluster, err))
	}
	if err := r.Init(ctx); err != nil {
		return fail(err)
	}
	p, err := r.Plan(ctx, tfrun.PlanOptions{Speculative: true})
	if err != nil {
		return fail(err)
	}
	tc.Changes, tc.Add, tc.Change, tc.Destroy, tc.Pools = p.Changes, p.Add, p.Change, p.Destroy, p.Pools
	if tc.Pools == nil {
		tc.Pools = []terraform.PoolPlan{}
	}
	if p.Drift != nil {
		tc.Drift = p.Drift.Error()
	}
	return tc
}

// copyWorkdir copies what a plan reads of a working directory: its files (the
// state of the local backend, variables, the dependency lock file, override
// files, allot's drift record), not the module allot renders anew, saved
// plans or Terraform's lock. The providers it installed are linked, so that a
// directory initialised once plans offline.
func copyWorkdir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		skip, _ := filepath.Match(tfrun.PlanFiles, name)
		if !e.Type().IsRegular() || skip || name == terraform.ModuleFile || name == ".terraform.tfstate.lock.info" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			return err
		}
	}
	providers, err := filepath.Abs(filepath.Join(src, ".terraform", "providers"))
	if err != nil {
		return err
	}
	if st, err := os.Stat(providers); err == nil && st.IsDir() {
		if err := os.Mkdir(filepath.Join(dst, ".terraform"), 0o755); err != nil {
			return err
		}
		return os.Symlink(providers, filepath.Join(dst, ".terraform", "providers"))
	}
	return nil
}
