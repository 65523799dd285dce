package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/scheduler/runner"
)

// syncBuffer is a bytes.Buffer safe for the manager's logging goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// allot manager, started as the binary would be, against a real API server:
// it serves probes and metrics, binds an allot pod, and stops cleanly.
func TestManager(t *testing.T) {
	env := testenv.Start(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	for _, o := range []client.Object{
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "production"}, Spec: allotv1.TierSpec{Priority: 500}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testenv.CreateNode(ctx, c, "n0", 8, map[string]string{runner.LabelFlavor: "h100", runner.LabelPool: "p"}); err != nil {
		t.Fatal(err)
	}

	metrics, probes := freePort(t), freePort(t)
	runCtx, cancel := context.WithCancel(ctx)
	var stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runContext(runCtx, []string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=false",
			"--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
			"--git-cache-dir", t.TempDir(), "--status-interval", "200ms"}, io.Discard, &stderr)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-code
		}
	}()

	waitFor(t, "healthz", func() error { return httpOK("http://" + probes + "/healthz") })
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "jobs", Name: "train", Labels: map[string]string{runner.LabelTeam: "alpha"}},
		Spec: corev1.PodSpec{SchedulerName: runner.SchedulerName, Containers: []corev1.Container{{
			Name: "train", Image: "trainer:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{runner.GPUResource: gpus}, Limits: corev1.ResourceList{runner.GPUResource: gpus}},
		}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod bound to n0", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Spec.NodeName != "n0" {
			return fmt.Errorf("node %q", pod.Spec.NodeName)
		}
		return nil
	})
	waitFor(t, "usage metrics", func() error {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return err
		}
		for _, name := range []string{"allot_scheduler_binds_total", "allot_team_used_gpus", "allot_pool_healthy_gpus", "allot_scheduler_admission_wait_seconds"} {
			if fams[name] == nil {
				return fmt.Errorf("no %s", name)
			}
		}
		for _, m := range fams["allot_team_used_gpus"].Metric {
			if m.GetGauge().GetValue() == 8 {
				return nil
			}
		}
		return fmt.Errorf("allot_team_used_gpus: %v", fams["allot_team_used_gpus"].Metric)
	})

	cancel()
	stopped = true
	select {
	case got := <-code:
		if got != exitOK {
			t.Fatalf("manager exited %d after a stop; stderr:\n%s", got, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop within 30s of its context ending")
	}
	if !strings.Contains(stderr.String(), `"msg":"starting manager"`) {
		t.Errorf("manager logs are not JSON lines with the start message:\n%.2000s", stderr.String())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func httpOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within 30s: %v", what, err)
}
