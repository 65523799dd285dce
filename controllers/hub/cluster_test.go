package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

const ns = "allot-system"

// TestClusterReachability runs a hub and a worker, each a real API server:
// the hub reads the worker's kubeconfig from a Secret, reaches it and counts
// its GPU nodes; a kubeconfig that would run a command is refused without
// quoting a credential; when the worker's API server stops, the Cluster is
// Unreachable, then Lost once failoverAfter has passed (issue 17, item 4).
func TestClusterReachability(t *testing.T) {
	hubEnv := testenv.Start(t)
	worker, stopWorker, err := testenv.StartMain()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = stopWorker()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		if _, err := testenv.CreateNode(ctx, worker.Client, fmt.Sprintf("w-%d", i), 8, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := hubEnv.Client
	kc, err := worker.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	const secretToken = "s3cr3t-t0ken-never-shown"
	evil := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: w, cluster: {server: %q}}]
users: [{name: u, user: {token: %q, exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch /tmp/pwned"]}}}]
contexts: [{name: w, context: {cluster: w, user: u}}]
current-context: w
`, worker.Config.Host, secretToken)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "west"}, Data: map[string][]byte{"kubeconfig": kc}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"}, Data: map[string][]byte{"kubeconfig": []byte(evil)}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	mgr := newManager(t, hubEnv)
	reg := prometheus.NewRegistry()
	metrics := hub.NewMetrics(reg)
	r := &hub.ClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("allot-hub"), Namespace: ns,
		Interval: 200 * time.Millisecond, ProbeTimeout: time.Second, Metrics: metrics}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	startManager(t, ctx, mgr)

	for _, cl := range []*allotv1.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "west"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "west"}, FailoverAfter: &metav1.Duration{Duration: 2 * time.Second}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "evil"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "evil"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nosecret"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "missing"}}},
	} {
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *allotv1.Cluster {
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			t.Fatal(err)
		}
		return &cl
	}
	reason := func(name, cond, want string) func() error {
		return func() error {
			cl := get(name)
			if got := conditions.Get(cl, cond); got == nil || got.Reason != want {
				return fmt.Errorf("%s %s: %+v", name, cond, got)
			}
			return nil
		}
	}
	testenv.Eventually(t, 20*time.Second, "west reachable", reason("west", allotv1.ReadyCondition, hub.ReasonReachable))
	// The conditions and the other status fields may land in two patches.
	testenv.Eventually(t, 20*time.Second, "west's status", func() error {
		if w := get("west"); w.Status.Nodes != 2 || w.Status.GPUs != 16 || w.Status.LastSeen == nil || !strings.HasPrefix(w.Status.ServerVersion, "v1.") {
			return fmt.Errorf("west status %+v, want 2 nodes, 16 GPUs, seen, a version", w.Status)
		}
		return nil
	})
	testenv.Eventually(t, 20*time.Second, "evil refused", reason("evil", allotv1.ReachableCondition, hub.ReasonKubeconfigRefused))
	if m := conditions.GetMessage(get("evil"), allotv1.ReachableCondition); !strings.Contains(m, "runs a command") || strings.Contains(m, secretToken) {
		t.Errorf("evil's message %q: want the refusal, never the token", m)
	}
	testenv.Eventually(t, 20*time.Second, "nosecret", reason("nosecret", allotv1.ReachableCondition, hub.ReasonSecretNotFound))
	if v := testenv.Metric(t, reg, "allot_hub_cluster_reachable", map[string]string{"cluster": "west"}); v != 1 {
		t.Errorf("allot_hub_cluster_reachable{cluster=west} = %v", v)
	}

	// The worker's API server stops: Unreachable (its jobs stay), then Lost.
	stopped = true
	if err := stopWorker(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "west unreachable", reason("west", allotv1.ReachableCondition, hub.ReasonUnreachable))
	testenv.Eventually(t, 20*time.Second, "west lost", reason("west", allotv1.ReadyCondition, hub.ReasonLost))
	if w := get("west"); w.Status.UnreachableSince == nil || w.Status.LastSeen == nil || w.Status.UnreachableSince.Before(w.Status.LastSeen) {
		t.Errorf("west status %+v: want unreachable since, not before last seen (seconds)", w.Status)
	}
	if v := testenv.Metric(t, reg, "allot_hub_cluster_lost", map[string]string{"cluster": "west"}); v != 1 {
		t.Errorf("allot_hub_cluster_lost{cluster=west} = %v", v)
	}
}

// newManager is a manager on env for the test's reconcilers (no metrics or
// probe servers; controller names may repeat across tests).
func newManager(t *testing.T, env *testenv.Env) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// startManager runs mgr until ctx ends or the test does, whichever is first.
func startManager(t *testing.T, ctx context.Context, mgr ctrl.Manager) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestLostNotBeforeTheFence: a worker is Lost (its jobs move) never before
// the fence of the copies the hub made there (failoverAfter after the last
// successful probe began) has passed, or a job would run in two clusters:
// not when the API keeps the first failed probe's time to the second and the
// last good probe began later in that second, nor when the Cluster read
// still says unreachable since an outage before that probe (a lagging
// cache, a status patch that failed), nor for a new leader that knows the
// last good probe from the Cluster's status alone.
func TestLostNotBeforeTheFence(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	kc, err := env.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	nowhere := []byte(strings.ReplaceAll(string(kc), env.Config.Host, "https://"+addr))
	const grace = 2 * time.Second
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Data: map[string][]byte{"kubeconfig": kc}},
		&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "w"}, FailoverAfter: &metav1.Duration{Duration: grace}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var now time.Time
	r := &hub.ClusterReconciler{Client: c, Reader: c, Namespace: ns, ProbeTimeout: 5 * time.Second, Workers: hub.NewWorkers(), Now: func() time.Time { return now }}
	setKubeconfig := func(b []byte) {
		t.Helper()
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, &s); err != nil {
			t.Fatal(err)
		}
		s.Data["kubeconfig"] = b
		if err := c.Update(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	probeAt := func(at time.Time, want string) {
		t.Helper()
		now = at
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "w"}}); err != nil {
			t.Fatal(err)
		}
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: "w"}, &cl); err != nil {
			t.Fatal(err)
		}
		if got := conditions.GetReason(&cl, allotv1.ReadyCondition); got != want {
			t.Errorf("probed at %s: Ready reason %q (%s), want %q", at.Format("15:04:05.000"), got, conditions.GetMessage(&cl, allotv1.ReadyCondition), want)
		}
	}

	// The last good probe begins at .700, the first failed one at .900 of
	// the same second: the API keeps .000 for it.
	t0 := time.Now().Truncate(time.Second).Add(700 * time.Millisecond)
	probeAt(t0, hub.ReasonReachable)
	setKubeconfig(nowhere)
	probeAt(t0.Add(200*time.Millisecond), hub.ReasonUnreachable)
	probeAt(t0.Add(grace-100*time.Millisecond), hub.ReasonUnreachable) // the copies' fence has not passed
	probeAt(t0.Add(grace+time.Second), hub.ReasonLost)

	// Back, then gone again 200ms later, while the Cluster read still says
	// unreachable since the first outage.
	setKubeconfig(kc)
	t1 := t0.Add(time.Minute)
	probeAt(t1, hub.ReasonReachable)
	var cl allotv1.Cluster
	if err := c.Get(ctx, client.ObjectKey{Name: "w"}, &cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.UnreachableSince = &metav1.Time{Time: t0}
	if err := c.Status().Update(ctx, &cl); err != nil {
		t.Fatal(err)
	}
	setKubeconfig(nowhere)
	probeAt(t1.Add(200*time.Millisecond), hub.ReasonUnreachable)
	probeAt(t1.Add(grace-100*time.Millisecond), hub.ReasonUnreachable)
	probeAt(t1.Add(grace+300*time.Millisecond), hub.ReasonLost) // lastSeen's second ended 300ms after it

	// A new leader, which never reached the worker, reads a Cluster last seen
	// at .700 and still unreachable since the first outage.
	r = &hub.ClusterReconciler{Client: c, Reader: c, Namespace: ns, ProbeTimeout: 5 * time.Second, Workers: hub.NewWorkers(), Now: r.Now}
	t2 := t1.Add(time.Minute)
	if err := c.Get(ctx, client.ObjectKey{Name: "w"}, &cl); err != nil {
		t.Fatal(err)
	}
	cl.Status.LastSeen, cl.Status.UnreachableSince = &metav1.Time{Time: t2}, &metav1.Time{Time: t0}
	if err := c.Status().Update(ctx, &cl); err != nil {
		t.Fatal(err)
	}
	probeAt(t2.Add(200*time.Millisecond), hub.ReasonUnreachable)
	probeAt(t2.Add(grace+200*time.Millisecond), hub.ReasonUnreachable)
	probeAt(t2.Add(grace+300*time.Millisecond), hub.ReasonLost)
}
