package capacity_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// withSlurm adds to kwokRepo a cluster Slurm runs, with a pool of h100 that
// takes a share of alpha's quota.
const withSlurm = `
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: dgx: {cluster: "hpc", flavor: "h100", gpusPerNode: 8, nodes: {min: 1, max: 2}, price: onDemandPerNodeHour: 6,
	slurm: {partition: "gpu", nodePrefix: "dgx"}}
`

// The manager of a Kubernetes cluster (no --cluster) next to a Slurm cluster
// applies its own pools and quota share only: no Pool of the Slurm cluster, no
// Terraform module or hook run for it, and the revision applies (the Slurm
// cluster does not make a fleet of several Terraform clusters).
func TestManagerSkipsSlurmCluster(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := tenv.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	tf := &capacity.Terraform{Env: map[string]string{"KUBECONFIG": kubeconfig}, ReadyTimeout: time.Minute}
	startTerraform(t, tenv, tf)

	src := kwokRepo(32) + withSlurm
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil || findings.HasErrors() {
		t.Fatal(findings)
	}
	plan := planner.Build(cfg)
	slurmShare := planner.ForCluster(cfg, plan, "hpc").Teams["alpha"].Quota["h100"].Nominal
	if slurmShare == 0 || slurmShare == 32 {
		t.Fatalf("the fixture gives the Slurm cluster %d of alpha's 32 GPUs: want a share", slurmShare)
	}

	repo := newGitRepo(t)
	repo.write("capacity.cue", src)
	head := repo.commit("a kwok and a Slurm cluster")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	kwokSource(t, c, repo, head)

	var pools allotv1.PoolList
	if err := c.List(ctx, &pools); err != nil {
		t.Fatal(err)
	}
	if len(pools.Items) != 1 || pools.Items[0].Name != "a" {
		t.Errorf("Pools %v, want the kwok cluster's only", pools.Items)
	}
	var team allotv1.Team
	if err := c.Get(ctx, client.ObjectKey{Name: "alpha"}, &team); err != nil {
		t.Fatal(err)
	}
	if got := team.Spec.Quota[0].Nominal; got != 32-slurmShare {
		t.Errorf("alpha's quota %d, want %d: 32 less the Slurm cluster's share %d", got, 32-slurmShare, slurmShare)
	}
	err := filepath.WalkDir(tf.Dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "hpc") {
			t.Errorf("Terraform worked on the Slurm cluster: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
