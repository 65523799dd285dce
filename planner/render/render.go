package render

import (
	"cmp"
	"fmt"
	"path"
	"slices"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/kube"
	"github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/schema"
)

// File is one rendered file; Path is slash-separated and relative to the output
// directory.
type File struct {
	Path string
	Data []byte
}

// Options tune the rendering.
type Options struct {
	Terraform terraform.Options
	// Target is the scheduler the quotas are written for: TargetAllot (the
	// default) or TargetKueue.
	Target Target
}

// Target names the scheduler that enforces the quotas in the clusters.
type Target string

// The targets: allot's embedded scheduler (the allot.dev objects under
// kubernetes/), or Kueue (kueue.x-k8s.io objects per cluster under kueue/).
const (
	TargetAllot Target = "allot"
	TargetKueue Target = "kueue"
)

// Targets lists the targets, the default first.
func Targets() []Target { return []Target{TargetAllot, TargetKueue} }

// Directories of the output, relative to the output directory.
const (
	KubernetesDir = "kubernetes"
	TerraformDir  = "terraform"
	// KueueDir holds one directory of manifests per cluster.
	KueueDir = "kueue"
)

// Render returns the Kubernetes manifests (for opts.Target) and the Terraform
// root modules of cfg sized by plan, sorted by path. The clusters Slurm runs
// are not Kubernetes': nothing of them is rendered here (their pools, their
// share of the teams' quotas, a module), as planner/slurm renders them.
func Render(cfg *schema.Config, plan *planner.Plan, opts Options) ([]File, error) {
	var out []File
	switch opts.Target {
	case "", TargetAllot:
		objs, err := kube.Build(planner.Kubernetes(cfg, plan), plan)
		if err != nil {
			return nil, fmt.Errorf("rendering kubernetes objects: %w", err)
		}
		manifests, err := kube.Manifests(objs)
		if err != nil {
			return nil, fmt.Errorf("rendering kubernetes manifests: %w", err)
		}
		for name, data := range manifests {
			out = append(out, File{Path: path.Join(KubernetesDir, name), Data: data})
		}
	case TargetKueue:
		clusters, err := kueue.Build(cfg, plan)
		if err != nil {
			return nil, fmt.Errorf("rendering kueue objects: %w", err)
		}
		for _, objs := range clusters {
			manifests, err := kueue.Manifests(objs)
			if err != nil {
				return nil, fmt.Errorf("rendering kueue manifests of cluster %s: %w", objs.Cluster, err)
			}
			for name, data := range manifests {
				out = append(out, File{Path: path.Join(KueueDir, string(objs.Cluster), name), Data: data})
			}
		}
	default:
		return nil, fmt.Errorf("unknown target %q (want one of %v)", opts.Target, Targets())
	}
	modules, err := terraform.Modules(cfg, plan, opts.Terraform)
	if err != nil {
		return nil, fmt.Errorf("rendering terraform: %w", err)
	}
	for cluster, data := range modules {
		out = append(out, File{Path: path.Join(TerraformDir, string(cluster), terraform.ModuleFile), Data: data})
	}
	slices.SortFunc(out, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return out, nil
}
