package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// TestThrottlingWorkerStallsNoOtherCluster: a worker whose API server
// answers the hub's calls 429 Too Many Requests with Retry-After: 3600
// (client-go would sleep on it, up to the client's timeout, at every call)
// holds up neither the routing of another cluster's job nor the pass, which
// leaves it alone until the next one; it takes no job, and is asked a few
// times a pass, not hammered. A worker that froze after its last probe
// holds a pass no longer than the pass's bound (Router.PassTimeout, here
// shorter than the client's timeout). Real TLS listeners throttle and
// freeze (a tarpit); the other worker is a real API server.
func TestThrottlingWorkerStallsNoOtherCluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"good": {price: "30", nodes: 4}}, 64, time.Minute)
	c := hubEnv.Client
	busy := newFakeWorker(t, "busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many requests, please try again later")
	})
	for _, o := range []client.Object{
		&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: allotv1.PoolSpec{Cluster: "busy", Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 1}, NodesTarget: 1, Price: allotv1.Price{OnDemandPerNodeHour: "10"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}, Data: map[string][]byte{"kubeconfig": busy.kubeconfig(t, "t0ken")}},
		&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "busy"}, FailoverAfter: &metav1.Duration{Duration: time.Minute}}},
		gpuJob("stuck", 1, 8, map[string]string{contract.LabelCluster: "busy"}, nil),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	frozen := newFakeWorker(t, "frozen", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not here")
	})
	u, err := url.Parse(frozen.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pit := newTarpit(t, u.Host)
	for _, o := range []client.Object{
		&allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Spec: allotv1.PoolSpec{Cluster: "frozen", Flavor: "h100", GPUsPerNode: 8, Nodes: allotv1.NodeBounds{Max: 1}, NodesTarget: 1, Price: allotv1.Price{OnDemandPerNodeHour: "10"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen"}, Data: map[string][]byte{"kubeconfig": pit.through(frozen.kubeconfig(t, "t0ken"), frozen.srv.URL)}},
		&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "frozen"}, FailoverAfter: &metav1.Duration{Duration: time.Minute}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The probes pass (their client's timeout is 5 s).
	r := directRouter(t, ctx, hubEnv, c, "good", "busy")
	r.PassTimeout = 4 * time.Second
	pass := func(r *hub.Router, name string, bound time.Duration) {
		t.Helper()
		if err := c.Create(ctx, gpuJob(name, 1, 8, map[string]string{contract.LabelCluster: "good"}, nil)); err != nil {
			t.Fatal(err)
		}
		asked := busy.others.Load()
		start := time.Now()
		err := r.Pass(ctx)
		took := time.Since(start)
		t.Logf("pass for %s: %s, %d calls to busy: %v", name, took.Round(time.Millisecond), busy.others.Load()-asked, err)
		if err == nil || !strings.Contains(err.Error(), "listing the hub's jobs in busy") {
			t.Errorf("the pass: %v, want busy's answer", err)
		}
		if copyIn(t, ctx, workers["good"], name) == nil {
			t.Errorf("ml/%s not routed to good in the pass after it came", name)
		}
		if took > bound {
			t.Errorf("the pass for %s took %s, more than %s: a worker held it up (and good's job with it)", name, took.Round(time.Millisecond), bound)
		}
		if n := busy.others.Load() - asked; n > 3 {
			t.Errorf("the pass asked busy %d times though it said to come back in an hour", n)
		}
	}
	// busy is left alone at its first answer: not even half the pass's
	// bound (client-go's sleep until the listing's deadline). A first pass
	// makes the workers' clients.
	if err := r.Pass(ctx); err == nil {
		t.Error("the first pass: no error, want busy's answer")
	}
	for _, name := range []string{"urgent-0", "urgent-1", "urgent-2"} {
		pass(r, name, time.Second)
	}
	// frozen freezes after its probe: the pass lasts at most its bound.
	r = directRouter(t, ctx, hubEnv, c, "good", "busy", "frozen")
	r.PassTimeout = time.Second
	pit.hang()
	pass(r, "urgent-3", 2*r.PassTimeout)
	var j batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "stuck"}, &j); err != nil {
		t.Fatal(err)
	}
	if cl, p := j.Annotations[hub.AnnotationCluster], j.Annotations[hub.AnnotationPending]; cl != "" || !strings.Contains(p, "busy unreachable") {
		t.Errorf("ml/stuck: cluster %q, pending %q: want it waiting, busy unreachable for the pass", cl, p)
	}
}

// TestManyJobsInAWorkerStallNoPass: the jobs a worker runs cost a pass no
// call each (a worker's client makes 5 calls a second): with 60 of them
// routed there, a pass still routes the next job at once, within its bound.
func TestManyJobsInAWorkerStallNoPass(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"big": {price: "10", nodes: 8}}, 64, time.Minute)
	c := hubEnv.Client
	const n = 60
	for i := range n {
		if err := c.Create(ctx, gpuJob(fmt.Sprintf("j-%d", i), 1, 1, nil, nil)); err != nil {
			t.Fatal(err)
		}
	}
	r := directRouter(t, ctx, hubEnv, c, "big")
	r.PassTimeout = 4 * time.Second
	testenv.Eventually(t, 90*time.Second, "the 60 jobs' copies in big", func() error {
		_ = r.Pass(ctx)
		var list batchv1.JobList
		if err := workers["big"].env.Client.List(ctx, &list, client.InNamespace("ml")); err != nil {
			return err
		}
		if len(list.Items) < n {
			return fmt.Errorf("%d copies", len(list.Items))
		}
		return nil
	})
	if err := c.Create(ctx, gpuJob("next", 1, 1, nil, nil)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := r.Pass(ctx)
	took := time.Since(start)
	t.Logf("the pass: %s: %v", took.Round(time.Millisecond), err)
	if err != nil {
		t.Error(err)
	}
	if copyIn(t, ctx, workers["big"], "next") == nil {
		t.Error("ml/next not routed to big in the pass after it came")
	}
	if took > time.Second {
		t.Errorf("the pass took %s with %d jobs in big", took.Round(time.Millisecond), n)
	}
}
