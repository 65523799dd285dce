package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render"
	"github.com/allot-dev/allot/schema"
)

// TestRenderKueueExamples: --target kueue writes the Kueue objects per cluster
// (the same bytes package render makes) and the Terraform modules, prints the
// rules Kueue cannot say as warnings at their lines, and switching back to the
// default target removes the Kueue manifests.
func TestRenderKueueExamples(t *testing.T) {
	examples := filepath.Join("..", "..", "examples")
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := allot(t, nil, "render", examples, "-o", out, "--target", "kueue")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	want := out + ": 21 Kueue manifests, 3 Terraform modules (dgx-onprem, eks-use1, gke-usc1); 24 files changed\n"
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	for _, w := range []string{
		"tiers.cue:7:48: warning: kueue-borrow-only: ",
		"teams/ads.cue:7:2: warning: kueue-tier-preemption: ",
		"teams/nlp.cue:12:2: warning: kueue-weight: ",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	cfg, findings := schema.Load(os.DirFS(examples))
	if findings.HasErrors() {
		t.Fatal(findings)
	}
	files, err := render.Render(cfg, planner.Build(cfg), render.Options{Target: render.TargetKueue})
	if err != nil {
		t.Fatal(err)
	}
	wantTree := map[string]string{}
	for _, f := range files {
		wantTree[f.Path] = string(f.Data)
	}
	if diff := cmp.Diff(wantTree, tree(t, out)); diff != "" {
		t.Errorf("files under OUT (-want +got):\n%s", diff)
	}

	code, stdout, _ = allot(t, nil, "render", examples, "-o", out)
	if want := out + ": 6 Kubernetes manifests, 3 Terraform modules (dgx-onprem, eks-use1, gke-usc1); 27 files changed\n"; code != 0 || stdout != want {
		t.Errorf("back to allot: exit %d, stdout %q, want %q", code, stdout, want)
	}
	for p := range tree(t, out) {
		if strings.HasPrefix(p, "kueue/") {
			t.Errorf("%s was kept after rendering for allot", p)
		}
	}
}

func TestValidateTargetKueue(t *testing.T) {
	examples := filepath.Join("..", "..", "examples")
	code, stdout, stderr := allot(t, nil, "validate", examples, "--target", "kueue")
	if code != 0 || !strings.Contains(stdout, "warning: kueue-team-tiers: ") || !strings.Contains(stderr, "10 warning(s)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = allot(t, nil, "validate", examples)
	if code != 0 || strings.Contains(stdout, "kueue-") {
		t.Errorf("without --target: exit %d, stdout:\n%s", code, stdout)
	}
	code, _, stderr = allot(t, nil, "validate", examples, "--target", "volcano")
	if code != exitUsage || !strings.Contains(stderr, `--target "volcano"`) {
		t.Errorf("a bad target: exit %d, stderr %q", code, stderr)
	}
}
