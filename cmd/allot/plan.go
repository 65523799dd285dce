package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/schema"
)

func init() { commands = append(commands, newPlanCommand) }

func newPlanCommand() *cobra.Command {
	var base, output, observed string
	var simulate simulateFlags
	var tf terraformFlags
	var target targetFlag
	c := &cobra.Command{
		Use:   "plan DIR",
		Short: "Show the capacity, quota and cost plan, and its diff against a base",
		Long: `Show the capacity, quota and cost plan of a capacity repository: pool sizes,
monthly cost per pool, team and cost centre. With --base also the diff: quota
changes, node changes, the monthly cost delta and the approvals needed.

--base ref:REF is a Git ref of the checkout that holds DIR (the working
directory's .git, else the nearest .git above DIR; never a folder of DIR that
looks like a repository), read from Git's objects with no hook, attribute,
filter or program of the repository's choosing. --base dir:DIR is a directory.
A bare --base X is whichever of the two exists, and an error when both do.

With --terraform, each cluster's Terraform module is also planned (terraform init
and a plan that takes no state lock, in a copy of WORKDIR/<cluster>) and the plan
shows per pool the nodes before and after and the resources Terraform adds,
changes and destroys.

With --target kueue, the rules Kueue only approximates are findings too, and
the comment lists every approximation in force (Slurm's are always listed);
--strict makes those their tier, team or pool does not accept (approximate:
true) errors, as a manager running Kueue does.

With --observed, the pools' observed health (the Pools' status, as
'kubectl get pools.allot.dev -o yaml' prints it) is read: a pool whose healthy
GPUs are below what its quotas need gets a pool-unhealthy-capacity warning and,
within its nodes.max, replacement nodes (their cost included).

Output: text (terminal tables), markdown (the pull-request comment) or json.
Exit status: 0 no errors, 1 the configuration has errors, 2 bad usage (or a
cluster's terraform plan failed).`,
		Example: `  allot plan examples
  allot plan . --base ref:origin/main -o markdown > comment.md
  allot plan examples -o json --base ../main/examples
  allot plan . --base origin/main --terraform rendered --terraform-cluster dgx-onprem`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			write, err := planWriter(output)
			if err != nil {
				return err
			}
			tg, err := target.target()
			if err != nil {
				return err
			}
			pl, err := loadPlan(cmd.ErrOrStderr(), dir, base, observed, &simulate)
			if err != nil {
				return err
			}
			target.addFindings(&pl.head, tg)
			pl.in.Findings = pl.head.findings
			if err := pl.describe(dir, base, &simulate); err != nil {
				return err
			}
			in, c := pl.in, pl.head
			if !c.findings.HasErrors() {
				if in.Terraform, err = tf.run(cmd, c); err != nil {
					return err
				}
			}
			if err := write(cmd.OutOrStdout(), in); err != nil {
				return fmt.Errorf("writing the plan: %w", err)
			}
			if output != "json" && os.Getenv("GITHUB_ACTIONS") == "true" {
				printFindingsAnnotationsOnly(cmd.ErrOrStderr(), c.findings)
			}
			if c.findings.HasErrors() {
				return exitError{exitFindings}
			}
			return tf.err
		},
	}
	c.Flags().StringVar(&base, "base", "", "base of the change: ref:REF (a Git ref) or dir:DIR (a directory)")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text, markdown or json")
	c.Flags().StringVar(&observed, "observed", "", "the Pools' observed health: a PoolList (kubectl get pools.allot.dev -o yaml|json)")
	simulate.register(c)
	tf.register(c)
	target.register(c)
	return c
}

func planWriter(format string) (func(io.Writer, planreport.Input) error, error) {
	switch format {
	case "text":
		return planreport.Text, nil
	case "markdown", "md":
		return planreport.Markdown, nil
	case "json":
		return planreport.JSON, nil
	}
	return nil, usageError{fmt.Errorf("-o %q: want text, markdown or json", format)}
}

func printFindingsAnnotationsOnly(w io.Writer, findings schema.Findings) {
	for _, f := range findings {
		writeCommand(w, githubAnnotation(f))
	}
}
