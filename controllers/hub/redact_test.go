package hub_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// TestEchoedTokenIsRedacted: a worker (or whatever answers at its address)
// whose error answers echo the request's bearer token: the token reaches
// neither the Cluster's conditions nor its events (a probe's error), nor the
// error of a routing pass (which the manager logs), and what was cut says
// so. A real TLS listener answers with a Kubernetes Status that quotes the
// Authorization header.
func TestEchoedTokenIsRedacted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv := testenv.Start(t)
	c := hubEnv.Client
	const token = "echoed-s3cret-t0ken-0123456789"
	echo := newFakeWorker(t, "echo", func(w http.ResponseWriter, r *http.Request) {
		// What a misconfigured proxy in front of the API server might say.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("bad gateway for the request: Authorization: " + r.Header.Get("Authorization")))
	})
	echo.probes.Store(false)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: allotv1.TierSpec{Priority: 100}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "ml"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}}},
		&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: allotv1.PoolSpec{Cluster: "echo", Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 1}, NodesTarget: 1, Price: allotv1.Price{OnDemandPerNodeHour: "10"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Data: map[string][]byte{"kubeconfig": echo.kubeconfig(t, token)}},
		&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "echo"}, FailoverAfter: &metav1.Duration{Duration: time.Minute}}},
		gpuJob("pinned", 1, 8, map[string]string{contract.LabelCluster: "echo"}, nil),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	ws := hub.NewWorkers()
	rec := events.NewFakeRecorder(16)
	probe := func() *allotv1.Cluster {
		t.Helper()
		r := &hub.ClusterReconciler{Client: c, Reader: c, Recorder: rec, Namespace: ns, ProbeTimeout: 5 * time.Second, Workers: ws}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "echo"}}); err != nil {
			t.Fatal(err)
		}
		var cl allotv1.Cluster
		if err := c.Get(ctx, client.ObjectKey{Name: "echo"}, &cl); err != nil {
			t.Fatal(err)
		}
		return &cl
	}
	redacted := func(what, text string) {
		t.Helper()
		if strings.Contains(text, token) || !strings.Contains(text, "[redacted]") {
			t.Errorf("%s %q: want the worker's answer with the token cut out ([redacted])", what, text)
		}
	}

	// The probe's answer echoes the token.
	cl := probe()
	if echo.others.Load() == 0 {
		t.Fatal("the probe never reached the echoing listener")
	}
	for _, cond := range []string{allotv1.ReachableCondition, allotv1.ReadyCondition} {
		redacted("condition "+cond, conditions.GetMessage(cl, cond))
	}
	select {
	case e := <-rec.Events:
		redacted("event", e)
	default:
		t.Error("no event for a worker that turned unreachable")
	}

	// The probes pass; the routing's calls are answered with the token.
	echo.probes.Store(true)
	if cl := probe(); !conditions.IsTrue(cl, allotv1.ReadyCondition) {
		t.Fatalf("echo not Ready once its probes pass: %+v", cl.Status.Conditions)
	}
	before := echo.others.Load()
	err := (&hub.Router{Client: c, Workers: ws, Scheme: hubEnv.Scheme, Log: testr.New(t)}).Pass(ctx)
	if echo.others.Load() == before || err == nil {
		t.Fatalf("the pass made %d calls to echo and returned %v: want an error from its answers", echo.others.Load()-before, err)
	}
	redacted("the routing pass's error", err.Error())
}
