package capacity_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/planner/render/terraform"
)

// A drift that changes while Terraform puts the pools back is not taken for
// one an apply cannot mend. A node of pool a is lost; as the hook makes it
// again, a node of the pool appears outside Terraform. The check reports the
// new difference as changed while Terraform ran, not the lost node as one
// Terraform does not make; the next check plans the new difference, and
// only once an apply leaves it as it was is it reported as one Terraform
// does not change.
func TestDriftThatChangesWhileTerraformRuns(t *testing.T) {
	tenv, secret := kwokEnv(t)
	c := tenv.Client
	ctx := context.Background()
	dir := t.TempDir()
	// The node hook (this test binary, see TestMain) makes a-stray, labeled
	// as pool a's, right after it makes a-0, once the test arms it.
	armed, hook := filepath.Join(dir, "armed"), filepath.Join(dir, "hook")
	script := fmt.Sprintf(`#!/bin/sh
%[1]q || exit 1
if [ "$%[2]s" = create ] && [ "$%[3]s" = a-0 ] && rm %[4]q 2>/dev/null; then
	%[3]s=a-stray %[5]s='{"%[6]s":"a"}' exec %[1]q
fi
`, os.Args[0], terraform.EnvAction, terraform.EnvNode, armed, terraform.EnvNodeLabels, contract.LabelPool)
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	startTerraform(t, tenv, &capacity.Terraform{EnvSecret: client.ObjectKeyFromObject(secret), ReadyTimeout: time.Minute, Hook: hook})

	repo := newGitRepo(t)
	repo.write("capacity.cue", kwokRepo(16))
	head := repo.commit("pool a")
	// Checked when asked only: each check below is one reconcile.
	key := types.NamespacedName{Namespace: "gitops", Name: "lab"}
	createSource(t, c, key, repo, "", time.Hour)
	waitApplied(t, c, key, head)
	waitNodes(t, c, "a-0", "a-1")

	if err := os.WriteFile(armed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-0"}}); err != nil {
		t.Fatal(err)
	}
	drift := func(want string) {
		t.Helper()
		s := check(t, c, key)
		i := slices.IndexFunc(s.Status.Findings, func(f allotv1.Finding) bool { return f.Rule == "pool-drift" })
		if i < 0 {
			t.Fatalf("no pool-drift finding after the check: %+v", s.Status.Findings)
		}
		if got := s.Status.Findings[i].Message; !strings.Contains(got, want) {
			t.Errorf("pool-drift finding %q, want %q", got, want)
		}
	}
	drift("pool a has 3 nodes, its target is 2, changed while Terraform put the pools back; planned again at the next check")
	waitNodes(t, c, "a-0", "a-1", "a-stray")
	waitEvent(t, c, key, "Drift", "pool a has 1 nodes, its target is 2")
	drift("pool a has 3 nodes, its target is 2, and a Terraform apply does not change it")
	waitEvent(t, c, key, "Drift", "pool a has 3 nodes, its target is 2")
	drift("pool a has 3 nodes, its target is 2, and a Terraform apply does not change it")
	waitNodes(t, c, "a-0", "a-1", "a-stray")
}
