package terraform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// hostile are strings a pull request could put where the renderers write data:
// each must reach Terraform literally, never as a template.
var hostile = []string{
	`${file("/etc/hostname")}`,
	`%{ if true }yes%{ endif }`,
	`$${already}`,
	`%%{ not-a-directive }`,
	`a"b\c` + "\n\t",
	`$$${x}`,
}

// hostileConfig is a cluster of provider prov whose pool i has flavor,
// machine type and topology level hostile[i].
func hostileConfig(prov schema.Provider) (*schema.Config, *planner.Plan) {
	cfg := &schema.Config{
		Clusters: map[schema.ClusterName]*schema.Cluster{"c": {Name: "c", Provider: prov, Region: hostile[0]}},
		Pools:    map[schema.PoolName]*schema.Pool{},
	}
	plan := &planner.Plan{}
	for i, s := range hostile {
		name := schema.PoolName(fmt.Sprintf("p%d", i))
		cfg.Pools[name] = &schema.Pool{Name: name, Cluster: "c", Flavor: schema.Flavor(s), MachineType: s, GPUsPerNode: 8, MaxNodes: 1,
			Topology: &schema.Topology{Levels: []string{s}}}
		plan.Pools = append(plan.Pools, planner.PoolPlan{Pool: name, Cluster: "c", Flavor: schema.Flavor(s), NodesTarget: 1})
	}
	return cfg, plan
}

func renderHostile(t *testing.T, prov schema.Provider) map[string]any {
	t.Helper()
	cfg, plan := hostileConfig(prov)
	m, err := Module(cfg, plan, "c", Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// dig follows keys (strings) and indexes (ints) into a decoded JSON value.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
		if v == nil {
			t.Fatalf("nothing at %v", path)
		}
	}
	return v
}

// applyOutputs applies module (built-in provider only) in a new folder and
// returns its outputs as Terraform evaluated them.
func applyOutputs(t *testing.T, bin string, module map[string]any) map[string]any {
	t.Helper()
	d := t.TempDir()
	apply(t, bin, d, module)
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(tf(t, bin, d, "output", "-json")), &outs); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for k, o := range outs {
		got[k] = o.Value
	}
	return got
}

// TestTemplateInjection renders hostile strings with every provider and has the
// real terraform evaluate what the renderer wrote: each string arrives as it
// was, nothing is interpolated. The gke and eks resources need providers that
// cannot be downloaded here: their arguments that carry the strings are copied
// into outputs of an offline module, beside the module's own variables, which
// Terraform evaluates exactly as it would the resource's arguments.
func TestTemplateInjection(t *testing.T) {
	bin := terraformBin(t)
	want := map[string]any{}
	// labels are those of pool i; a node's add its host (the one level).
	labels := func(i int, node bool) map[string]any {
		l := map[string]any{contract.LabelPool: fmt.Sprintf("p%d", i), contract.LabelFlavor: hostile[i], contract.LabelCluster: "c"}
		if node {
			l[contract.TopologyLabel(hostile[i])] = fmt.Sprintf("p%d-0", i)
		}
		return l
	}
	for i, s := range hostile {
		want[fmt.Sprintf("gke_machine_type_%d", i)] = s
		want[fmt.Sprintf("gke_labels_%d", i)] = labels(i, false)
		want[fmt.Sprintf("gke_accelerator_%d", i)] = "nvidia-" + s
		want[fmt.Sprintf("gke_one_zone_%d", i)] = false
		want[fmt.Sprintf("eks_instance_types_%d", i)] = []any{s}
		want[fmt.Sprintf("eks_tags_%d", i)] = labels(i, false)
	}
	offline := map[string]any{}
	outputs := map[string]any{}
	for _, prov := range []schema.Provider{schema.ProviderGKE, schema.ProviderEKS} {
		m := renderHostile(t, prov)
		vars := m["variable"].(map[string]any)
		for k, v := range vars {
			v := v.(map[string]any)
			if v["default"] == nil {
				v["default"] = "" // project, node_role_arn, subnet_ids: set by the operator
				if k == "subnet_ids" {
					v["default"] = []any{}
				}
			}
			offline[k] = v
		}
		for i := range hostile {
			if prov == schema.ProviderGKE {
				r := dig(t, m, "resource", "google_container_node_pool", fmt.Sprintf("p%d", i))
				nc := dig(t, r, "node_config", 0)
				outputs[fmt.Sprintf("gke_machine_type_%d", i)] = map[string]any{"value": dig(t, nc, "machine_type")}
				outputs[fmt.Sprintf("gke_labels_%d", i)] = map[string]any{"value": dig(t, nc, "labels")}
				outputs[fmt.Sprintf("gke_accelerator_%d", i)] = map[string]any{"value": dig(t, nc, "guest_accelerator", 0, "type")}
				outputs[fmt.Sprintf("gke_one_zone_%d", i)] = map[string]any{"value": dig(t, r, "lifecycle", 0, "precondition", 0, "condition")}
			} else {
				r := dig(t, m, "resource", "aws_eks_node_group", fmt.Sprintf("p%d", i))
				outputs[fmt.Sprintf("eks_instance_types_%d", i)] = map[string]any{"value": dig(t, r, "instance_types")}
				outputs[fmt.Sprintf("eks_tags_%d", i)] = map[string]any{"value": dig(t, r, "tags")}
			}
		}
	}
	got := applyOutputs(t, bin, map[string]any{"variable": offline, "output": outputs})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gke and eks arguments as Terraform reads them (-want +got):\n%s", diff)
	}

	// A kwok module runs as it is: the state holds what its resources received,
	// and the hooks' environment what they were given.
	for _, prov := range []schema.Provider{schema.ProviderKwok} {
		m := renderHostile(t, prov)
		d := t.TempDir()
		log := filepath.Join(d, "env.log")
		hook := filepath.Join(d, "hook.sh")
		script := "#!/bin/sh\nprintf '%s\\n%s\\n' \"$ALLOT_FLAVOR\" \"$ALLOT_NODE_LABELS\" >> " + log + "\n"
		if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		m["variable"].(map[string]any)["command"].(map[string]any)["default"] = hook
		apply(t, bin, d, m)
		var state struct {
			Values struct {
				RootModule struct {
					Resources []struct {
						Address string `json:"address"`
						Values  struct {
							Input map[string]any `json:"input"`
						} `json:"values"`
					} `json:"resources"`
				} `json:"root_module"`
			} `json:"values"`
		}
		if err := json.Unmarshal([]byte(tf(t, bin, d, "show", "-json")), &state); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, r := range state.Values.RootModule.Resources {
			for i, s := range hostile {
				switch r.Address {
				case fmt.Sprintf("terraform_data.p%d", i):
					seen++
					if got := r.Values.Input["flavor"]; got != s {
						t.Errorf("%s: input.flavor = %q, want %q", r.Address, got, s)
					}
				case NodeAddress(schema.PoolName(fmt.Sprintf("p%d", i)), fmt.Sprintf("p%d-0", i)):
					seen++
					if diff := cmp.Diff(labels(i, true), r.Values.Input["labels"]); diff != "" {
						t.Errorf("%s: input.labels (-want +got):\n%s", r.Address, diff)
					}
				}
			}
		}
		if seen != 2*len(hostile) {
			t.Errorf("found %d of the %d resources in the state", seen, 2*len(hostile))
		}
		env, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range hostile {
			lb, _ := json.Marshal(labels(i, true))
			if want := s + "\n" + string(lb) + "\n"; !containsLine(string(env), want) {
				t.Errorf("the hook of pool p%d did not get ALLOT_FLAVOR %q and its labels literally; the hooks got:\n%s", i, s, env)
			}
		}
	}
}

func containsLine(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub && (i == 0 || s[i-1] == '\n') {
			return true
		}
	}
	return false
}

// apply writes module and an empty CLI configuration (so that terraform's
// JSON output is not preceded by a warning) into d, and applies it.
func apply(t *testing.T, bin, d string, module map[string]any) {
	t.Helper()
	b, err := Marshal(module)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, ModuleFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "none.tfrc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, bin, d, "init", "-input=false")
	tf(t, bin, d, "apply", "-input=false", "-auto-approve")
}
