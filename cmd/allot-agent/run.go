package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
)

// version is set with -ldflags "-X main.version=…" (make build-agent does);
// otherwise the module's version from the build information.
var version = ""

// Exit codes, as allot's.
const (
	exitOK       = 0
	exitFindings = 1 // with --dry-run --once: a check failed
	exitUsage    = 2 // bad flags, no driver, the node cannot be read
)

// exitError carries an exit code without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError marks an error in how the agent was called (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func main() {
	os.Exit(runContext(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// runContext runs the agent with args until ctx ends and returns its exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newAgentCommand()
	if root.Version == "" {
		root.Version = moduleVersion()
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())}
	})
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
		fmt.Fprintln(stderr, "allot-agent:", err)
		return exitUsage
	}
}

// moduleVersion is this module's version when built by go install, else devel.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// restConfig reads the kubeconfig named, else controller-runtime's default
// ($KUBECONFIG, in-cluster, ~/.kube/config).
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return ctrl.GetConfig()
}
