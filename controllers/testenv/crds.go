package testenv

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
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
	// Downloaded if it is not in the module cache yet (the version go.mod
	// requires).
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/jobset")
	cmd.Dir = Root()
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		t.Fatalf("testenv: finding the sigs.k8s.io/jobset module: %v %s", err, mod.Error)
	}
	dir := filepath.Join(mod.Dir, "config", "components", "crd", "bases")
	if err := installCRDs(context.Background(), env, dir); err != nil {
		t.Fatalf("testenv: installing JobSet's CRD: %v", err)
	}
	// Established, its storage may still be starting (503) for a moment.
	Eventually(t, 30*time.Second, "JobSets served", func() error {
		return env.Client.List(context.Background(), &jobsetv1.JobSetList{})
	})
}
