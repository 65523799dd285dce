package hub

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/scheduler"
)

// TestJobWorkload reads hub Jobs as workloads: the namespace decides the
// team (its own, else the first team by name that maps it), the template's
// labels may not disagree, a namespace of no team is refused, the tier
// defaults to the lowest the team may use that is not borrowOnly, the gang
// is min(parallelism, completions), and a Job without GPUs is refused.
func TestJobWorkload(t *testing.T) {
	teams := []allotv1.Team{
		{ObjectMeta: metav1.ObjectMeta{Name: "nlp", Annotations: map[string]string{allotv1.AnnotationNamespaces: "shared"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cv", Annotations: map[string]string{allotv1.AnnotationNamespaces: " shared , cv-batch"}}, Spec: allotv1.TeamSpec{Tiers: []string{"production", "research"}}},
	}
	tiers := []allotv1.Tier{
		{ObjectMeta: metav1.ObjectMeta{Name: "production"}, Spec: allotv1.TierSpec{Priority: 500}},
		{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
		{ObjectMeta: metav1.ObjectMeta{Name: "opportunist"}, Spec: allotv1.TierSpec{BorrowOnly: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}, Spec: allotv1.TierSpec{Priority: 1}},
	}
	job := func(ns string, parallelism, completions int32, gpus int64, labels map[string]string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j"}, Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism), Completions: ptr.To(completions)}}
		j.Spec.Template.Labels = labels
		c := corev1.Container{Name: "c"}
		if gpus > 0 {
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		j.Spec.Template.Spec.Containers = []corev1.Container{c}
		return j
	}
	for name, tc := range map[string]struct {
		job                *batchv1.Job
		team, tier, errHas string
		pods, gpp          int64
	}{
		"own namespace, lowest tier": {job: job("nlp", 4, 4, 8, nil), team: "nlp", tier: "scratch", pods: 4, gpp: 8},
		"mapped: first team by name": {job: job("shared", 2, 2, 1, nil), team: "cv", tier: "research", pods: 2, gpp: 1},
		"mapped, spaces trimmed":     {job: job("cv-batch", 3, 1, 2, map[string]string{contract.LabelTier: "production"}), team: "cv", tier: "production", pods: 1, gpp: 2},
		"a label that agrees":        {job: job("nlp", 1, 1, 8, map[string]string{contract.LabelTeam: "nlp"}), team: "nlp", tier: "scratch", pods: 1, gpp: 8},
		"a label that disagrees":     {job: job("nlp", 1, 1, 8, map[string]string{contract.LabelTeam: "cv"}), errHas: "belongs to team nlp"},
		"a namespace of no team":     {job: job("default", 1, 1, 8, map[string]string{contract.LabelTeam: "nlp"}), errHas: "belongs to no team"},
		"no GPUs":                    {job: job("nlp", 1, 1, 0, nil), errHas: "no nvidia.com/gpu"},
		"nothing to run":             {job: job("nlp", 0, 1, 8, nil), errHas: "nothing to run"},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := jobWorkload(tc.job, newTenancy(teams, tiers))
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want one saying %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(w.Team) != tc.team || string(w.Tier) != tc.tier || w.Pods != tc.pods || w.GPUsPerPod != tc.gpp {
				t.Errorf("workload %+v, want team %s tier %s %dx%d", w, tc.team, tc.tier, tc.pods, tc.gpp)
			}
		})
	}
}

// TestWorkersRenewTheirClient: a worker's client is made again when its
// kubeconfig changes (credentials rotated at the same address), and kept
// while it does not.
func TestWorkersRenewTheirClient(t *testing.T) {
	ws := NewWorkers()
	made := 0
	newClient := func(*rest.Config) (client.Client, error) { made++; return dummyClient{}, nil }
	cfg := &rest.Config{Host: "https://w:6443"}
	for i, step := range []struct {
		kubeconfig string
		made       int
	}{{"token: a", 1}, {"token: a", 1}, {"token: b", 2}} {
		ws.seen("w", time.Now(), []byte(step.kubeconfig), cfg, nil, time.Minute)
		if _, err := ws.snapshot(time.Now(), newClient); err != nil {
			t.Fatal(err)
		}
		if made != step.made {
			t.Errorf("probe %d (%s): %d clients made, want %d", i, step.kubeconfig, made, step.made)
		}
	}
}

// TestFenceFollowsTheProbes: the fence the hub writes is failoverAfter after
// the start of the worker's last successful probe, and it stays there while
// the probes fail, however late a pass renews it: the hub moves a job no
// sooner than failoverAfter after the first failed probe.
func TestFenceFollowsTheProbes(t *testing.T) {
	ws := NewWorkers()
	newClient := func(*rest.Config) (client.Client, error) { return dummyClient{}, nil }
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ws.seen("w", at, []byte("token: a"), &rest.Config{Host: "https://w:6443"}, nil, time.Minute)
	ws.missed("w", false)
	snap, err := ws.snapshot(time.Now(), newClient)
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Add(time.Minute); !snap[0].fence.Equal(want) {
		t.Errorf("fence %s after a failed probe, want %s (the last successful probe's start + failoverAfter)", snap[0].fence, want)
	}
}

// dummyClient stands for a worker's client: it is only counted.
type dummyClient struct{ client.Client }

// TestUnprobedWorkerKeepsItsJobs: a hub that has just become the leader has
// probed no worker yet; the jobs routed to a registered Cluster stay there
// (no failover, which could run them twice while their copies' fences hold)
// and it takes no new job until a probe reaches it. A job routed to a
// Cluster that is gone is routed again.
func TestUnprobedWorkerKeepsItsJobs(t *testing.T) {
	cfg, workers, pools, jobs := benchFleet(2, 16, 8)
	probed := workers[:1] // c0 probed, c1 not yet
	clusters := []allotv1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "c0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c1"}}}
	var onC1 int
	for _, h := range jobs {
		if h.cluster == "c1" {
			onC1++
		}
	}
	d, err := decide(cfg, scheduler.DefaultOptions(), withUnprobed(probed, clusters), pools, jobs, time.Unix(1e6, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.failovers) != 0 {
		t.Errorf("%d jobs moved off a worker not probed yet", len(d.failovers))
	}
	for _, rt := range d.routes {
		if rt.a.Cluster == "c1" {
			t.Errorf("job %s routed to c1, which no probe has reached", rt.h.job.GetName())
		}
	}
	if len(d.routes) == 0 {
		t.Error("nothing routed to the probed worker")
	}
	// c1's Cluster deleted: its jobs go elsewhere.
	for _, h := range jobs {
		h.cluster = h.job.GetAnnotations()[AnnotationCluster]
	}
	d, err = decide(cfg, scheduler.DefaultOptions(), withUnprobed(probed, clusters[:1]), pools, jobs, time.Unix(1e6, 0))
	if err != nil {
		t.Fatal(err)
	}
	if onC1 == 0 || len(d.failovers) != onC1 {
		t.Errorf("%d failovers with c1's Cluster gone, want its %d jobs", len(d.failovers), onC1)
	}
}
