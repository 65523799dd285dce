package render

import (
	"cmp"
	"fmt"
	"path"
	"slices"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/kube"
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
}

// Directories of the output, relative to the output directory.
const (
	KubernetesDir = "kubernetes"
	TerraformDir  = "terraform"
)

// Render returns the Kubernetes manifests and the Terraform root modules of cfg
// sized by plan, sorted by path.
func Render(cfg *schema.Config, plan *planner.Plan, opts Options) ([]File, error) {
	var out []File
	objs, err := kube.Build(cfg, plan)
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
