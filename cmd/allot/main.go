// Command allot is the one binary of allot: validate, plan, render and sim for CI
// and laptops; the manager in the cluster. The GPU health agent is its own
// binary (cmd/allot-agent): it alone needs cgo.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// commands are the verbs; each file of this package registers its own in init.
var commands []func() *cobra.Command

// exitError carries an exit code without printing anything more: the command has
// already said what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // the input has errors (findings), or a check failed
	exitUsage    = 2 // bad flags or arguments, unreadable input, internal failure
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "allot",
		Short: "GitOps capacity and quota manager for GPU fleets",
		Long: `allot manages GPU capacity and quotas declared as CUE in a Git repository.

validate, plan, render and sim need no cluster and no network: CI and laptops run them.
manager runs in the cluster (the GPU health agent is allot-agent).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readVersion().Version, // --version prints versionTemplate
	}
	root.SetVersionTemplate(versionTemplate())
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageHint(c, err)
	})
	for _, c := range commands {
		root.AddCommand(c())
	}
	return root
}

// usageError marks an error in how allot was called (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageHint is a usage error that names cmd's --help on a line of its own.
func usageHint(cmd *cobra.Command, err error) error {
	return usageError{fmt.Errorf("%w\nRun '%s --help' for usage", err, cmd.CommandPath())}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes allot with args and returns its exit code; commands write to
// cmd.OutOrStdout() and cmd.ErrOrStderr(), so tests can capture both.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run until ctx ends (the manager stops with it).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stdout, flushOut := workflowSafe(stdout)
	defer flushOut()
	stderr, flushErr := workflowSafe(stderr)
	defer flushErr()
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "allot:", err)
		return exitUsage
	}
}
