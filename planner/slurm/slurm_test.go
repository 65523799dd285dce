package slurm

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func loadRepo(t *testing.T, dir string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if cfg == nil {
		t.Fatalf("%s does not load: %v", dir, findings)
	}
	plan := planner.Build(cfg)
	if fs := policies.Check(cfg, plan, nil); fs.HasErrors() {
		t.Fatalf("%s has errors: %v", dir, fs)
	}
	return cfg, plan
}

// TestRenderGolden locks the files of testdata/repo's Slurm cluster.
func TestRenderGolden(t *testing.T) {
	cfg, plan := loadRepo(t, "testdata/repo")
	files, err := Render(cfg, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Errorf("%d files, want 5 (accounting, cluster.json, gres, slurm, topology)", len(files))
	}
	for _, f := range files {
		golden := filepath.Join("testdata", "golden", filepath.FromSlash(f.Path))
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			if err := os.WriteFile(golden, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if !bytes.Equal(f.Data, want) {
			t.Errorf("%s differs from %s (run with -update):\n%s", f.Path, golden, f.Data)
		}
	}
	again, _ := Render(cfg, plan)
	for i := range files {
		if !bytes.Equal(files[i].Data, again[i].Data) {
			t.Errorf("%s: two renders differ", files[i].Path)
		}
	}
}
