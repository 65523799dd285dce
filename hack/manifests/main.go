// Command manifests builds an install kustomization of config/ (config/default
// unless named) with the kustomize Go API, optionally with allot's images set to
// a reference, and writes the YAML: make release writes bin/release/install.yaml
// with it, so that kubectl apply -f of that one file installs the version built.
// The agent's image is the same reference with -agent after its name
// (REGISTRY/allot-agent:TAG) unless -agent-image names it.
//
//	go run ./hack/manifests [-image REGISTRY/allot:TAG] [-agent-image REF] [-o FILE] [DIR]
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

// defaultImage and defaultAgentImage are the images the manifests in config/ name.
const (
	defaultImage      = "ghcr.io/allot-dev/allot"
	defaultAgentImage = "ghcr.io/allot-dev/allot-agent"
)

func main() {
	image := flag.String("image", "", "set allot's image to this reference (REGISTRY/NAME:TAG or NAME@sha256:…)")
	agentImage := flag.String("agent-image", "", "set the agent's image to this reference (default: -image's with -agent after the name)")
	out := flag.String("o", "-", "write the YAML to this file (- for stdout)")
	flag.Parse()
	dir := "config/default"
	if flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "manifests: at most one directory")
		os.Exit(2)
	} else if flag.NArg() == 1 {
		dir = flag.Arg(0)
	}
	y, err := Build(dir, *image, *agentImage)
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
// (in a temporary folder) that sets allot's image to it, and the agent's to
// agentImage (default: image's with -agent after the name).
func Build(dir, image, agentImage string) ([]byte, error) {
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
		k, err := overlay(rel, image, agentImage)
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

// overlay is a kustomization of dir that sets allot's image to ref and the
// agent's to agentRef (derived from ref when empty).
func overlay(dir, ref, agentRef string) ([]byte, error) {
	img, err := imageOf(defaultImage, "-image", ref)
	if err != nil {
		return nil, err
	}
	if agentRef == "" {
		if img.Digest != "" {
			return nil, errors.New("-image " + ref + " names a digest: name the agent's image with -agent-image")
		}
		agentRef = img.NewName + "-agent:" + img.NewTag
	}
	agent, err := imageOf(defaultAgentImage, "-agent-image", agentRef)
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{dir},
		Images:    []types.Image{img, agent},
	})
}

// imageOf is the kustomize image rewrite of name to ref, given by flag.
func imageOf(name, flag, ref string) (types.Image, error) {
	img := types.Image{Name: name}
	newName, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		img.Digest = digest
	} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		newName, img.NewTag = ref[:i], ref[i+1:]
	}
	if newName == "" || strings.ContainsAny(ref, " \t\n") || (!hasDigest && img.NewTag == "") {
		return types.Image{}, errors.New(flag + " " + ref + ": want REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST")
	}
	img.NewName = newName
	return img, nil
}
