package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/report"
	"github.com/allot-dev/allot/planner/runner"
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

// terraformCluster is what a speculative plan does to one cluster.
type terraformCluster struct {
	Cluster schema.ClusterName `json:"cluster"`
	// Changes is false when Terraform has nothing to do.
	Changes bool                   `json:"changes"`
	Add     int                    `json:"add"`
	Change  int                    `json:"change"`
	Destroy int                    `json:"destroy"`
	Pools   []terraform.PoolChange `json:"pools"`
	// Drift says how the state differs from what allot last applied.
	Drift string `json:"drift,omitempty"`
	// Error is why the cluster could not be planned.
	Error string `json:"error,omitempty"`
}

// terraformPlan is the "terraform" member of plan -o json.
type terraformPlan struct {
	Workdir  string             `json:"workdir"`
	Clusters []terraformCluster `json:"clusters"`
}

// run plans the clusters of c and returns write extended with the per-pool
// Terraform summary; without --terraform it returns write as it is.
func (f *terraformFlags) run(cmd *cobra.Command, c checked, write func(io.Writer, report.Input) error, format string) (func(io.Writer, report.Input) error, error) {
	if f.dir == "" {
		if len(f.clusters) > 0 {
			return nil, usageError{errors.New("--terraform-cluster needs --terraform WORKDIR")}
		}
		return write, nil
	}
	root, err := workdirRoot(f.dir)
	if err != nil {
		return nil, usageError{err}
	}
	clusters := c.cfg.ClusterNames()
	if len(f.clusters) > 0 {
		clusters = nil
		for _, name := range f.clusters {
			if c.cfg.Clusters[schema.ClusterName(name)] == nil {
				return nil, usageError{fmt.Errorf("--terraform-cluster %s: no such cluster in %s", name, c.name)}
			}
			clusters = append(clusters, schema.ClusterName(name))
		}
	}
	modules, err := terraform.Modules(c.cfg, c.plan, terraform.Options{})
	if err != nil {
		return nil, fmt.Errorf("rendering terraform: %w", err)
	}
	out := terraformPlan{Workdir: f.dir, Clusters: []terraformCluster{}}
	for _, cluster := range clusters {
		tc := planCluster(cmd.Context(), cluster, filepath.Join(root, string(cluster)), modules[cluster])
		if tc.Error != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "allot: %s\n", tc.Error)
			f.err = exitError{exitUsage}
		}
		out.Clusters = append(out.Clusters, tc)
	}
	return func(w io.Writer, in report.Input) error {
		var buf bytes.Buffer
		if err := write(&buf, in); err != nil {
			return err
		}
		switch format {
		case "json":
			return spliceJSON(w, buf.Bytes(), "terraform", out)
		case "markdown", "md":
			buf.WriteString("\n")
			terraformMarkdown(&buf, out)
		default:
			buf.WriteString("\n")
			terraformText(&buf, out)
		}
		_, err := w.Write(buf.Bytes())
		return err
	}, nil
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
func planCluster(ctx context.Context, cluster schema.ClusterName, src string, module []byte) terraformCluster {
	tc := terraformCluster{Cluster: cluster, Pools: []terraform.PoolChange{}}
	fail := func(err error) terraformCluster {
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
	r, err := runner.New(ctx, cluster, tmp)
	if err != nil {
		return fail(fmt.Errorf("terraform of cluster %s: %w", cluster, err))
	}
	if err := r.Init(ctx); err != nil {
		return fail(err)
	}
	p, err := r.Plan(ctx, runner.PlanOptions{Speculative: true})
	if err != nil {
		return fail(err)
	}
	tc.Changes, tc.Add, tc.Change, tc.Destroy, tc.Pools = p.Changes, p.Add, p.Change, p.Destroy, p.Pools
	if tc.Pools == nil {
		tc.Pools = []terraform.PoolChange{}
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
		skip, _ := filepath.Match(runner.PlanFiles, name)
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

// spliceJSON writes the JSON object doc with one more member, key: value,
// added at its end, keeping doc's bytes as they are.
func spliceJSON(w io.Writer, doc []byte, key string, value any) error {
	body, ok := bytes.CutSuffix(bytes.TrimRight(doc, "\n"), []byte("}"))
	if !ok {
		return errors.New("the plan is not a JSON object")
	}
	v, err := json.MarshalIndent(value, "  ", "  ")
	if err != nil {
		return err
	}
	body = bytes.TrimRight(body, "\n ")
	_, err = fmt.Fprintf(w, "%s,\n  %q: %s\n}\n", body, key, v)
	return err
}

func terraformText(w io.Writer, p terraformPlan) {
	fmt.Fprintf(w, "Terraform (speculative plan against the state in %s):\n\n", p.Workdir)
	rows := [][]string{{"CLUSTER", "POOL", "NODES BEFORE", "NODES AFTER", "ADD", "CHANGE", "DESTROY"}}
	for _, c := range p.Clusters {
		for _, pc := range c.Pools {
			rows = append(rows, []string{string(c.Cluster), string(pc.Pool), fmt.Sprint(pc.NodesBefore), fmt.Sprint(pc.NodesAfter),
				fmt.Sprint(pc.Add), fmt.Sprint(pc.Change), fmt.Sprint(pc.Destroy)})
		}
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, cell := range r {
			if i < 2 { // names left, numbers right
				fmt.Fprintf(&line, "%-*s  ", width[i], cell)
			} else {
				fmt.Fprintf(&line, "%*s  ", width[i], cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
	fmt.Fprintln(w)
	for _, c := range p.Clusters {
		fmt.Fprintln(w, clusterVerdict(c))
	}
}

func terraformMarkdown(w io.Writer, p terraformPlan) {
	fmt.Fprintf(w, "#### Terraform\n\nSpeculative plan against the state in `%s`.\n\n", p.Workdir)
	fmt.Fprintln(w, "| cluster | pool | nodes before | nodes after | add | change | destroy |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, c := range p.Clusters {
		for _, pc := range c.Pools {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d |\n", c.Cluster, pc.Pool, pc.NodesBefore, pc.NodesAfter, pc.Add, pc.Change, pc.Destroy)
		}
	}
	fmt.Fprintln(w)
	for _, c := range p.Clusters {
		mark := "-"
		if c.Error != "" || c.Drift != "" {
			mark = "- ⚠️"
		}
		fmt.Fprintf(w, "%s %s\n", mark, strings.ReplaceAll(clusterVerdict(c), "|", `\|`))
	}
}

// clusterVerdict is one line on what the plan of c does, or why it failed.
func clusterVerdict(c terraformCluster) string {
	var s string
	switch {
	case c.Error != "":
		return fmt.Sprintf("cluster %s: not planned: %s", c.Cluster, c.Error)
	case c.Changes:
		s = fmt.Sprintf("cluster %s: %d to add, %d to change, %d to destroy", c.Cluster, c.Add, c.Change, c.Destroy)
	default:
		s = fmt.Sprintf("cluster %s: no changes", c.Cluster)
	}
	var resumed []string
	for _, pc := range c.Pools {
		if pc.Resumed > 0 {
			resumed = append(resumed, fmt.Sprintf("%s %d", pc.Pool, pc.Resumed))
		}
	}
	if len(resumed) > 0 {
		slices.Sort(resumed)
		s += "; node hooks resumed after a run cut short: " + strings.Join(resumed, ", ")
	}
	if c.Drift != "" {
		s += "; " + c.Drift
	}
	return s
}
