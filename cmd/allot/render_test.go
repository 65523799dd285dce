package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/schema"
)

// tree returns every file under dir, relative and slash-separated, with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rendered returns what package render makes of dir, as tree returns it.
func rendered(t *testing.T, dir string) map[string]string {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if findings.HasErrors() {
		t.Fatal(findings)
	}
	files, err := render.Render(cfg, planner.Build(cfg), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	return out
}

// writeConfig writes a one-file capacity repository and returns its directory.
func writeConfig(t *testing.T, cue string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(cue), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const minimalConfig = `package capacity

clusters: lab: {provider: "kwok"}
pools: a100: {
	cluster:     "lab"
	flavor:      "a100-40gb"
	gpusPerNode: 8
	nodes: {min: 0, max: 4}
	price: onDemandPerNodeHour: 21.96
}
tiers: production: {priority: 500}
teams: nlp: {
	costCenter: "CC-7"
	owners: ["@nlp"]
	quota: "a100-40gb": {nominal: 16}
}
`

func TestRenderExamples(t *testing.T) {
	examples := filepath.Join("..", "..", "examples")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := allot(t, nil, "render", examples, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	want := out + ": 6 Kubernetes manifests, 3 Terraform modules (dgx-onprem, eks-use1, gke-usc1); 9 files changed\n"
	if stdout != want || stderr != "" {
		t.Errorf("stdout = %q, want %q; stderr = %q", stdout, want, stderr)
	}
	// Exactly the rendered files, byte for byte: no temporary file left behind.
	if diff := cmp.Diff(rendered(t, examples), tree(t, out)); diff != "" {
		t.Errorf("files under OUT (-want +got):\n%s", diff)
	}
	for _, p := range []string{"kubernetes", "kubernetes/50-pools.yaml", "terraform/gke-usc1/main.tf.json"} {
		st, err := os.Stat(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		if wantMode := fs.FileMode(0o644); !st.IsDir() && st.Mode().Perm() != wantMode {
			t.Errorf("%s has mode %v, want %v", p, st.Mode().Perm(), wantMode)
		}
	}
}

// TestRenderRewrites renders twice, then after a change: unchanged files are not
// rewritten, Terraform state and other files are kept, and a manifest of a kind
// that no longer has objects is removed.
func TestRenderRewrites(t *testing.T) {
	dir := writeConfig(t, minimalConfig+"cohorts: lab: {}\n")
	out := t.TempDir()
	if code, stdout, stderr := allot(t, nil, "render", "-o", out, dir); code != 0 || !strings.HasSuffix(stdout, "; 7 files changed\n") {
		t.Fatalf("first render: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	state := filepath.Join(out, "terraform", "lab", "terraform.tfstate")
	if err := os.WriteFile(state, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	pools := filepath.Join(out, "kubernetes", "50-pools.yaml")
	before, err := os.Stat(pools)
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, _ := allot(t, nil, "render", dir, "-o", out)
	if want := out + ": 6 Kubernetes manifests, 1 Terraform modules (lab); 0 files changed\n"; code != 0 || stdout != want {
		t.Errorf("second render: exit %d, stdout %q, want %q", code, stdout, want)
	}
	if after, _ := os.Stat(pools); !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("an unchanged manifest was rewritten")
	}

	// No more cohorts, and a larger quota.
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(strings.Replace(minimalConfig, "nominal: 16", "nominal: 24", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := allot(t, nil, "render", dir, "-o", out)
	// Changed: pools, teams, the module, and the cohorts file removed.
	if want := out + ": 5 Kubernetes manifests, 1 Terraform modules (lab); 4 files changed\n"; code != 0 || stdout != want {
		t.Errorf("third render: exit %d, stdout %q, want %q; stderr %q", code, stdout, want, stderr)
	}
	got := tree(t, out)
	if _, ok := got["kubernetes/30-cohorts.yaml"]; ok {
		t.Errorf("the cohorts manifest of a config without cohorts was kept")
	}
	if got["terraform/lab/terraform.tfstate"] != "{}" {
		t.Errorf("render touched the Terraform state")
	}
	if !strings.Contains(got["kubernetes/50-pools.yaml"], "nodesTarget: 3") {
		t.Errorf("the pool was not resized to 3 nodes:\n%s", got["kubernetes/50-pools.yaml"])
	}
}

func TestRenderFailures(t *testing.T) {
	broken := writeConfig(t, strings.Replace(minimalConfig, "nominal: 16", "nominal: -16", 1))
	noMachine := writeConfig(t, strings.Replace(minimalConfig, `provider: "kwok"`, `provider: "gke"`, 1))
	tests := map[string]struct {
		args       func(out string) []string
		wantCode   int
		wantStderr []string
	}{
		"no output directory": {
			args:       func(string) []string { return []string{"render", broken} },
			wantCode:   exitUsage,
			wantStderr: []string{"allot: render needs -o OUT, the directory to write to"},
		},
		"no directory": {
			args:       func(out string) []string { return []string{"render", "-o", out} },
			wantCode:   exitUsage,
			wantStderr: []string{"render needs DIR (got 0 arguments)"},
		},
		"missing directory": {
			args:       func(out string) []string { return []string{"render", filepath.Join(out, "nowhere"), "-o", out} },
			wantCode:   exitUsage,
			wantStderr: []string{"nowhere"},
		},
		"configuration errors": {
			args:     func(out string) []string { return []string{"render", broken, "-o", out} },
			wantCode: exitFindings,
			wantStderr: []string{
				"capacity.cue:15:32: error: schema: teams.nlp.quota.\"a100-40gb\".nominal: invalid value -16",
				": 1 error(s), 0 warning(s): nothing rendered",
			},
		},
		"a pool its provider cannot render": {
			args:     func(out string) []string { return []string{"render", noMachine, "-o", out} },
			wantCode: exitFindings,
			wantStderr: []string{
				// validate's finding, so CI sees it before render does
				`capacity.cue:4:8: error: required-field: pools.a100: required field "machineType" is missing`,
				": 1 error(s), 0 warning(s): nothing rendered",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := allot(t, nil, tc.args(out)...)
			if code != tc.wantCode || stdout != "" {
				t.Errorf("exit %d, want %d; stdout %q", code, tc.wantCode, stdout)
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was created: %v", out, err)
			}
		})
	}
}

func TestRenderHelp(t *testing.T) {
	code, stdout, _ := allot(t, nil, "render", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range []string{"render DIR -o OUT", "-o, --output", "OUT/terraform/<cluster>/main.tf.json"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help lacks %q", s)
		}
	}
	if !slices.Contains(strings.Fields(stdout), "Exit") {
		t.Errorf("help does not document the exit status")
	}
}

// --backend and --backend-config give every cluster's module its backend, with
// {cluster} replaced; a setting without '=' is bad usage.
func TestRenderBackend(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"render", "../../examples", "-o", out, "--backend", "s3", "--backend-config", "bucket=acme-tf",
		"--backend-config", "key=allot/{cluster}.tfstate", "--backend-config", "region=us-east-1"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("render exited %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "terraform", "eks-use1", "main.tf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Terraform struct {
			Backend map[string]map[string]string `json:"backend"`
		} `json:"terraform"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"s3": {"bucket": "acme-tf", "key": "allot/eks-use1.tfstate", "region": "us-east-1"}}
	if diff := cmp.Diff(want, m.Terraform.Backend); diff != "" {
		t.Errorf("backend (-want +got):\n%s", diff)
	}
	stderr.Reset()
	if code := run([]string{"render", "../../examples", "-o", out, "--backend-config", "bucket"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "want KEY=VALUE") {
		t.Errorf("a setting without '=': exit %d, %q", code, stderr.String())
	}
}
