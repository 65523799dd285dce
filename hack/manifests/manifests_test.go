package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/allot-dev/allot/controllers/testenv"
)

// config is the repository's config/ folder.
var config = filepath.Join(testenv.Root(), "config")

// overlays are the folders of config/ with a kustomization.yaml.
func overlays(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(config, "*", "kustomization.yaml"))
	if err != nil || len(found) == 0 {
		t.Fatalf("no kustomization.yaml under %s: %v", config, err)
	}
	var dirs []string
	for _, f := range found {
		dirs = append(dirs, filepath.Dir(f))
	}
	return dirs
}

// TestEveryOverlayBuildsAndListsItsFolder builds every kustomization of config/
// and checks that each lists every manifest of its folder (a manifest added
// beside one and not listed would never be installed).
func TestEveryOverlayBuildsAndListsItsFolder(t *testing.T) {
	for _, dir := range overlays(t) {
		name, _ := filepath.Rel(config, dir)
		t.Run(name, func(t *testing.T) {
			y, err := Build(dir, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if len(objects(t, y)) == 0 {
				t.Error("builds to nothing")
			}
			raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var k types.Kustomization
			if err := yaml.UnmarshalStrict(raw, &k); err != nil {
				t.Fatalf("kustomization.yaml: %v", err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
			for _, f := range files {
				if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(k.Resources, b) {
					t.Errorf("%s is not in %s/kustomization.yaml", b, name)
				}
			}
		})
	}
}

// TestDefaultAppliesToTheAPIServer server-side applies config/default, built
// with allot's image set as make release sets it, to a real API server, which
// validates every object (CRDs, RBAC, Namespace, Deployment, DaemonSet, …).
func TestDefaultAppliesToTheAPIServer(t *testing.T) {
	const ref = "registry.example:5000/team/allot:v9.9.9"
	y, err := Build(filepath.Join(config, "default"), ref, "")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, y)
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kinds := map[string]bool{}
	for _, u := range objs {
		kinds[u.GetKind()] = true
		if err := apply(ctx, env.Client, u); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace", "ServiceAccount", "Deployment", "DaemonSet"} {
		if !kinds[k] {
			t.Errorf("config/default has no %s", k)
		}
	}
	// Applied twice: the same result, no conflict (what an upgrade does).
	for _, u := range objects(t, y) {
		if err := apply(ctx, env.Client, u); err != nil {
			t.Fatalf("apply again %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	var d appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "allot-system", Name: "allot-manager"}, &d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != ref {
		t.Errorf("manager image %q, want %q", img, ref)
	}
	var ds appsv1.DaemonSet
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "allot-system", Name: "allot-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	if img, want := ds.Spec.Template.Spec.Containers[0].Image, "registry.example:5000/team/allot-agent:v9.9.9"; img != want {
		t.Errorf("agent image %q, want %q", img, want)
	}
	if args := ds.Spec.Template.Spec.Containers[0].Args; len(args) == 0 || !strings.HasPrefix(args[0], "--") {
		t.Errorf("agent args %q: allot-agent takes flags only", args)
	}
}

func TestBadImageReference(t *testing.T) {
	for _, ref := range []string{"allot", "allot:", "a b:c", ":v1"} {
		if _, err := Build(filepath.Join(config, "default"), ref, ""); err == nil || !strings.Contains(err.Error(), "-image") {
			t.Errorf("-image %q: err = %v, want one naming -image", ref, err)
		}
	}
	// A digest names one image: the agent's cannot be derived from it.
	digest := "registry.example/allot@sha256:" + strings.Repeat("ab", 32)
	if _, err := Build(filepath.Join(config, "default"), digest, ""); err == nil || !strings.Contains(err.Error(), "-agent-image") {
		t.Errorf("-image %s alone: err = %v, want one naming -agent-image", digest, err)
	}
}

func apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("allot-install"), client.ForceOwnership)
}

func objects(t *testing.T, y []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
