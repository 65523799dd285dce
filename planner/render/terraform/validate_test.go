package terraform

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/schema"
)

// terraformBin finds the real terraform binary. The onprem and kwok modules use
// only Terraform's built-in provider, so everything below runs offline.
func terraformBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the terraform binary")
	}
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH (go test -short skips this test): %v", err)
	}
	return bin
}

func tf(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
		"TF_CLI_CONFIG_FILE="+filepath.Join(dir, "none.tfrc"), // no plugin cache, no mirrors
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestTerraformValidate runs terraform init and validate on every module that
// needs no download: the onprem and kwok clusters of both configurations.
func TestTerraformValidate(t *testing.T) {
	bin := terraformBin(t)
	n := 0
	for name, dir := range configs {
		cfg, _ := load(t, dir)
		for cluster, b := range render(t, dir, Options{}) {
			if p := cfg.Clusters[cluster].Provider; p != schema.ProviderOnPrem && p != schema.ProviderKwok {
				continue
			}
			n++
			t.Run(name+"/"+string(cluster), func(t *testing.T) {
				d := t.TempDir()
				if err := os.WriteFile(filepath.Join(d, ModuleFile), b, 0o644); err != nil {
					t.Fatal(err)
				}
				tf(t, bin, d, "init", "-input=false", "-no-color")
				if out := tf(t, bin, d, "validate", "-no-color"); !strings.Contains(out, "The configuration is valid") {
					t.Errorf("terraform validate:\n%s", out)
				}
			})
		}
	}
	if n < 3 {
		t.Fatalf("validated %d modules, want the contract's kwok and the fleet's onprem and kwok", n)
	}
}

// TestTerraformApplyHooks applies the kwok module for real with a hook that logs
// its environment, then shrinks the pool and destroys the module: each node is
// created once, a shrink deletes the highest-numbered nodes only, and destroy
// deletes the rest.
func TestTerraformApplyHooks(t *testing.T) {
	bin := terraformBin(t)
	cfg, plan := load(t, configs["contract"])
	d := t.TempDir()
	log := filepath.Join(d, "hook.log")
	hook := filepath.Join(d, "hook.sh")
	script := "#!/bin/sh\necho \"$ALLOT_ACTION $ALLOT_POOL $ALLOT_NODE $ALLOT_POOL_NODES $ALLOT_NODE_LABELS\" >> " + log + "\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(nodes int64) {
		t.Helper()
		for i := range plan.Pools {
			plan.Pools[i].NodesTarget = nodes
		}
		mods, err := Modules(cfg, plan, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ModuleFile), mods["lab"], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// entries returns the hook calls since the last call, sorted.
	seen := 0
	entries := func() []string {
		t.Helper()
		f, err := os.Open(log)
		if err != nil {
			return nil
		}
		defer f.Close()
		var all []string
		for s := bufio.NewScanner(f); s.Scan(); {
			all = append(all, s.Text())
		}
		out := all[seen:]
		seen = len(all)
		slices.Sort(out)
		return out
	}
	vars := []string{"-var", "command=" + hook}
	labels := func(node, rack string) string {
		return `{"allot.dev/cluster":"lab","allot.dev/flavor":"a100-40gb","allot.dev/pool":"a100","topology.allot.dev/host":"` + node + `","topology.allot.dev/rack":"` + rack + `"}`
	}

	write(4)
	tf(t, bin, d, "init", "-input=false", "-no-color")
	tf(t, bin, d, append([]string{"apply", "-input=false", "-auto-approve", "-no-color"}, vars...)...)
	want := []string{
		"create a100 a100-0 4 " + labels("a100-0", "a100-rack-0"),
		"create a100 a100-1 4 " + labels("a100-1", "a100-rack-0"),
		"create a100 a100-2 4 " + labels("a100-2", "a100-rack-1"),
		"create a100 a100-3 4 " + labels("a100-3", "a100-rack-1"),
	}
	if diff := cmp.Diff(want, entries()); diff != "" {
		t.Errorf("hooks of the first apply (-want +got):\n%s", diff)
	}

	// Nothing changed: the plan is empty and no hook runs.
	if out := tf(t, bin, d, append([]string{"plan", "-input=false", "-no-color", "-detailed-exitcode"}, vars...)...); !strings.Contains(out, "No changes") {
		t.Errorf("re-plan is not empty:\n%s", out)
	}

	write(3)
	out := tf(t, bin, d, append([]string{"plan", "-input=false", "-no-color"}, vars...)...)
	for _, s := range []string{"nodes         = 4 -> 3", `terraform_data.a100_nodes["a100-3"] will be destroyed`, `terraform_data.a100_created["a100-3"] will be destroyed`, "Plan: 0 to add, 1 to change, 2 to destroy."} {
		if !strings.Contains(out, s) {
			t.Errorf("the plan of a shrink does not show %q:\n%s", s, out)
		}
	}
	tf(t, bin, d, append([]string{"apply", "-input=false", "-auto-approve", "-no-color"}, vars...)...)
	if diff := cmp.Diff([]string{"delete a100 a100-3 3 " + labels("a100-3", "a100-rack-1")}, entries()); diff != "" {
		t.Errorf("hooks of the shrink (-want +got):\n%s", diff)
	}

	tf(t, bin, d, append([]string{"destroy", "-input=false", "-auto-approve", "-no-color"}, vars...)...)
	want = []string{
		"delete a100 a100-0 3 " + labels("a100-0", "a100-rack-0"),
		"delete a100 a100-1 3 " + labels("a100-1", "a100-rack-0"),
		"delete a100 a100-2 3 " + labels("a100-2", "a100-rack-1"),
	}
	if diff := cmp.Diff(want, entries()); diff != "" {
		t.Errorf("hooks of destroy (-want +got):\n%s", diff)
	}
}

// TestGKEZonePrecondition runs the gke module's zone check with the real
// terraform: the pool's node_locations expression and its lifecycle
// precondition, copied from the render onto a built-in terraform_data (the
// google provider cannot be downloaded here). A regional cluster needs each
// pool's one zone, since GKE's node_count is per zone; a zonal one does not.
func TestGKEZonePrecondition(t *testing.T) {
	bin := terraformBin(t)
	var mod map[string]any
	if err := json.Unmarshal(render(t, configs["fleet"], Options{})["gke-use1"], &mod); err != nil {
		t.Fatal(err)
	}
	pools := mod["resource"].(map[string]any)["google_container_node_pool"].(map[string]any)
	name := slices.Sorted(maps.Keys(pools))[0]
	pool := pools[name].(map[string]any)
	vars := mod["variable"].(map[string]any)
	probe := map[string]any{
		"variable": map[string]any{"location": vars["location"], "node_locations": vars["node_locations"]},
		"resource": map[string]any{"terraform_data": map[string]any{"probe": map[string]any{
			"input": pool["node_locations"], "lifecycle": pool["lifecycle"],
		}}},
	}
	b, err := json.Marshal(probe)
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, ModuleFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, bin, d, "init", "-input=false", "-no-color")
	poolName := pool["name"].(string)
	for _, tc := range []struct {
		name string
		args []string
		fail bool
	}{
		{"regional, no zone", nil, true},
		{"regional, two zones", []string{"-var", `node_locations={"` + poolName + `"=["us-east1-b","us-east1-c"]}`}, true},
		{"regional, the pool's zone", []string{"-var", `node_locations={"` + poolName + `"=["us-east1-b"]}`}, false},
		{"zonal", []string{"-var", "location=us-east1-b"}, false},
		{"zonal, two zones", []string{"-var", "location=us-east1-b", "-var", `node_locations={"` + poolName + `"=["us-east1-b","us-east1-c"]}`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"plan", "-input=false", "-no-color"}, tc.args...)...)
			cmd.Dir = d
			cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+filepath.Join(d, "none.tfrc"))
			out, err := cmd.CombinedOutput()
			switch {
			case tc.fail && (err == nil || !strings.Contains(string(out), "node_count is per zone")):
				t.Errorf("plan passed or failed otherwise (%v):\n%s", err, out)
			case !tc.fail && err != nil:
				t.Errorf("plan failed: %v\n%s", err, out)
			}
		})
	}
}
