package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/scheduler"
)

// TestWorkerWordsOnTheHub: a job the hub routed that waits in its worker
// says on the hub why, in the worker scheduler's words (its reason's code and
// numbers, as its pods' events say them) with the worker's latest events,
// and an event on the hub Job says so; once its pods run there, the reason
// is gone. Real API servers, and the worker's real scheduler: the worker's
// own quota for the team is smaller than the hub's, so the hub routes a gang
// the worker does not admit.
func TestWorkerWordsOnTheHub(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"west": {price: "10", nodes: 2}}, 16, time.Minute)
	west := workers["west"].env.Client
	setWorkerQuota := func(gpus int64) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var team allotv1.Team
			if err := west.Get(ctx, client.ObjectKey{Name: "ml"}, &team); err != nil {
				return err
			}
			team.Spec.Quota[0].Nominal = gpus
			return west.Update(ctx, &team)
		}); err != nil {
			t.Fatal(err)
		}
	}
	setWorkerQuota(8)
	startWorkerScheduler(t, ctx, workers["west"].env, "west")

	// The hub reaches the worker as config/hub-worker's service account:
	// those rights are all it needs there.
	c := hubEnv.Client
	testenv.ApplyManifests(t, west, "config/hub-worker/role.yaml")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["west"] = &clientcmdapi.Cluster{Server: workers["west"].env.Config.Host, CertificateAuthorityData: workers["west"].env.Config.CAData}
	cfg.AuthInfos["hub"] = &clientcmdapi.AuthInfo{Token: testenv.Token(t, west, "allot-system", "allot-hub")}
	cfg.Contexts["west"] = &clientcmdapi.Context{Cluster: "west", AuthInfo: "hub"}
	cfg.CurrentContext = "west"
	kc, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "west"}, Data: map[string][]byte{"kubeconfig": kc}}); err != nil {
		t.Fatal(err)
	}
	r, probe := probedRouter(t, ctx, hubEnv, c)
	rec := events.NewFakeRecorder(100)
	r.Recorder = rec
	probe("west")
	if err := c.Create(ctx, gpuJob("j", 2, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	get := func() *batchv1.Job {
		t.Helper()
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "j"}, &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if cl := get().Annotations[hub.AnnotationCluster]; cl != "west" {
		t.Fatalf("ml/j routed to %q, want west", cl)
	}
	// No pods yet in the worker: nothing to tell.
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if w := get().Annotations[hub.AnnotationWorkerPending]; w != "" {
		t.Fatalf("worker-pending %q before the copy has pods", w)
	}
	pods, err := testenv.CreateJobPods(ctx, west, "ml", "j")
	if err != nil {
		t.Fatal(err)
	}
	// The worker's scheduler first says of its first pod that the gang's
	// other pod does not exist yet: that is a reason too, and the hub would
	// tell it. The hub is asked once the worker says why the whole gang waits.
	testenv.Eventually(t, 30*time.Second, "the worker's reason for the whole gang", func() error {
		var p corev1.Pod
		if err := west.Get(ctx, client.ObjectKey{Namespace: "ml", Name: pods[0]}, &p); err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && strings.Contains(cond.Message, "over quota") {
				return nil
			}
		}
		return fmt.Errorf("pod %s's conditions: %+v", pods[0], p.Status.Conditions)
	})

	var said string
	testenv.Eventually(t, 30*time.Second, "the worker's reason on the hub Job", func() error {
		if err := r.Pass(ctx); err != nil {
			return err
		}
		j := get()
		said = j.Annotations[hub.AnnotationWorkerPending]
		if !strings.HasPrefix(said, string(scheduler.ReasonOverQuota)+": ") || !strings.Contains(said, "8") {
			return fmt.Errorf("worker-pending %q, want the worker's %s with its numbers", said, scheduler.ReasonOverQuota)
		}
		// The scheduler says a gang's reason on one of its pods.
		if evs := j.Annotations[hub.AnnotationWorkerEvents]; !strings.Contains(evs, " Unschedulable: "+said) {
			return fmt.Errorf("worker-events %q, want the Unschedulable event saying %q", evs, said)
		}
		return nil
	})
	// It is the worker pod's own condition, word for word.
	var p corev1.Pod
	if err := west.Get(ctx, client.ObjectKey{Namespace: "ml", Name: pods[0]}, &p); err != nil {
		t.Fatal(err)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && !strings.HasSuffix(said, ": "+cond.Message) {
			t.Errorf("hub says %q; the worker's pod says %q", said, cond.Message)
		}
	}
	// One event (its code may have been read after its message, in a later
	// pass: the event may say Pending for it).
	_, msg, _ := strings.Cut(said, ": ")
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, hub.ReasonWorkerPending) || !strings.Contains(e, "waiting in cluster west: ") || !strings.HasSuffix(e, ": "+msg) {
			t.Errorf("event on the hub Job %q, want %s saying the worker's reason %q", e, hub.ReasonWorkerPending, msg)
		}
	default:
		t.Error("no event on the hub Job")
	}
	if n := len(rec.Events); n != 0 {
		t.Errorf("%d more events for one reason: %q", n, <-rec.Events)
	}
	// The same reason is told once: no event a pass.
	for range 3 {
		if err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rec.Events); n != 0 {
		t.Errorf("%d more events though the worker's reason did not change", n)
	}

	// The worker admits it: the reason goes, the pods run there.
	setWorkerQuota(16)
	testenv.Eventually(t, 30*time.Second, "the worker's reason gone once its pods run", func() error {
		if err := r.Pass(ctx); err != nil {
			return err
		}
		if w := get().Annotations[hub.AnnotationWorkerPending]; w != "" {
			return fmt.Errorf("worker-pending still %q", w)
		}
		for _, n := range pods {
			var p corev1.Pod
			if err := west.Get(ctx, client.ObjectKey{Namespace: "ml", Name: n}, &p); err != nil || p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound (%v)", n, err)
			}
		}
		return nil
	})
}
