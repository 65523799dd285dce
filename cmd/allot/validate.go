package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/schema"
)

func init() { commands = append(commands, newValidateCommand) }

func newValidateCommand() *cobra.Command {
	var base string
	var target targetFlag
	c := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a capacity repository against the schema and the policies",
		Long: `Check a capacity repository against the schema and the organisation's policies.

Every finding is printed as path:line:col: severity: rule: message, with the path
relative to the working directory as compilers print it (absolute when the file
is outside it), in JSON and annotations alike; under GitHub Actions
(GITHUB_ACTIONS=true) also as an annotation.
With --base (a directory, or a Git ref of the repository containing DIR), findings
about sums are also reported at the quotas the change raised.
With --target kueue, also the rules of the repository that Kueue cannot enforce
as allot's scheduler does (warnings: docs/kueue.md).

Exit status: 0 valid (warnings allowed), 1 errors found, 2 bad usage.`,
		Example: `  allot validate examples
  allot validate . --base origin/main
  allot validate examples --target kueue`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			tg, err := target.target()
			if err != nil {
				return err
			}
			var baseCfg *schema.Config
			if base != "" {
				b, err := loadBase(cmd.ErrOrStderr(), dir, base)
				if err != nil {
					return err
				}
				baseCfg = b.cfg
			}
			c, err := checkDir(dir, baseCfg)
			if err != nil {
				return err
			}
			target.addFindings(&c, tg)
			printFindings(cmd.OutOrStdout(), c.findings)
			errs, warns := c.findings.Count(schema.SeverityError), c.findings.Count(schema.SeverityWarning)
			if errs > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d error(s), %d warning(s)\n", dir, errs, warns)
				return exitError{exitFindings}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: valid (%d clusters, %d pools, %d tiers, %d teams; %d warning(s))\n",
				dir, len(c.cfg.Clusters), len(c.cfg.Pools), len(c.cfg.Tiers), len(c.cfg.Teams), warns)
			return nil
		},
	}
	c.Flags().StringVar(&base, "base", "", "base of the change: ref:REF (a Git ref) or dir:DIR (a directory)")
	target.register(c)
	return c
}

// exactArgs is cobra.ExactArgs with a message that names the missing argument.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageHint(cmd, fmt.Errorf("%s needs %s (got %d arguments)", cmd.Name(), names, len(args)))
		}
		return nil
	}
}
