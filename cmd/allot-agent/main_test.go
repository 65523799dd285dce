package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/cmd/allot-agent/agent"
	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
)

var agentT0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// withMockNVML makes the agent verb read srv at a fixed time.
func withMockNVML(t *testing.T, srv *nvmltest.Server) {
	t.Helper()
	saved := agentWorld
	t.Cleanup(func() { agentWorld = saved })
	agentWorld.nvml = func(string) nvml.Interface { return srv }
	agentWorld.now = func() time.Time { return agentT0 }
}

// agentFile writes a file of a test and returns its path.
func agentFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// agentBootID writes a boot ID file and returns its path.
func agentBootID(t *testing.T) string {
	return agentFile(t, "boot_id", "3b5e1c1e-0000-4000-8000-000000000001\n")
}

// onpremOverrides make XID 43 the hardware's fault on cluster onprem-a.
const onpremOverrides = "clusters:\n  onprem-a:\n    xids:\n      \"43\": {class: hardware}\n"

// agentOneLine asserts stderr is exactly one line saying want, with no trace of a
// panic or a stack.
func agentOneLine(t *testing.T, stderr, want string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want one line containing %q", stderr, want)
	}
	for _, bad := range []string{"panic", "goroutine", ".go:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr has %q: %s", bad, stderr)
		}
	}
}

// TestAgentNoDriver: without libnvidia-ml the agent says so on one line and
// exits 2, in a dry run and on a node alike, before it looks for a cluster.
func TestAgentNoDriver(t *testing.T) {
	const missing = "/nonexistent/libnvidia-ml.so.1"
	for name, args := range map[string][]string{
		"dry run": {"--dry-run", "--once", "--nvml-library", missing},
		"on node": {"--node", "gpu-1", "--nvml-library", missing},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runAgentCLI(t, map[string]string{"KUBECONFIG": "/nonexistent/kubeconfig"}, args...)
			if code != exitUsage || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			agentOneLine(t, stderr, "allot-agent: loading "+missing+": no NVIDIA driver on this node (or it is not mounted into the container)")
		})
	}
}

// TestAgentDefaultLibrary runs the agent with the default NVML library. This
// machine has no NVIDIA driver, which dlopen confirms independently: then the
// agent must fail on one line with exit 2. On a machine with the driver it
// must get past loading it.
func TestAgentDefaultLibrary(t *testing.T) {
	loadable := dl.New(agent.Library, dl.RTLD_LAZY|dl.RTLD_GLOBAL).Open() == nil
	code, _, stderr := runAgentCLI(t, nil, "--dry-run", "--once", "--node", "n1")
	if loadable {
		if strings.Contains(stderr, "no NVIDIA driver") {
			t.Errorf("the driver loads here, yet the agent says %q", stderr)
		}
		return
	}
	if code != exitUsage {
		t.Errorf("exit %d, want 2", code)
	}
	agentOneLine(t, stderr, "allot-agent: loading libnvidia-ml.so.1: no NVIDIA driver on this node")
}

func TestAgentUsage(t *testing.T) {
	overrides := agentFile(t, "xids.yaml", "xids:\n  \"43\": {class: hardware, fatl: true}\n")
	huge := agentFile(t, "huge.yaml", "xids: {}\n"+strings.Repeat("#", maxOverridesBytes))
	tests := map[string]struct {
		args []string
		want string
	}{
		"no node":             {[]string{}, "agent needs --node or NODE_NAME"},
		"once without dry":    {[]string{"--node", "n1", "--once"}, "--once needs --dry-run"},
		"bad output":          {[]string{"--dry-run", "-o", "yaml"}, "-o yaml: want text or json"},
		"zero interval":       {[]string{"--dry-run", "--interval", "0s"}, "--interval 0s: must be positive"},
		"bad throttle reason": {[]string{"--dry-run", "--throttle-faults", "HwSlowdown,Hot"}, `--throttle-faults: throttle reason "Hot"`},
		"negative recovery":   {[]string{"--dry-run", "--recover-after", "-1m"}, "recover-after -1m0s: must not be negative"},
		"too many NVLinks":    {[]string{"--dry-run", "--nvlinks-per-gpu", "19"}, "nvlinks per GPU 19"},
		"missing overrides":   {[]string{"--dry-run", "--xid-overrides", overrides + ".missing"}, "reading the XID overrides: "},
		"bad overrides":       {[]string{"--dry-run", "--xid-overrides", overrides}, overrides + ": "},
		"huge overrides":      {[]string{"--dry-run", "--xid-overrides", huge}, huge + ": larger than 1048576 bytes"},
		"unknown flag":        {[]string{"--gpus", "8"}, "unknown flag: --gpus"},
		"argument":            {[]string{"gpu-1"}, `unknown command "gpu-1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := nvmltest.New()
			withMockNVML(t, srv)
			code, stdout, stderr := runAgentCLI(t, map[string]string{"NODE_NAME": ""}, tc.args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.want)
			}
			if n := len(srv.InitCalls()); n != 0 {
				t.Errorf("NVML was opened %d times for bad usage", n)
			}
		})
	}
}

// TestAgentDryRunOnce: one poll of a simulated DGX A100, printed; the exit
// status says whether every check passed.
func TestAgentDryRunOnce(t *testing.T) {
	t.Run("healthy", func(t *testing.T) {
		withMockNVML(t, nvmltest.New())
		code, stdout, stderr := runAgentCLI(t, nil, "--dry-run", "--once", "--node", "gpu-1", "--boot-id-file", agentBootID(t))
		if code != exitOK || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		for _, want := range []string{
			"node gpu-1 at 2026-01-02T03:00:00Z: GPUHealthy=True (AllChecksPassed), 8 of 8 GPUs healthy",
			"would write: condition GPUHealthy=True reason AllChecksPassed\n",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
		if !regexp.MustCompile(`(?m)^7\s+GPU-a100-7(\s+ok){8}$`).MatchString(stdout) {
			t.Errorf("no row of eight passed checks for GPU 7:\n%s", stdout)
		}
	})
	t.Run("row remapping failed", func(t *testing.T) {
		srv := nvmltest.New()
		srv.Edit(5, func(g *nvmltest.GPU) { g.RemapFailed, g.RemapUncorrected = true, 2 })
		withMockNVML(t, srv)
		code, stdout, _ := runAgentCLI(t, map[string]string{"NODE_NAME": "gpu-2"}, "--dry-run", "--once", "-o", "json", "--boot-id-file", agentBootID(t))
		if code != exitFindings {
			t.Errorf("exit %d, want 1", code)
		}
		var f agent.Finding
		if err := json.Unmarshal([]byte(stdout), &f); err != nil {
			t.Fatalf("stdout is not one JSON finding: %v\n%s", err, stdout)
		}
		want := agent.Would{Condition: "False", Reason: "RowRemap", HealthyGPUs: "7", Taint: "allot.dev/gpu-fault:NoSchedule"}
		if f.Node != "gpu-2" || f.Would != want || !f.Report.Fatal || !f.Report.Time.Equal(agentT0) {
			t.Errorf("finding %s: would %+v, want %+v", f.Node, f.Would, want)
		}
	})
	t.Run("thresholds from flags", func(t *testing.T) {
		withMockNVML(t, nvmltest.New())
		// 55 C is over --max-temperature 50; with no debounce it counts at once.
		code, stdout, _ := runAgentCLI(t, nil, "--dry-run", "--once", "--node", "n", "--boot-id-file", agentBootID(t), "--max-temperature", "50", "--debounce", "0s")
		if code != exitFindings || !strings.Contains(stdout, "GPU 0 Temperature: 55 C, at or above 50 C (Active)") {
			t.Errorf("exit %d:\n%s", code, stdout)
		}
		// The same with the default debounce: failing, not yet counted.
		code, stdout, _ = runAgentCLI(t, nil, "--dry-run", "--once", "--node", "n", "--boot-id-file", agentBootID(t), "--max-temperature", "50")
		if code != exitOK || !strings.Contains(stdout, "GPU 0 Temperature: 55 C, at or above 50 C (Pending)") {
			t.Errorf("exit %d:\n%s", code, stdout)
		}
	})
	t.Run("expected GPUs", func(t *testing.T) {
		withMockNVML(t, nvmltest.New())
		code, stdout, _ := runAgentCLI(t, nil, "--dry-run", "--once", "--node", "n", "--boot-id-file", agentBootID(t), "--expected-gpus", "9")
		if code != exitFindings || !strings.Contains(stdout, "node GPUCount: Fail 8 of 9 GPUs visible: a GPU fell off the bus") {
			t.Errorf("exit %d:\n%s", code, stdout)
		}
	})
	t.Run("unreadable boot ID", func(t *testing.T) {
		withMockNVML(t, nvmltest.New())
		code, _, stderr := runAgentCLI(t, nil, "--dry-run", "--once", "--node", "n", "--boot-id-file", "/nonexistent/boot_id")
		if code != exitUsage {
			t.Errorf("exit %d, want 2", code)
		}
		agentOneLine(t, stderr, "reading the boot ID: ")
	})
}

// TestAgentDryRunWatches: a running dry run prints a poll at once and another
// as soon as an XID arrives through the event set, classified with the
// cluster's overrides (XID 43 is the hardware's fault on onprem-a), and stops
// with its context.
func TestAgentDryRunWatches(t *testing.T) {
	overrides := agentFile(t, "xids.yaml", onpremOverrides)
	srv := nvmltest.New()
	withMockNVML(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int)
	go func() {
		done <- runContext(ctx, []string{"--dry-run", "--node", "gpu-3", "--boot-id-file", agentBootID(t), "--interval", "1h",
			"--xid-overrides", overrides, "--cluster", "onprem-a"}, &stdout, &stderr)
	}()
	printed := func(want string) func() error {
		return func() error {
			if !strings.Contains(stdout.String(), want) {
				return fmt.Errorf("stdout:\n%s", stdout.String())
			}
			return nil
		}
	}
	waitFor(t, "the first poll", printed("GPUHealthy=True (AllChecksPassed)"))
	srv.XID(4, 43)
	waitFor(t, "XID 43", printed("XID 43 on GPU 4: GPU stopped processing (hardware)"))
	if !strings.Contains(stdout.String(), "GPUHealthy=False (XID), 7 of 8 GPUs healthy") {
		t.Errorf("the overridden XID did not mark GPU 4:\n%s", stdout.String())
	}
	agentStops(t, cancel, done, &stderr)
	if n := strings.Count(stdout.String(), "would write:"); n != 2 {
		t.Errorf("%d polls printed, want 2 (start, XID)", n)
	}
}

// agentStops cancels a running agent and expects it to exit 0 soon.
func agentStops(t *testing.T, cancel func(), code <-chan int, stderr *testenv.SyncBuffer) {
	t.Helper()
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d; log:\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop with its context")
	}
}

// TestAgentOnNode runs allot agent as the DaemonSet does, against a real API
// server, as the service account of config/agent/rbac.yaml, with only its rules, on a simulated DGX A100:
// the node turns healthy, an XID the cluster's overrides make hardware marks a
// GPU, a fatal XID taints the node, /metrics says so, and it stops cleanly.
func TestAgentOnNode(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	testenv.ApplyManifests(t, c, "config/agent/rbac.yaml", "config/manager/rbac_binding.yaml")
	scraper := testenv.ServiceAccountToken(t, c, "allot-system", "prometheus", "allot-metrics-reader")
	stranger := testenv.ServiceAccountToken(t, c, "allot-system", "stranger", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfigAs(kubeconfig, "system:serviceaccount:allot-system:allot-agent"); err != nil {
		t.Fatal(err)
	}
	const name = "gpu-7"
	n, err := testenv.CreateNode(ctx, c, name, 8, map[string]string{contract.LabelCluster: "onprem-a"})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.BootID = "boot-1"
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	overrides := agentFile(t, "xids.yaml", onpremOverrides)
	srv := nvmltest.New()
	withMockNVML(t, srv)

	metrics, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stderr testenv.SyncBuffer
	code := make(chan int, 1)
	go func() {
		code <- runContext(runCtx, []string{"--kubeconfig", kubeconfig, "--node", name, "--interval", "200ms",
			"--metrics-bind-address", metrics, "--xid-overrides", overrides}, io.Discard, &stderr)
	}()

	node := func() (*corev1.Node, corev1.NodeCondition) {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == nodestate.ConditionGPUHealthy {
				return &n, cond
			}
		}
		return &n, corev1.NodeCondition{}
	}
	waitFor(t, "GPUHealthy=True", func() error {
		if _, cond := node(); cond.Status != corev1.ConditionTrue {
			return fmt.Errorf("condition %+v; agent log:\n%s", cond, stderr.String())
		}
		return nil
	})

	srv.XID(2, 43) // hardware on onprem-a, not fatal
	waitFor(t, "XID 43 marks GPU 2", func() error {
		n, cond := node()
		if cond.Status != corev1.ConditionFalse || cond.Reason != "XID" || n.Annotations[nodestate.AnnotationHealthyGPUs] != "7" {
			return fmt.Errorf("condition %+v, annotations %v", cond, n.Annotations)
		}
		return nil
	})
	if n, _ := node(); len(n.Spec.Taints) != 0 {
		t.Errorf("a non-fatal XID tainted the node: %+v", n.Spec.Taints)
	}

	srv.XID(3, 79)
	waitFor(t, "XID 79 taints the node", func() error {
		n, _ := node()
		if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != nodestate.TaintGPUFault || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule ||
			n.Annotations[nodestate.AnnotationHealthyGPUs] != "6" {
			return fmt.Errorf("taints %+v, annotations %v", n.Spec.Taints, n.Annotations)
		}
		return nil
	})

	want := map[string]float64{
		`allot_agent_healthy_gpus{node="gpu-7"}`:                               6,
		`allot_agent_gpus{node="gpu-7"}`:                                       8,
		`allot_agent_node_gpu_healthy{node="gpu-7"}`:                           0,
		`allot_agent_node_gpu_fatal{node="gpu-7"}`:                             1,
		`allot_agent_gpu_check_healthy{check="XID",gpu="3",node="gpu-7"}`:      0,
		`allot_agent_gpu_check_healthy{check="ECC",gpu="3",node="gpu-7"}`:      1,
		`allot_agent_xid_errors_total{class="hardware",node="gpu-7",xid="43"}`: 1,
		`allot_agent_xid_errors_total{class="hardware",node="gpu-7",xid="79"}`: 1,
		`allot_agent_poll_errors_total{node="gpu-7"}`:                          0,
	}
	got := scrapeAgent(t, "https://"+metrics+"/metrics", scraper)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}

	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("the agent logged errors:\n%s", stderr.String())
	}
	// Metrics name the node and its faults: only for scrapers allowed /metrics
	// (the refused scrapes are logged as errors, so after the check above).
	testenv.MetricsRefused(t, "https://"+metrics+"/metrics", stranger)
	agentStops(t, cancel, code, &stderr)
}

// scrapeAgent fetches url with token and parses the text exposition: series -> value.
func scrapeAgent(t *testing.T, url, token string) map[string]float64 {
	t.Helper()
	resp, err := testenv.Scrape(url, token)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() { // sorted by name
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// runAgentCLI runs the agent with args and env and returns its exit code,
// stdout and stderr.
func runAgentCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code := runContext(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, f)
}

// The arguments of the agent's DaemonSet are flags allot-agent takes.
func TestDaemonSetArgs(t *testing.T) {
	const file = "config/agent/daemonset.yaml"
	tmpl := testenv.PodTemplate(t, file)
	if img := tmpl.Spec.Containers[0].Image; !strings.Contains(img, "/allot-agent:") {
		t.Errorf("%s: image %q, want allot-agent's", file, img)
	}
	if err := newAgentCommand().ParseFlags(tmpl.Spec.Containers[0].Args); err != nil {
		t.Errorf("%s: %v", file, err)
	}
}
