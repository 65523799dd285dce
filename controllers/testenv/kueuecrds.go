package testenv

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// InstallKueueCRDs installs Kueue's CRDs (built by 'make kueue') in env
// without starting Kueue: for tests that have the API server validate Kueue
// objects.
func InstallKueueCRDs(t testing.TB, env *Env) {
	t.Helper()
	if err := installCRDs(context.Background(), env, filepath.Join(Assets(), "kueue-crds")); err != nil {
		t.Fatalf("testenv: installing Kueue's CRDs (run 'make kueue'): %v", err)
	}
}

// InstallJobSetCRD installs JobSet's CRD (jobset.x-k8s.io/v1alpha2, from
// the sigs.k8s.io/jobset module the hub is built with) in env.
func InstallJobSetCRD(t testing.TB, env *Env) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/jobset")
	cmd.Dir = Root()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testenv: finding the sigs.k8s.io/jobset module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "components", "crd", "bases")
	if err := installCRDs(context.Background(), env, dir); err != nil {
		t.Fatalf("testenv: installing JobSet's CRD: %v", err)
	}
	// Established, its storage may still be starting (503) for a moment.
	Eventually(t, 30*time.Second, "JobSets served", func() error {
		return env.Client.List(context.Background(), &jobsetv1.JobSetList{})
	})
}
