package testenv

import (
	"context"
	"path/filepath"
	"testing"
)

// InstallKueueCRDs installs Kueue's CRDs (built by 'make kueue') in env
// without starting Kueue: for tests that have the API server validate Kueue
// objects.
func InstallKueueCRDs(t testing.TB, env *Env) {
	t.Helper()
	if err := installKueueCRDs(context.Background(), env, filepath.Join(Assets(), "kueue-crds")); err != nil {
		t.Fatalf("testenv: installing Kueue's CRDs (run 'make kueue'): %v", err)
	}
}
