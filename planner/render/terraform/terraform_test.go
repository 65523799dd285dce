package terraform

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/internal/testfiles"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// configs are the capacity repositories the goldens are rendered from.
var configs = map[string]string{
	"contract": "../testdata/contract",
	"fleet":    "../testdata/fleet",
}

func load(t *testing.T, dir string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading %s: %v", dir, findings)
	}
	return cfg, planner.Build(cfg)
}

func render(t *testing.T, dir string, opts Options) map[schema.ClusterName][]byte {
	t.Helper()
	cfg, plan := load(t, dir)
	mods, err := Modules(cfg, plan, opts)
	if err != nil {
		t.Fatalf("rendering %s: %v", dir, err)
	}
	return mods
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testfiles.Golden(t, filepath.Join("testdata", name), got, *update)
}

func TestGolden(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			mods := render(t, dir, Options{})
			var clusters []string
			for c, b := range mods {
				clusters = append(clusters, string(c))
				golden(t, filepath.Join(name, string(c)+".tf.json"), b)
			}
			// No golden file is left without a cluster.
			files, _ := filepath.Glob(filepath.Join("testdata", name, "*.tf.json"))
			if len(files) != len(mods) && !*update {
				t.Errorf("testdata/%s holds %d modules, the config renders %d (%v)", name, len(files), len(mods), clusters)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			first := render(t, dir, Options{})
			for range 5 {
				again := render(t, dir, Options{})
				if diff := cmp.Diff(first, again); diff != "" {
					t.Fatalf("a second render differs:\n%s", diff)
				}
			}
		})
	}
}

// decoded renders the fleet's cluster and decodes it back into JSON values.
func decoded(t *testing.T, cluster schema.ClusterName, opts Options) map[string]any {
	t.Helper()
	b := render(t, configs["fleet"], opts)[cluster]
	if b == nil {
		t.Fatalf("no module for cluster %s", cluster)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) {
		t.Errorf("module of %s does not end in a newline", cluster)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("module of %s is not JSON: %v", cluster, err)
	}
	return m
}

// at walks JSON values along keys (strings for objects, ints for arrays).
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, k := range path {
		switch k := k.(type) {
		case string:
			o, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, v)
			}
			v = o[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %T has no element %d", path, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func TestFields(t *testing.T) {
	gkePool := []any{"resource", "google_container_node_pool", "h100-gke"}
	eksPool := []any{"resource", "aws_eks_node_group", "p5-eks"}
	dgx := []any{"resource", "terraform_data"}
	tests := map[string]struct {
		cluster schema.ClusterName
		path    []any
		want    any
	}{
		"gke node count is the plan's target":  {"gke-use1", append(gkePool, "node_count"), 7.0},
		"gke machine type":                     {"gke-use1", append(gkePool, "node_config", 0, "machine_type"), "a3-highgpu-8g"},
		"gke accelerators per node":            {"gke-use1", append(gkePool, "node_config", 0, "guest_accelerator", 0, "count"), 8.0},
		"gke accelerator type by flavor":       {"gke-use1", append(gkePool, "node_config", 0, "guest_accelerator", 0, "type"), `${var.accelerator_types["h100-80gb"]}`},
		"gke topology gives compact placement": {"gke-use1", append(gkePool, "placement_policy", 0, "type"), "COMPACT"},
		"gke committed nodes use reservations": {"gke-use1", append(gkePool, "node_config", 0, "reservation_affinity", 0, "consume_reservation_type"), "ANY_RESERVATION"},
		"gke pool label":                       {"gke-use1", append(gkePool, "node_config", 0, "labels", "allot.dev/pool"), "h100-gke"},
		"gke flavor label":                     {"gke-use1", append(gkePool, "node_config", 0, "labels", "allot.dev/flavor"), "h100-80gb"},
		"gke cluster label":                    {"gke-use1", append(gkePool, "node_config", 0, "labels", "allot.dev/cluster"), "gke-use1"},
		"gke unbounded level is a pool label":  {"gke-use1", append(gkePool, "node_config", 0, "labels", "topology.allot.dev/zone"), "h100-gke-zone-0"},
		"gke bounded level is no pool label":   {"gke-use1", append(gkePool, "node_config", 0, "labels", "topology.allot.dev/rack"), nil},
		"gke location from region":             {"gke-use1", []any{"variable", "location", "default"}, "us-east1"},
		"gke without region has no default":    {"gke-idle", []any{"variable", "location", "default"}, nil},
		"gke without pools has no resources":   {"gke-idle", []any{"resource"}, nil},
		"gke provider pinned":                  {"gke-use1", []any{"terraform", "required_providers", "google", "source"}, "hashicorp/google"},
		"local backend by default":             {"gke-use1", []any{"terraform", "backend", "local"}, map[string]any{}},
		"eks desired size":                     {"eks-use1", append(eksPool, "scaling_config", 0, "desired_size"), 16.0},
		"eks min size":                         {"eks-use1", append(eksPool, "scaling_config", 0, "min_size"), 0.0},
		"eks max size":                         {"eks-use1", append(eksPool, "scaling_config", 0, "max_size"), 16.0},
		"eks instance type":                    {"eks-use1", append(eksPool, "instance_types"), []any{"p5.48xlarge"}},
		"eks on demand":                        {"eks-use1", append(eksPool, "capacity_type"), "ON_DEMAND"},
		"eks gpu taint": {"eks-use1", append(eksPool, "taint", 0), map[string]any{
			"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE",
		}},
		"eks labels":                 {"eks-use1", append(eksPool, "labels", "allot.dev/pool"), "p5-eks"},
		"eks region":                 {"eks-use1", []any{"provider", "aws", "region"}, "${var.region}"},
		"onprem pool input nodes":    {"dgx-pod", append(dgx, "dgx-a100", "input", "nodes"), 12.0},
		"onprem one node per target": {"dgx-pod", []any{"output", "nodes_target", "value", "dgx-a100"}, 12.0},
		"onprem node topology": {"dgx-pod", []any{"locals", "nodes", "dgx-a100", "dgx-a100-11"}, map[string]any{
			"allot.dev/cluster":         "dgx-pod",
			"allot.dev/flavor":          "a100-80gb",
			"allot.dev/pool":            "dgx-a100",
			"topology.allot.dev/block":  "dgx-a100-block-1",
			"topology.allot.dev/rack":   "dgx-a100-rack-2",
			"topology.allot.dev/nvlink": "dgx-a100-nvlink-5",
			"topology.allot.dev/host":   "dgx-a100-11",
		}},
		"onprem no node beyond the target":     {"dgx-pod", []any{"locals", "nodes", "dgx-a100", "dgx-a100-12"}, nil},
		"onprem hook command":                  {"dgx-pod", append(dgx, "dgx-a100_nodes", "provisioner", 0, "local-exec", "command"), "${var.command}"},
		"onprem hook pool env":                 {"dgx-pod", append(dgx, "dgx-a100_nodes", "provisioner", 0, "local-exec", "environment", "ALLOT_POOL"), "dgx-a100"},
		"onprem hook node count env":           {"dgx-pod", append(dgx, "dgx-a100_nodes", "provisioner", 0, "local-exec", "environment", "ALLOT_POOL_NODES"), "12"},
		"onprem destroy hook":                  {"dgx-pod", append(dgx, "dgx-a100_nodes", "provisioner", 1, "local-exec", "when"), "destroy"},
		"onprem default command":               {"dgx-pod", []any{"variable", "command", "default"}, DefaultCommand},
		"onprem has no provider":               {"dgx-pod", []any{"provider"}, nil},
		"kwok pool name starting with a digit": {"kwok-lab", append(dgx, "pool-8x-l4", "input", "pool"), "8x-l4"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := at(t, decoded(t, tc.cluster, Options{}), tc.path...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestBackend(t *testing.T) {
	opts := Options{Backend: Backend{Type: "gcs", Config: map[string]string{"bucket": "tf-state", "prefix": "allot/{cluster}"}}}
	got := at(t, decoded(t, "dgx-pod", opts), "terraform", "backend")
	want := map[string]any{"gcs": map[string]any{"bucket": "tf-state", "prefix": "allot/dgx-pod"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backend (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := map[string]struct {
		edit func(*schema.Config)
		want string
	}{
		"gke pool without machine type": {
			edit: func(c *schema.Config) { c.Pools["h100-gke"].MachineType = "" },
			want: "cluster gke-use1: pool h100-gke: a gke pool needs a machineType",
		},
		"eks pool without machine type": {
			edit: func(c *schema.Config) { c.Pools["p5-eks"].MachineType = "" },
			want: "cluster eks-use1: pool p5-eks: an eks pool needs a machineType (instance type)",
		},
		"unknown provider": {
			edit: func(c *schema.Config) { c.Clusters["kwok-lab"].Provider = "azure" },
			want: `cluster kwok-lab: unknown provider "azure"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, plan := load(t, configs["fleet"])
			tc.edit(cfg)
			_, err := Modules(cfg, plan, Options{})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestResourceName(t *testing.T) {
	tests := map[schema.PoolName]string{
		"h100-a": "h100-a",
		"8x-l4":  "pool-8x-l4",
		"a_b":    "a_b",
	}
	for in, want := range tests {
		if got := ResourceName(in); got != want {
			t.Errorf("ResourceName(%q) = %q, want %q", in, got, want)
		}
	}
}
