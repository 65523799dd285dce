package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/report"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
)

func init() { commands = append(commands, newPlanCommand) }

func newPlanCommand() *cobra.Command {
	var base, output, observed string
	var simulate simulateFlags
	var tf terraformFlags
	c := &cobra.Command{
		Use:   "plan DIR",
		Short: "Show the capacity, quota and cost plan, and its diff against a base",
		Long: `Show the capacity, quota and cost plan of a capacity repository: pool sizes,
monthly cost per pool, team and cost centre. With --base (a directory, or a Git ref
of the repository containing DIR, read without touching the work tree) also the
diff: quota changes, node changes, the monthly cost delta and the approvals needed.

With --terraform, each cluster's Terraform module is also planned (terraform init
and a plan that takes no state lock, in a copy of WORKDIR/<cluster>) and the plan
shows per pool the nodes before and after and the resources Terraform adds,
changes and destroys.

With --observed, the pools' observed health (the Pools' status, as
'kubectl get pools.allot.dev -o yaml' prints it) is read: a pool whose healthy
GPUs are below what its quotas need gets a pool-unhealthy-capacity warning and,
within its nodes.max, replacement nodes (their cost included).

Output: text (terminal tables), markdown (the pull-request comment) or json.
Exit status: 0 no errors, 1 the configuration has errors, 2 bad usage (or a
cluster's terraform plan failed).`,
		Example: `  allot plan examples
  allot plan . --base origin/main -o markdown > comment.md
  allot plan examples -o json --base ../main/examples
  allot plan . --base origin/main --terraform rendered --terraform-cluster dgx-onprem`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			write, err := planWriter(output)
			if err != nil {
				return err
			}
			in := report.Input{Name: dir}
			var b checked
			if base != "" {
				if b, err = loadBase(dir, base); err != nil {
					return err
				}
				if b.cfg == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "allot: the base %s does not load:\n", base)
					printFindings(cmd.ErrOrStderr(), base, b.findings)
					return exitError{exitUsage}
				}
			}
			c, err := checkDir(dir, b.cfg)
			if err != nil {
				return err
			}
			if observed != "" && c.cfg != nil {
				obs, err := readObserved(observed)
				if err != nil {
					return usageError{err}
				}
				var extra schema.Findings
				c.plan, extra = planner.WithObserved(c.cfg, c.plan, obs)
				c.findings = append(c.findings, extra...)
			}
			in.Config, in.Plan, in.Findings = c.cfg, c.plan, c.findings
			if b.cfg != nil && c.cfg != nil {
				in.BaseName, in.Base = base, b.plan
				in.Diff = planner.Compare(b.plan, c.plan)
				in.Diff.Approvals = policies.Approvals(b.cfg, c.cfg, in.Diff)
			}
			if !c.findings.HasErrors() {
				if in.WhatIf, err = simulate.run(b.cfg, c.cfg); err != nil {
					return err
				}
				if write, err = tf.run(cmd, c, write, output); err != nil {
					return err
				}
			}
			if err := write(cmd.OutOrStdout(), in); err != nil {
				return fmt.Errorf("writing the plan: %w", err)
			}
			if output != "json" && os.Getenv("GITHUB_ACTIONS") == "true" {
				printFindingsAnnotationsOnly(cmd.ErrOrStderr(), dir, c.findings)
			}
			if c.findings.HasErrors() {
				return exitError{exitFindings}
			}
			return tf.err
		},
	}
	c.Flags().StringVar(&base, "base", "", "base of the change: a directory or a Git ref")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text, markdown or json")
	c.Flags().StringVar(&observed, "observed", "", "the Pools' observed health: a PoolList (kubectl get pools.allot.dev -o yaml|json)")
	simulate.register(c)
	tf.register(c)
	return c
}

func planWriter(format string) (func(io.Writer, report.Input) error, error) {
	switch format {
	case "text":
		return report.Text, nil
	case "markdown", "md":
		return report.Markdown, nil
	case "json":
		return report.JSON, nil
	}
	return nil, usageError{fmt.Errorf("-o %q: want text, markdown or json", format)}
}

func printFindingsAnnotationsOnly(w io.Writer, dir string, findings schema.Findings) {
	for _, f := range findings {
		fmt.Fprintln(w, githubAnnotation(dir, f))
	}
}

// readObserved reads the pools' observed health from a PoolList (JSON or YAML).
func readObserved(file string) (map[schema.PoolName]planner.Observed, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--observed: %w", err)
	}
	var list allotv1.PoolList
	if err := yaml.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("--observed %s: not a list of Pools: %w", file, err)
	}
	if list.Kind != "" && list.Kind != "List" && list.Kind != "PoolList" {
		return nil, fmt.Errorf("--observed %s: a %s, want a PoolList (kubectl get pools.allot.dev -o yaml)", file, list.Kind)
	}
	out := map[schema.PoolName]planner.Observed{}
	for _, p := range list.Items {
		out[schema.PoolName(p.Name)] = planner.Observed{Nodes: p.Status.Nodes, UsableNodes: p.Status.ReadyNodes, HealthyGPUs: p.Status.HealthyGPUs}
	}
	return out, nil
}
