package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// allot manager, started as the binary would be, against a real API server, as
// the service account of config/ with only the rights of its generated
// ClusterRole and its leader-election Role: it is elected through its Lease in
// allot-system, serves probes, serves metrics to a service account allowed to
// scrape them and to no one else, binds an allot pod, writes the team's
// status, and stops cleanly.
func TestManager(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	testenv.ApplyManifests(t, c, "config/rbac/role.yaml", "config/manager/rbac_binding.yaml")
	scraper := testenv.ServiceAccountToken(t, c, "allot-system", "prometheus", "allot-metrics-reader")
	stranger := testenv.ServiceAccountToken(t, c, "allot-system", "stranger", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfigAs(kubeconfig, "system:serviceaccount:allot-system:allot-manager"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&allotv1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "production"}, Spec: allotv1.TierSpec{Priority: 500}},
		&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: allotv1.TeamSpec{Quota: []allotv1.FlavorQuota{{Flavor: "h100", Nominal: 8}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "jobs"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testenv.CreateNode(ctx, c, "n0", 8, map[string]string{contract.LabelFlavor: "h100", contract.LabelPool: "p"}); err != nil {
		t.Fatal(err)
	}

	metrics, probes := freePort(t), freePort(t)
	runCtx, cancel := context.WithCancel(ctx)
	var stderr testenv.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runContext(runCtx, []string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=true", "--leader-election-namespace", "allot-system",
			"--metrics-bind-address", metrics, "--health-probe-bind-address", probes,
			"--git-cache-dir", t.TempDir(), "--status-interval", "200ms"}, io.Discard, &stderr)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-code
		}
		if t.Failed() {
			t.Logf("the manager's stderr:\n%s", stderr.String())
		}
	}()

	waitFor(t, "healthz", func() error { return httpOK("http://" + probes + "/healthz") })
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "alpha", Name: "train"}, // the team's namespace names its team (--strict-tenancy)
		Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{
			Name: "train", Image: "trainer:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus}, Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus}},
		}}},
	}
	// A pod of a namespace no team owns, naming alpha, is refused by default
	// (--strict-tenancy): it would have taken n0 first.
	stray := pod.DeepCopy()
	stray.Namespace, stray.Name, stray.Labels = "jobs", "stray", map[string]string{contract.LabelTeam: "alpha"}
	if err := c.Create(ctx, stray); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stray pod refused", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(stray), stray); err != nil {
			return err
		}
		for _, cond := range stray.Status.Conditions {
			if cond.Type == corev1.PodScheduled && strings.Contains(cond.Message, "namespace jobs belongs to no team") {
				return nil
			}
		}
		return fmt.Errorf("node %q, conditions %+v", stray.Spec.NodeName, stray.Status.Conditions)
	})
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
		resp, err := testenv.Scrape("https://"+metrics+"/metrics", scraper)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("scraping with the token of a reader: %s", resp.Status)
		}
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

	waitFor(t, "team status", func() error {
		var team allotv1.Team
		if err := c.Get(ctx, client.ObjectKey{Name: "alpha"}, &team); err != nil {
			return err
		}
		if team.Status.AdmittedWorkloads != 1 || len(team.Status.Flavors) != 1 || team.Status.Flavors[0].UsedGPUs != 8 {
			return fmt.Errorf("status %+v", team.Status)
		}
		return nil
	})
	testenv.MetricsRefused(t, "https://"+metrics+"/metrics", stranger)
	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: "allot-system", Name: "allot-manager"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Errorf("the manager holds no Lease allot-system/allot-manager: %v", err)
	}
	if strings.Contains(stderr.String(), "forbidden") {
		t.Errorf("the manager was refused something its role should allow:\n%.3000s", stderr.String())
	}

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

// The arguments of the manager's Deployment are flags its verb takes.
func TestDeploymentArgs(t *testing.T) {
	const file = "config/manager/manager.yaml"
	c := newManagerCommand()
	args := testenv.PodTemplate(t, file).Spec.Containers[0].Args
	if len(args) == 0 || args[0] != c.Name() {
		t.Fatalf("%s: container args %v do not start with the verb %s", file, args, c.Name())
	}
	if err := c.ParseFlags(args[1:]); err != nil {
		t.Errorf("%s: %v", file, err)
	}
}

// The manager's and the agent's pods run as non-root users, with no
// capability, no privilege escalation, a read-only root filesystem and the
// runtime's default seccomp profile.
func TestPodsHardened(t *testing.T) {
	for _, file := range []string{"config/manager/manager.yaml", "config/agent/daemonset.yaml"} {
		spec := testenv.PodTemplate(t, file).Spec
		if ps := spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot ||
			ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: the pod is not runAsNonRoot with seccomp RuntimeDefault: %+v", file, ps)
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s: the pod shares a host namespace", file)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: container %s is not hardened: %+v", file, c.Name, sc)
			}
		}
	}
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
	testenv.Eventually(t, 30*time.Second, what, f)
}

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
