package render

import (
	"bytes"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

func TestRender(t *testing.T) {
	tests := map[string]struct {
		dir  string
		want []string
	}{
		"contract": {"testdata/contract", []string{
			"kubernetes/10-namespaces.yaml",
			"kubernetes/20-priorityclasses.yaml",
			"kubernetes/30-cohorts.yaml",
			"kubernetes/40-tiers.yaml",
			"kubernetes/50-pools.yaml",
			"kubernetes/60-teams.yaml",
			"terraform/lab/main.tf.json",
		}},
		"fleet": {"testdata/fleet", []string{
			"kubernetes/10-namespaces.yaml",
			"kubernetes/20-priorityclasses.yaml",
			"kubernetes/30-cohorts.yaml",
			"kubernetes/40-tiers.yaml",
			"kubernetes/50-pools.yaml",
			"kubernetes/60-teams.yaml",
			"terraform/dgx-pod/main.tf.json",
			"terraform/eks-use1/main.tf.json",
			"terraform/gke-idle/main.tf.json",
			"terraform/gke-use1/main.tf.json",
			"terraform/kwok-lab/main.tf.json",
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, findings := schema.Load(os.DirFS(tc.dir))
			if findings.HasErrors() {
				t.Fatal(findings)
			}
			files, err := Render(cfg, planner.Build(cfg), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Path)
				if len(f.Data) == 0 || !bytes.HasSuffix(f.Data, []byte("\n")) {
					t.Errorf("%s is empty or lacks a final newline", f.Path)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			again, err := Render(cfg, planner.Build(cfg), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(files, again); diff != "" {
				t.Errorf("a second render differs:\n%s", diff)
			}
		})
	}
}
