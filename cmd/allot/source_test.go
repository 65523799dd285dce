package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
)

// allot suspend, resume and reconcile source, against the CapacitySource
// reconciler and a
// Flux GitRepository whose status the test writes as source-controller would:
// a suspended source applies nothing new and refuses a reconcile; resume
// applies the new artifact and waits for it; reconcile --with-source asks the
// GitRepository first, and returns once the CapacitySource has handled its
// request, with the revision it applied.
func TestSourceVerbs(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	// The CapacitySource reconciler as the manager runs it (the manager itself
	// registers its metrics globally: once a process, in TestManager).
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// TestManager registers the same controller name in this process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	r := &capacity.Reconciler{
		Client:  mgr.GetClient(),
		Fetcher: capacity.Sources{Flux: &capacity.FluxFetcher{Client: mgr.GetClient(), Dir: t.TempDir()}},
		Metrics: capacity.NewMetrics(prometheus.NewRegistry()),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(runCtx) }()
	defer func() { cancel(); <-stopped }()

	arts := testenv.NewArtifactServer(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verbs"}}); err != nil {
		t.Fatal(err)
	}
	repo := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "verbs", Name: "capacity"}}
	repo.Spec.URL, repo.Spec.Interval = "https://git.example/acme/capacity.git", metav1.Duration{Duration: time.Minute}
	if err := c.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	publish := func(n, nominal int, handled string) string {
		t.Helper()
		rev := fmt.Sprintf("main@sha1:%040d", n)
		a := arts.Put(t, fmt.Sprintf("gitrepository/verbs/capacity/%d.tar.gz", n), rev, map[string][]byte{"capacity.cue": testenv.SmallRepo("verbs", nominal)})
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), repo); err != nil {
			t.Fatal(err)
		}
		repo.Status.Artifact = &a
		if handled != "" {
			repo.Status.LastHandledReconcileAt = handled
		}
		if err := c.Status().Update(ctx, repo); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev1 := publish(1, 8, "")
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: "verbs", Name: "fleet"}}
	src.Spec.SourceRef = &allotv1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: repo.Name}
	src.Spec.Interval = metav1.Duration{Duration: time.Hour}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	applied := func(rev string) {
		t.Helper()
		waitFor(t, "revision "+rev+" applied", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
				return err
			}
			if src.Status.LastAppliedRevision != rev || !conditions.IsReady(src) {
				return fmt.Errorf("last applied %q: %s", src.Status.LastAppliedRevision, conditions.GetMessage(src, allotv1.ReadyCondition))
			}
			return nil
		})
	}
	applied(rev1)
	allot := func(args ...string) (int, string) {
		var out bytes.Buffer
		got := run(append(args, "--kubeconfig", kubeconfig, "-n", "verbs"), &out, &out)
		return got, out.String()
	}

	if got, out := allot("suspend", "source", "fleet"); got != exitOK || !strings.Contains(out, "CapacitySource verbs/fleet suspended") {
		t.Fatalf("suspend: exit %d\n%s", got, out)
	}
	rev2 := publish(2, 16, "")
	if got, out := allot("reconcile", "source", "fleet", "--timeout", "5s"); got == exitOK || !strings.Contains(out, "is suspended") {
		t.Errorf("reconcile of a suspended source: exit %d\n%s", got, out)
	}
	time.Sleep(2 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
		t.Fatal(err)
	}
	if src.Status.LastAppliedRevision != rev1 {
		t.Fatalf("a suspended source applied %s", src.Status.LastAppliedRevision)
	}

	got, out := allot("resume", "source", "fleet", "--timeout", "30s")
	if got != exitOK || !strings.Contains(out, "applied revision "+rev2) || !strings.Contains(out, "reconcile requested at") {
		t.Fatalf("resume: exit %d\n%s", got, out)
	}
	applied(rev2)

	// --with-source: the GitRepository is asked first; the test answers as
	// source-controller does, with a new artifact.
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, out = allot("reconcile", "source", "fleet", "--with-source", "--timeout", "30s")
	}()
	var rev3 string
	waitFor(t, "the GitRepository asked to reconcile", func() error {
		var r sourcev1.GitRepository
		if err := c.Get(ctx, client.ObjectKeyFromObject(repo), &r); err != nil {
			return err
		}
		at, ok := meta.ReconcileAnnotationValue(r.GetAnnotations())
		if !ok || at == "" {
			return fmt.Errorf("no %s annotation", meta.ReconcileRequestAnnotation)
		}
		rev3 = publish(3, 24, at)
		return nil
	})
	<-done
	if got != exitOK || !strings.Contains(out, "GitRepository verbs/capacity: reconcile requested") || !strings.Contains(out, "applied revision "+rev3) {
		t.Fatalf("reconcile --with-source: exit %d\n%s", got, out)
	}
	var team allotv1.Team
	if err := c.Get(ctx, client.ObjectKey{Name: "verbs-team"}, &team); err != nil || team.Spec.Quota[0].Nominal != 24 {
		t.Errorf("verbs-team after revision 3: %v %+v", err, team.Spec.Quota)
	}
	if got, out := allot("reconcile", "source", "nope", "--timeout", "5s"); got == exitOK || !strings.Contains(out, "not found") {
		t.Errorf("reconcile of a missing source: exit %d\n%s", got, out)
	}
}
