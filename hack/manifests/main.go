// Command manifests builds an install kustomization of config/ (config/default
// unless named) with the kustomize Go API, optionally with allot's image set to
// a reference, and writes the YAML: make release writes bin/release/install.yaml
// with it, so that kubectl apply -f of that one file installs the version built.
//
//	go run ./hack/manifests [-image REGISTRY/allot:TAG] [-o FILE] [DIR]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// defaultImage is the image the manifests in config/ name.
const defaultImage = "ghcr.io/allot-dev/allot"

func main() {
	image := flag.String("image", "", "set allot's image to this reference (REGISTRY/NAME:TAG or NAME@sha256:…)")
	out := flag.String("o", "-", "write the YAML to this file (- for stdout)")
	flag.Parse()
	dir := "config/default"
	if flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "manifests: at most one directory")
		os.Exit(2)
	} else if flag.NArg() == 1 {
		dir = flag.Arg(0)
	}
	y, err := Build(dir, *image)
	if err == nil {
		err = write(*out, y)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func write(out string, y []byte) error {
	if out == "-" {
		_, err := os.Stdout.Write(y)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, y, 0o644)
}

// Build runs kustomize build on dir; with image set it builds an overlay of dir
// (in a temporary folder) that sets allot's image to it.
func Build(dir, image string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if image != "" {
		tmp, err := os.MkdirTemp("", "allot-manifests-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		rel, err := filepath.Rel(tmp, abs) // kustomize wants relative resources
		if err != nil {
			return nil, err
		}
		k, err := overlay(rel, image)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), k, 0o644); err != nil {
			return nil, err
		}
		abs = tmp
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// overlay is a kustomization of dir that sets allot's image to ref.
func overlay(dir, ref string) ([]byte, error) {
	img := types.Image{Name: defaultImage}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		img.Digest = digest
	} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name, img.NewTag = ref[:i], ref[i+1:]
	}
	if name == "" || strings.ContainsAny(ref, " \t\n") || (!hasDigest && img.NewTag == "") {
		return nil, errors.New("-image " + ref + ": want REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST")
	}
	img.NewName = name
	return yaml.Marshal(types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{dir},
		Images:    []types.Image{img},
	})
}
