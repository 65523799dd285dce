package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoKubeconfigSaysWhereToPutOne: a verb that reaches a cluster, run where
// there is no kubeconfig and no pod, says in one line to pass --kubeconfig or
// set KUBECONFIG, with exit 2, and nothing of client-go's KUBERNETES_MASTER.
func TestNoKubeconfigSaysWhereToPutOne(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HOME": home, "KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}
	for _, args := range [][]string{
		{"explain", "job/train", "-n", "ml"},
		{"reconcile", "source", "fleet"},
	} {
		code, out, errOut := allot(t, env, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stdout %q, stderr %q)", args, code, out, errOut)
		}
		if !strings.Contains(errOut, "no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG") {
			t.Errorf("%v: stderr %q does not say where the kubeconfig goes", args, errOut)
		}
		if strings.Contains(errOut, "KUBERNETES_MASTER") {
			t.Errorf("%v: stderr %q gives client-go's advice", args, errOut)
		}
	}
	// A kubeconfig named but unreadable is another error, naming the file.
	missing := filepath.Join(home, "nope.yaml")
	code, _, errOut := allot(t, env, "explain", "job/train", "--kubeconfig", missing)
	if code != 2 || !strings.Contains(errOut, "nope.yaml") {
		t.Errorf("explain --kubeconfig %s: exit %d, stderr %q", missing, code, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, ".kube")); err == nil {
		t.Error("a verb wrote ~/.kube")
	}
}
