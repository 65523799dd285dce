package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/tfrun/kwok"
)

func init() { commands = append(commands, newHookCommand) }

func newHookCommand() *cobra.Command {
	c := &cobra.Command{
		Use:    "hook",
		Short:  "Node hooks of onprem and kwok Terraform modules",
		Hidden: true,
	}
	c.AddCommand(&cobra.Command{
		Use:   "kwok",
		Short: "Create or delete the simulated Node of one terraform_data resource",
		Long: `Create or delete a Ready Node object with its GPUs and labels, as the local-exec
hook of a kwok pool's terraform_data resource: ALLOT_ACTION (create or delete),
ALLOT_NODE, ALLOT_NODE_LABELS (JSON) and ALLOT_GPUS come from the module, the
cluster from KUBECONFIG or the in-cluster service account. Idempotent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return kwok.Main(cmd.Context(), os.Getenv)
		},
	})
	return c
}
