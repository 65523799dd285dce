package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/planner/render/kube"
	"github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
)

func init() { commands = append(commands, newRenderCommand) }

func newRenderCommand() *cobra.Command {
	var out, owners string
	var backend backendFlags
	var target targetFlag
	c := &cobra.Command{
		Use:   "render DIR -o OUT",
		Short: "Write the Kubernetes manifests and one Terraform root module per cluster",
		Long: `Render a capacity repository into the files that make it real:

  OUT/kubernetes/NN-<kind>.yaml     Namespaces, PriorityClasses and the allot.dev
                                    Cohorts, Tiers, Pools and Teams, numbered in
                                    apply order
  OUT/terraform/<cluster>/main.tf.json
                                    one root module per cluster: gke node pools,
                                    eks node groups, onprem/kwok terraform_data hooks

The repository is validated first; nothing is written when it has errors. Each
file is replaced atomically and only when its content changes; Terraform state
and other files under OUT are left alone. The same input gives the same bytes.

With --codeowners FILE, also (or, without -o, only) a GitHub CODEOWNERS file:
each team's file owned by its owners, the pools' and policy's files (they can
move cost) by the policy's platform and finance approvers, everything else by
the platform approvers; the CI templates check that the committed one is current.

Exit status: 0 rendered, 1 the configuration has errors, 2 bad usage or a write failure.`,
		Example: `  allot render examples -o out
  allot render examples -o out --target kueue
  allot render . -o rendered --backend gcs --backend-config bucket=acme-tf --backend-config prefix=allot/{cluster}
  allot render . --codeowners .github/CODEOWNERS
  allot render . -o rendered && terraform -chdir=rendered/terraform/dgx-onprem plan`,
		Args: exactArgs(1, "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out == "" && owners == "" {
				return usageHint(cmd, errors.New("render needs -o OUT, the directory to write to"))
			}
			tg, err := target.target()
			if err != nil {
				return err
			}
			c, err := checkDir(dir, nil)
			if err != nil {
				return err
			}
			target.addFindings(&c, tg)
			if owners != "" && c.cfg != nil {
				c.addFindings(policies.CheckCodeowners(c.cfg)...)
			}
			stderr := cmd.ErrOrStderr()
			printFindings(stderr, c.findings)
			if c.cfg == nil || c.findings.HasErrors() {
				fmt.Fprintf(stderr, "%s: %d error(s), %d warning(s): nothing rendered\n",
					dir, c.findings.Count(schema.SeverityError), c.findings.Count(schema.SeverityWarning))
				return exitError{exitFindings}
			}
			if owners != "" {
				b, err := codeowners(c.cfg, codeownersPrefix(dir))
				if err != nil {
					return err
				}
				if err := writeOut(cmd, owners, b); err != nil {
					return err
				}
				if out == "" {
					return nil
				}
			}
			if tg == targetSlurm {
				return renderSlurm(cmd, out, c)
			}
			tf, err := backend.options()
			if err != nil {
				return err
			}
			files, err := render.Render(c.cfg, c.plan, render.Options{Terraform: tf, Target: tg})
			if err != nil {
				var pe *terraform.PoolError
				if errors.As(err, &pe) {
					printFindings(stderr, schema.Findings{{
						Severity: schema.SeverityError, Rule: "render",
						Pos: wdPos(dir, c.cfg.Pos("pools", string(pe.Pool))), Message: pe.Error(),
					}})
				} else {
					fmt.Fprintf(stderr, "allot: rendering %s: %v\n", dir, err)
				}
				return exitError{exitFindings}
			}
			changed, err := writeRendered(out, files)
			if err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), renderSummary(out, files, changed))
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "directory to write to (required)")
	c.Flags().StringVar(&owners, "codeowners", "", "also write a GitHub CODEOWNERS file (- for stdout) from the teams' owners and the policy's approvers")
	backend.register(c)
	target.register(c)
	return c
}

// writeOut writes data to file atomically, or to stdout for "-".
func writeOut(cmd *cobra.Command, file string, data []byte) error {
	if file == "-" {
		_, err := cmd.OutOrStdout().Write(data)
		return err
	}
	if err := writeAtomic(file, data); err != nil {
		return usageError{fmt.Errorf("writing %s: %w", file, err)}
	}
	return nil
}

// writeRendered writes files under out, each through a temporary file and a
// rename in its own directory, so a reader never sees half a file; a file whose
// content is unchanged is not touched. Kubernetes and Kueue manifests allot no
// longer renders (a kind without objects, the other target's) are removed;
// nothing else under out is.
// It returns the number of files written or removed.
func writeRendered(out string, files []render.File) (int, error) {
	changed := 0
	want := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(out, filepath.FromSlash(f.Path))
		want[p] = true
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := writeAtomic(p, f.Data); err != nil {
			return changed, err
		}
		changed++
	}
	var stale []string
	for _, name := range kube.FileNames() {
		stale = append(stale, filepath.Join(out, render.KubernetesDir, name))
	}
	clusters, _ := filepath.Glob(filepath.Join(out, render.KueueDir, "*"))
	for _, dir := range clusters {
		for _, name := range kueue.FileNames() {
			stale = append(stale, filepath.Join(dir, name))
		}
	}
	for _, p := range stale {
		if want[p] {
			continue
		}
		switch err := os.Remove(p); {
		case err == nil:
			changed++
		case !errors.Is(err, os.ErrNotExist):
			return changed, err
		}
	}
	return changed, nil
}

func writeAtomic(path string, data []byte) error { return writeAtomicMode(path, data, 0o644) }

// writeAtomicMode writes data to path through a temporary file of mode perm
// and a rename, so a reader never sees half a file.
func writeAtomicMode(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), perm); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// renderSummary is the one line render prints, e.g.
// "out: 6 Kubernetes manifests, 2 Terraform modules (eks-use1, gke-usc1); 8 files changed".
func renderSummary(out string, files []render.File, changed int) string {
	var manifests, queues int
	var clusters []string
	for _, f := range files {
		switch dir, rest, _ := strings.Cut(f.Path, "/"); dir {
		case render.KubernetesDir:
			manifests++
		case render.KueueDir:
			queues++
		case render.TerraformDir:
			cluster, _, _ := strings.Cut(rest, "/")
			clusters = append(clusters, cluster)
		}
	}
	slices.Sort(clusters)
	kind := fmt.Sprintf("%d Kubernetes manifests", manifests)
	if queues > 0 {
		kind = fmt.Sprintf("%d Kueue manifests", queues)
	}
	return fmt.Sprintf("%s: %s, %d Terraform modules (%s); %d files changed",
		out, kind, len(clusters), strings.Join(clusters, ", "), changed)
}
