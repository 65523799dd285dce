package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner/tfrun"
	"github.com/allot-dev/allot/schema"
)

// terraformWork prepares the PR of testdata/terraform in a temporary
// directory, which becomes the working directory: base and head, and work,
// base rendered by allot render and applied with the runner, as the manager
// would have done before the PR (hooks: the module's default, echo).
func terraformWork(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatalf("terraform is not on PATH: %v", err)
	}
	dir := t.TempDir()
	for _, name := range []string{"base", "head"} {
		b, err := os.ReadFile(filepath.Join(testdata, "terraform", name, "capacity.cue"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "capacity.cue"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// No CLI configuration of the machine (plugin cache, mirrors).
	rc := filepath.Join(dir, "terraform.rc")
	if err := os.WriteFile(rc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", rc)
	t.Setenv("CHECKPOINT_DISABLE", "1")
	t.Chdir(dir)
	if code, _, errOut := allot(t, nil, "render", "base", "-o", "work"); code != 0 {
		t.Fatalf("render: exit %d: %s", code, errOut)
	}
	ctx := context.Background()
	for _, cluster := range []schema.ClusterName{"lab", "rack"} {
		r, err := tfrun.New(ctx, cluster, filepath.Join(dir, "work", "terraform", string(cluster)))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Init(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := r.Plan(ctx, tfrun.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(ctx, p, tfrun.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// treeHash hashes every file under dir, with its path.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fmt.Fprintln(h, p, d.Type())
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestPlanTerraformGolden locks the PR's plan with the Terraform summary in
// every format, and checks the working directory is left as it was.
func TestPlanTerraformGolden(t *testing.T) {
	terraformWork(t)
	before := treeHash(t, "work")
	for _, format := range []string{"text", "markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := allot(t, nil, "plan", "head", "--base", "base", "-o", format, "--terraform", "work")
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			golden(t, "plan-terraform."+format, out)
		})
	}
	if after := treeHash(t, "work"); after != before {
		t.Error("plan --terraform changed the working directory")
	}
}

// TestPlanTerraformJSON: the Terraform summary extends the plan's JSON and
// changes nothing else of it, and Terraform's nodes before and after each
// pool agree with the planner's diff (the state is the base's).
func TestPlanTerraformJSON(t *testing.T) {
	terraformWork(t)
	_, plain, _ := allot(t, nil, "plan", "head", "--base", "base", "-o", "json")
	code, out, errOut := allot(t, nil, "plan", "head", "--base", "base", "-o", "json", "--terraform", "work/terraform")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	prefix := strings.TrimSuffix(plain, "\n}\n")
	if !strings.HasPrefix(out, prefix) || prefix == plain {
		t.Errorf("the plan's JSON changed before the terraform member:\n%s", out)
	}
	var doc struct {
		Diff struct {
			Pools []struct {
				Pool        string
				NodesBefore int64 `json:"nodes_before"`
				NodesAfter  int64 `json:"nodes_after"`
			}
		}
		Terraform struct {
			Workdir  string
			Clusters []struct {
				Cluster string
				Changes bool
				Error   string
				Pools   []struct {
					Pool        string
					NodesBefore int64 `json:"nodes_before"`
					NodesAfter  int64 `json:"nodes_after"`
					Add         int
					Destroy     int
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal([]byte(out), &generic); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"pools", "teams", "total_monthly_usd", "findings", "diff", "terraform"} {
		if _, ok := generic[key]; !ok {
			t.Errorf("no %q in the plan's JSON", key)
		}
	}
	if len(doc.Terraform.Clusters) != 2 || doc.Terraform.Workdir != "work/terraform" {
		t.Fatalf("terraform member: %+v", doc.Terraform)
	}
	tf := map[string][2]int64{}
	for _, c := range doc.Terraform.Clusters {
		if c.Error != "" {
			t.Errorf("cluster %s: %s", c.Cluster, c.Error)
		}
		if c.Changes != (c.Cluster == "lab") {
			t.Errorf("cluster %s: changes %v", c.Cluster, c.Changes)
		}
		for _, p := range c.Pools {
			tf[p.Pool] = [2]int64{p.NodesBefore, p.NodesAfter}
		}
	}
	if len(doc.Diff.Pools) != 2 {
		t.Fatalf("diff pools: %+v", doc.Diff.Pools)
	}
	for _, p := range doc.Diff.Pools {
		if got := tf[p.Pool]; got != [2]int64{p.NodesBefore, p.NodesAfter} {
			t.Errorf("pool %s: terraform has %d -> %d nodes, the diff %d -> %d", p.Pool, got[0], got[1], p.NodesBefore, p.NodesAfter)
		}
	}
	if tf["a100"] != [2]int64{2, 4} || tf["8x-l4"] != [2]int64{1, 0} || tf["h100-rack"] != [2]int64{2, 2} {
		t.Errorf("terraform nodes before and after: %v", tf)
	}
}

// TestPlanTerraformErrors: bad flags are usage errors; a cluster terraform
// cannot plan is reported, the rest of the plan is still printed, exit 2; a
// working directory without a cluster's state plans that cluster from
// nothing.
func TestPlanTerraformErrors(t *testing.T) {
	terraformWork(t)
	tests := map[string]struct {
		args      []string
		env       map[string]string
		code      int
		stderr    string
		stdoutHas string
	}{
		"unknown cluster": {
			args: []string{"--terraform", "work", "--terraform-cluster", "nope"}, code: 2,
			stderr: "allot: --terraform-cluster nope: no such cluster in head\n",
		},
		"cluster without --terraform": {
			args: []string{"--terraform-cluster", "lab"}, code: 2,
			stderr: "allot: --terraform-cluster needs --terraform WORKDIR\n",
		},
		"no such workdir": {
			args: []string{"--terraform", "nowhere"}, code: 2,
			stderr: "allot: --terraform: stat nowhere: no such file or directory\n",
		},
		"no terraform": {
			args: []string{"--terraform", "work", "--terraform-cluster", "rack"}, env: map[string]string{"PATH": "/nonexistent"}, code: 2,
			stderr:    "allot: terraform of cluster rack: terraform binary terraform: exec: \"terraform\": executable file not found in $PATH (install Terraform 1.5.0 or point allot at it)\n",
			stdoutHas: "cluster rack: not planned: terraform of cluster rack: terraform binary terraform",
		},
		"a cluster without state": {
			args: []string{"--terraform", t.TempDir(), "--terraform-cluster", "lab"}, code: 0,
			stdoutHas: "lab      a100              0            4    9       0        0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := allot(t, tc.env, append([]string{"plan", "head", "--base", "base"}, tc.args...)...)
			if code != tc.code || (tc.stderr != "" || code == 0) && errOut != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, errOut, tc.code, tc.stderr)
			}
			if tc.stdoutHas != "" && !strings.Contains(out, tc.stdoutHas) {
				t.Errorf("stdout does not have %q:\n%s", tc.stdoutHas, out)
			}
			if tc.stdoutHas != "" && !strings.Contains(out, "Plan of head") {
				t.Errorf("the plan itself is missing:\n%s", out)
			}
		})
	}
}
