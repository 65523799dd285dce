package capacity_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
)

// In a fleet of several clusters, the manager of one (--cluster) applies that
// cluster's pools and its share of each quota: the examples' H100 quotas are
// split among the three clusters carrying H100 by their planned GPUs, and the
// A100-only or H100-only teams get nothing of a flavor the cluster lacks.
func TestOneClusterOfAFleet(t *testing.T) {
	tenv := testenv.Start(t)
	c := tenv.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(tenv.Config, ctrl.Options{Scheme: tenv.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	r := &capacity.Reconciler{Client: mgr.GetClient(), Fetcher: capacity.Sources{Git: &capacity.GitFetcher{Dir: t.TempDir()}}, Cluster: "gke-usc1"}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	repo := newGitRepo(t)
	repo.copyExamples("fleet")
	head := repo.commit("examples")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "gitops", Name: "fleet"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL, src.Spec.Path = "file://"+repo.dir, "fleet"
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, c, key, head)

	var pools allotv1.PoolList
	if err := c.List(ctx, &pools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pools.Items {
		names = append(names, p.Name)
	}
	if fmt.Sprint(names) != "[gke-a100 gke-h100]" {
		t.Errorf("pools applied in gke-usc1: %v, want only its own", names)
	}
	quota := func(team, flavor string) int64 {
		var tm allotv1.Team
		if err := c.Get(ctx, types.NamespacedName{Name: team}, &tm); err != nil {
			t.Fatal(err)
		}
		for _, q := range tm.Spec.Quota {
			if q.Flavor == flavor {
				return q.Nominal
			}
		}
		return -1
	}
	// H100: gke-h100 plans 64 of the fleet's 648 GPUs (dgx 512, eks-p5 72):
	// robotics' 128 -> 12.6 -> 12 or 13; speech has no H100 quota at all.
	if q := quota("robotics", "h100-80gb"); q < 12 || q > 13 {
		t.Errorf("robotics' H100 share in gke-usc1 = %d, want 12 or 13 of 128", q)
	}
	if q := quota("speech", "a100-40gb"); q <= 0 || q >= 48 {
		t.Errorf("speech's A100 share in gke-usc1 = %d, want a part of its 48", q)
	}
}
