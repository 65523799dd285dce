package main

import (
	"context"
	"fmt"
	"io"

	slurmctl "github.com/allot-dev/allot/controllers/slurm"
	"github.com/allot-dev/allot/internal/plaintext"
)

// explainSlurm says why Slurm's job id waits, on a host where squeue and
// scontrol reach the cluster (SLURM_CONF names its slurm.conf).
func explainSlurm(ctx context.Context, out io.Writer, id string) error {
	es, err := slurmctl.Runner{}.Explain(ctx, id)
	if err != nil {
		return usageError{fmt.Errorf("%s", safeMessage(err.Error()))}
	}
	for _, e := range es {
		j := e.Job
		line := fmt.Sprintf("slurm/%s: account %s, QOS %s, partition %s, %d %s on %d node(s): %s", j.ID, j.Account, j.QOS, j.Partition, e.GPUs, e.GPUKind(), j.Nodes, j.State)
		if j.State == "PENDING" {
			line += " (" + j.Reason + ")"
		}
		fmt.Fprintln(out, plaintext.Escape(line))
		if e.Code != "" {
			fmt.Fprintf(out, "  %s: %s\n", e.Code, plaintext.Escape(e.Message))
		} else {
			fmt.Fprintf(out, "  %s\n", plaintext.Escape(e.Message))
		}
		if e.Advice != "" {
			fmt.Fprintf(out, "  %s\n", e.Advice)
		}
	}
	return nil
}
