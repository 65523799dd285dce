package kueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/internal/gittest"
)

// testManager runs what allot manager --scheduler=kueue wires (the
// CapacitySource reconciler applying Kueue's objects, the team status from
// the ClusterQueues; no embedded scheduler) against Kueue: a repository in Git
// becomes ClusterQueues Kueue admits by, the teams' usage and pending counts
// reach their Team status, and a quota lowered in Git is applied.
func testManager(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	repo := t.TempDir()
	gittest.Run(t, repo, "init", "-q", "-b", "main")
	lab := strings.NewReplacer("alpha", "gamma", "beta", "delta", "cohorts: lab", "cohorts: lab2", `cohort: "lab"`, `cohort: "lab2"`)
	write := func(alpha, borrow int) {
		t.Helper()
		writeLab(t, repo, alpha, borrow)
		b, err := os.ReadFile(filepath.Join(repo, "capacity.cue"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "capacity.cue"), []byte(lab.Replace(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, repo, "add", "-A")
		gittest.Run(t, repo, "commit", "-q", "-m", fmt.Sprintf("gamma nominal %d", alpha))
	}
	write(8, 4)

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}) // a second run in this process
	if err != nil {
		t.Fatal(err)
	}
	r := &capacity.Reconciler{
		Client:   mgr.GetClient(),
		Fetcher:  capacity.Sources{Git: &capacity.GitFetcher{Dir: t.TempDir(), Secrets: mgr.GetAPIReader()}},
		Recorder: mgr.GetEventRecorder("allot-capacity"),
		Metrics:  capacity.NewMetrics(prometheus.NewRegistry()),
		Kueue:    true,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&StatusReconciler{Client: mgr.GetClient(), MeterEvery: time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gitops"}}); err != nil {
		t.Fatal(err)
	}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "lab"}}
	src.Spec.URL = "file://" + repo
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	nominal := func(want string) func() error {
		return func() error {
			cq := &unstructured.Unstructured{}
			cq.SetGroupVersionKind(ClusterQueueGVK)
			if err := c.Get(ctx, client.ObjectKey{Name: "gamma"}, cq); err != nil {
				return err
			}
			groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
			if got := fmt.Sprint(groups); !strings.Contains(got, "nominalQuota:"+want+"]") {
				return fmt.Errorf("gamma's resource groups: %s", got)
			}
			return nil
		}
	}
	testenv.Eventually(t, 60*time.Second, "the manager applies gamma's ClusterQueue", nominal("8"))

	submitted := time.Now()
	job(t, c, "gamma", "g1", "batch", 4)
	waitRunning(t, c, "gamma", "g1")
	job(t, c, "gamma", "g2", "batch", 9) // 13 > 8 + 4
	waitPending(t, c, "gamma", "g2")
	testenv.Eventually(t, 30*time.Second, "gamma's Team status from its ClusterQueue", func() error {
		team := &allotv1.Team{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gamma"}, team); err != nil {
			return err
		}
		s := team.Status
		if len(s.Flavors) != 1 || s.Flavors[0].Flavor != "t4-16gb" || s.Flavors[0].UsedGPUs != 4 || s.AdmittedWorkloads != 1 || s.PendingWorkloads != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})

	// Showback under Kueue: gamma's metered GPU time grows with its 4
	// admitted GPUs, never past 4 GPUs since g1 was submitted.
	metered := func() (*allotv1.Team, int64, error) {
		team := &allotv1.Team{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gamma"}, team); err != nil {
			return nil, 0, err
		}
		var secs int64
		for _, m := range team.Status.Metered {
			if m.Flavor == "t4-16gb" && m.Tier == TierAll {
				secs += m.GPUSeconds
			}
		}
		return team, secs, nil
	}
	testenv.Eventually(t, 30*time.Second, "gamma's GPU time metered from its ClusterQueue", func() error {
		team, secs, err := metered()
		if err != nil {
			return err
		}
		if most := 4 * int64(time.Since(submitted).Seconds()+2); secs > most {
			t.Fatalf("gamma metered %d GPU-seconds of t4-16gb, more than 4 GPUs since g1's submission allow (%d)", secs, most)
		}
		if secs < 4*3 || team.Status.MeteredAt == nil {
			return fmt.Errorf("gamma metered %d GPU-seconds of t4-16gb (at %v), want at least 3 s of 4 GPUs", secs, team.Status.MeteredAt)
		}
		return nil
	})

	// The same gauges as with the embedded scheduler.
	for _, m := range []struct {
		name, flavor string
		want         float64
	}{{"allot_team_used_gpus", "t4-16gb", 4}, {"allot_team_quota_nominal_gpus", "t4-16gb", 8}, {"allot_team_pending_workloads", "", 1}, {"allot_team_admitted_workloads", "", 1}} {
		labels := map[string]string{"team": "gamma"}
		if m.flavor != "" {
			labels["flavor"] = m.flavor
		}
		testenv.Eventually(t, 30*time.Second, m.name+" of gamma", func() error {
			if got := testenv.Metric(t, ctrlmetrics.Registry, m.name, labels); got != m.want {
				return fmt.Errorf("%s{team=gamma} = %v, want %v", m.name, got, m.want)
			}
			return nil
		})
	}
	// The metered GPU time as the same counter, at least what the status
	// held when the gauges were read.
	testenv.Eventually(t, 30*time.Second, "allot_team_gpu_seconds_total of gamma", func() error {
		_, secs, err := metered()
		if err != nil {
			return err
		}
		got := testenv.Metric(t, ctrlmetrics.Registry, "allot_team_gpu_seconds_total", map[string]string{"team": "gamma", "flavor": "t4-16gb", "tier": TierAll})
		if secs == 0 || got < float64(secs) || got > float64(secs)+4*10 {
			return fmt.Errorf("allot_team_gpu_seconds_total{team=gamma} = %v, status %d GPU-seconds", got, secs)
		}
		return nil
	})

	// Lowered in Git: applied to the ClusterQueue.
	write(4, 0)
	testenv.Eventually(t, 60*time.Second, "gamma's quota lowered", nominal("4"))

	// A team removed from Git: its Team and its Kueue queues are pruned.
	b, err := os.ReadFile(filepath.Join(repo, "capacity.cue"))
	if err != nil {
		t.Fatal(err)
	}
	without, _, ok := strings.Cut(string(b), "teams: delta: {")
	if !ok {
		t.Fatalf("no team delta in:\n%s", b)
	}
	if err := os.WriteFile(filepath.Join(repo, "capacity.cue"), []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, repo, "commit", "-q", "-am", "delta leaves")
	testenv.Eventually(t, 60*time.Second, "delta's ClusterQueue and LocalQueue pruned", func() error {
		for _, o := range []struct{ kind, ns string }{{"ClusterQueue", ""}, {"LocalQueue", "delta"}} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(ClusterQueueGVK.GroupVersion().WithKind(o.kind))
			err := c.Get(ctx, client.ObjectKey{Namespace: o.ns, Name: "delta"}, u)
			if err == nil {
				return fmt.Errorf("%s delta still there", o.kind)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	// gamma's queue stays.
	if err := nominal("4")(); err != nil {
		t.Errorf("after delta left: %v", err)
	}

	// A rule Kueue only approximates (a borrowOnly tier) is refused unless
	// its tier says approximate: true: the last good revision stays, its
	// WorkloadPriorityClass is not made; accepted, it is applied.
	spot := func(extra string) string {
		b, err := os.ReadFile(filepath.Join(repo, "capacity.cue"))
		if err != nil {
			t.Fatal(err)
		}
		body, _, _ := strings.Cut(string(b), "\ntiers: spot:")
		body += "\ntiers: spot: {priority: 1, preemptible: true, borrowOnly: true" + extra + "}\n"
		if err := os.WriteFile(filepath.Join(repo, "capacity.cue"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, repo, "commit", "-q", "-am", "spot tier"+extra)
		return strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))
	}
	wpc := func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(ClusterQueueGVK.GroupVersion().WithKind("WorkloadPriorityClass"))
		return c.Get(ctx, client.ObjectKey{Name: "spot"}, u)
	}
	applied := func() string {
		s := &allotv1.CapacitySource{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(src), s); err != nil {
			t.Fatal(err)
		}
		return s.Status.LastAppliedRevision
	}
	good := strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))
	testenv.Eventually(t, 60*time.Second, "the revision delta left in applied", func() error {
		if got := applied(); !strings.HasSuffix(got, good) {
			return fmt.Errorf("last applied %q, want %s", got, good)
		}
		return nil
	})
	refused := spot("")
	testenv.Eventually(t, 60*time.Second, "the unaccepted approximation refused", func() error {
		s := &allotv1.CapacitySource{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(src), s); err != nil {
			return err
		}
		if !strings.HasSuffix(s.Status.LastAttemptedRevision, refused) {
			return fmt.Errorf("last attempted %q, want %s", s.Status.LastAttemptedRevision, refused)
		}
		for _, f := range s.Status.Findings {
			if f.Rule == "kueue-borrow-only" && f.Severity == "error" && strings.Contains(f.Message, "approximate: true on tier spot") {
				return nil
			}
		}
		return fmt.Errorf("findings %+v: want kueue-borrow-only an error naming tier spot", s.Status.Findings)
	})
	if got := applied(); !strings.HasSuffix(got, good) {
		t.Errorf("last applied %q after the refused revision, want the last good %s", got, good)
	}
	if err := wpc(); !apierrors.IsNotFound(err) {
		t.Errorf("WorkloadPriorityClass spot of the refused revision: %v, want not found", err)
	}
	accepted := spot(", approximate: true")
	testenv.Eventually(t, 60*time.Second, "the accepted approximation applied", func() error {
		if got := applied(); !strings.HasSuffix(got, accepted) {
			return fmt.Errorf("last applied %q, want %s", got, accepted)
		}
		return wpc()
	})
}
