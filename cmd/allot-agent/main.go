// Command allot-agent is allot's GPU health agent, a DaemonSet on every GPU
// node: it reads the GPUs through NVML and publishes their health on its node
// (docs/cluster.md). It is the one part of allot that needs cgo (go-nvml loads
// libnvidia-ml at run time), so it is its own binary, image and Go module: the
// allot CLI and manager stay static and build with CGO_ENABLED=0.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/cmd/allot-agent/agent"
	"github.com/allot-dev/allot/fleet/health"
)

// agentWorld is what the agent verb reads the GPUs and the time through; tests
// replace them with go-nvml's mocks and a fixed clock.
var agentWorld = struct {
	nvml func(path string) nvml.Interface
	now  func() time.Time
}{
	nvml: func(path string) nvml.Interface { return nvml.New(nvml.WithLibraryPath(path)) },
	now:  time.Now,
}

// agentFlags are the agent verb's flags.
type agentFlags struct {
	node, cluster, output, xidOverrides, bootIDFile, library, metricsAddr string
	metricsSecure                                                         bool
	metricsCerts                                                          string
	throttleFaults, kubeconfig                                            string
	interval, debounce, recoverAfter, heartbeat                           time.Duration
	expectedGPUs, nvlinksPerGPU                                           int
	maxTemperature                                                        uint32
	dryRun, once                                                          bool
}

func newAgentCommand() *cobra.Command {
	var f agentFlags
	def := health.DefaultThresholds()
	c := &cobra.Command{
		Use:   "allot-agent",
		Short: "Per-node NVML GPU health agent (a DaemonSet); --dry-run prints what it finds",
		Long: `Check the GPUs of this node through NVML and publish their health on the node:
the GPUHealthy condition (the failing checks as its reason), the
allot.dev/healthy-gpus annotation, a NoSchedule allot.dev/gpu-fault taint for
fatal faults, and an Event for every change. XID errors are waited on through an
NVML event set; everything else is polled every --interval.

Checks per GPU: XID errors (application XIDs such as 13, 31, 43, 45 do not mark
the GPU; hardware XIDs do; --xid-overrides changes the table per cluster),
uncorrectable ECC errors, pending page retirement, pending or failed row
remapping, temperature, clock throttling, NVLink links down; per node: fewer GPUs
than expected. A GPU that cannot be read is unhealthy. A fault clears when it has
passed for --recover-after; a fatal one only when the node reboots.

--dry-run needs no cluster: it prints the findings on stdout instead of writing
the node, every poll, or once with --once.

Exit status: 0 ran (with --dry-run --once: every check passed), 1 with --dry-run
--once: a check failed, 2 bad usage, no NVIDIA driver, or the node cannot be read.`,
		Example: `  allot-agent --dry-run --once
  allot-agent --dry-run -o json --interval 10s
  NODE_NAME=gpu-17 allot-agent --xid-overrides /etc/allot/xids.yaml`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.node, "node", os.Getenv("NODE_NAME"), "the node to publish on (default $NODE_NAME; with --dry-run, the host name)")
	fl.StringVar(&f.cluster, "cluster", "", "cluster name for --xid-overrides (default: the node's allot.dev/cluster label)")
	fl.DurationVar(&f.interval, "interval", 30*time.Second, "time between polls (XID events are handled at once)")
	fl.IntVar(&f.expectedGPUs, "expected-gpus", 0, "GPUs the node should have (0: the node's nvidia.com/gpu capacity, or the most NVML listed this boot)")
	fl.Uint32Var(&f.maxTemperature, "max-temperature", def.MaxTemperatureC, "temperature in C at or above which a GPU is unhealthy (0: the GPU's own slowdown threshold)")
	fl.StringVar(&f.throttleFaults, "throttle-faults", joinReasons(def.ThrottleFaults), "clock throttle reasons that count as a fault, comma-separated")
	fl.DurationVar(&f.debounce, "debounce", def.Debounce[health.CheckTemperature], "how long temperature and throttling must fail before they count")
	fl.DurationVar(&f.recoverAfter, "recover-after", def.RecoverAfter, "how long a non-fatal fault must pass again before it clears")
	fl.IntVar(&f.nvlinksPerGPU, "nvlinks-per-gpu", 0, "NVLink links each GPU should have up (0: as many as were seen up this boot)")
	fl.StringVar(&f.xidOverrides, "xid-overrides", "", "YAML or JSON file of XID classification overrides, for all clusters and per cluster")
	fl.DurationVar(&f.heartbeat, "heartbeat", 5*time.Minute, "refresh the condition at least this often when nothing changes")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0: none)")
	fl.BoolVar(&f.metricsSecure, "metrics-secure", true, metricsSecureHelp)
	fl.StringVar(&f.metricsCerts, "metrics-cert-dir", "", metricsCertsHelp)
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the findings on stdout instead of writing the node; needs no cluster")
	fl.BoolVar(&f.once, "once", false, "with --dry-run: poll once and exit (1 when a check failed)")
	fl.StringVarP(&f.output, "output", "o", "text", "with --dry-run: text or json")
	fl.StringVar(&f.bootIDFile, "boot-id-file", "/proc/sys/kernel/random/boot_id", "with --dry-run: where the boot ID is read")
	fl.StringVar(&f.library, "nvml-library", agent.Library, "the NVML library to load")
	return c
}

func joinReasons(rs []health.ThrottleReason) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, ",")
}

// policy builds the health policy of the flags, without the XID table.
func (f agentFlags) policy() (health.Thresholds, error) {
	p := health.DefaultThresholds()
	p.MaxTemperatureC = f.maxTemperature
	p.RecoverAfter = f.recoverAfter
	p.NVLinksPerGPU = f.nvlinksPerGPU
	p.Debounce = map[health.Check]time.Duration{health.CheckTemperature: f.debounce, health.CheckThrottle: f.debounce}
	tf, err := health.ParseThrottleReasons(f.throttleFaults)
	if err != nil {
		return health.Thresholds{}, fmt.Errorf("--throttle-faults: %w", err)
	}
	p.ThrottleFaults = tf
	if err := p.Validate(); err != nil {
		return health.Thresholds{}, err
	}
	return p, nil
}

// check validates the flags that need no file and no cluster.
func (f agentFlags) check() error {
	switch {
	case f.output != "text" && f.output != "json":
		return fmt.Errorf("-o %s: want text or json", f.output)
	case f.interval <= 0:
		return fmt.Errorf("--interval %s: must be positive", f.interval)
	case f.heartbeat <= 0:
		return fmt.Errorf("--heartbeat %s: must be positive", f.heartbeat)
	case f.expectedGPUs < 0:
		return fmt.Errorf("--expected-gpus %d: must not be negative", f.expectedGPUs)
	case f.debounce < 0:
		return fmt.Errorf("--debounce %s: must not be negative", f.debounce)
	case f.once && !f.dryRun:
		return errors.New("--once needs --dry-run")
	case !f.dryRun && f.node == "":
		return errors.New("agent needs --node or NODE_NAME (or --dry-run)")
	}
	return nil
}

func runAgent(cmd *cobra.Command, f agentFlags) error {
	if err := f.check(); err != nil {
		return usageError{err}
	}
	p, err := f.policy()
	if err != nil {
		return usageError{err}
	}
	var overrides health.Overrides
	if f.xidOverrides != "" {
		b, err := readBounded(f.xidOverrides, maxOverridesBytes)
		if err != nil {
			return usageError{fmt.Errorf("reading the XID overrides: %w", err)}
		}
		if overrides, err = health.ParseOverrides(f.xidOverrides, b); err != nil {
			return usageError{err}
		}
	}

	// NVML first: on a node without a driver nothing else is worth doing.
	lib := agentWorld.nvml(f.library)
	closeLib, err := agent.Open(lib, f.library)
	if err != nil {
		return err
	}
	defer closeLib()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := logr.FromSlogHandler(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctx = logr.NewContext(ctx, log)

	if f.dryRun {
		return dryRunAgent(ctx, cmd.OutOrStdout(), lib, p, overrides, f)
	}
	return runNodeAgent(ctx, lib, p, overrides, f)
}

func dryRunAgent(ctx context.Context, out io.Writer, lib nvml.Interface, p health.Thresholds, o health.Overrides, f agentFlags) error {
	if f.node == "" {
		f.node, _ = os.Hostname()
	}
	p.XIDs = p.XIDs.With(o, f.cluster)
	pub := &agent.DryRun{Out: out, Node: f.node, JSON: f.output == "json", BootIDFile: f.bootIDFile}
	opts := agent.Options{Interval: f.interval, ExpectedGPUs: f.expectedGPUs, Now: agentWorld.now}
	if f.once {
		rep, err := agent.New(agent.NewReader(lib), nil, p, pub, opts).Poll(ctx)
		if err != nil {
			return err
		}
		if !rep.Healthy {
			return exitError{exitFindings}
		}
		return nil
	}
	w := watcher(ctx, lib)
	if w != nil {
		defer w.Close()
	}
	return agent.New(agent.NewReader(lib), w, p, pub, opts).Run(ctx)
}

// watcher returns an XID watcher of every GPU, or nil when NVML has no event
// set: the agent then polls only, and says so.
func watcher(ctx context.Context, lib nvml.Interface) *agent.Watcher {
	w, err := agent.NewWatcher(lib)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "XID events are not watched: polling only")
		return nil
	}
	return w
}

func runNodeAgent(ctx context.Context, lib nvml.Interface, p health.Thresholds, o health.Overrides, f agentFlags) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("node", f.node)
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("reaching the API server: %w", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("reaching the API server: %w", err)
	}
	pub := agent.NewNode(c, f.node, f.heartbeat, agentWorld.now)
	cluster := f.cluster
	if cluster == "" {
		if cluster, err = pub.Cluster(ctx); err != nil {
			return err
		}
	}
	p.XIDs = p.XIDs.With(o, cluster)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := agent.NewMetrics(reg, f.node)
	if err != nil {
		return err
	}
	if f.metricsAddr != "0" {
		if err := serveMetrics(ctx, log, f.metricsAddr, f.metricsSecure, f.metricsCerts, cfg, reg); err != nil {
			return err
		}
	}
	w := watcher(ctx, lib)
	if w != nil {
		defer w.Close()
	}
	log.Info("GPU health agent started", "cluster", cluster, "interval", f.interval)
	return agent.New(agent.NewReader(lib), w, p, pub, agent.Options{Interval: f.interval, ExpectedGPUs: f.expectedGPUs, Now: agentWorld.now, Metrics: m}).Run(logr.NewContext(ctx, log))
}

// maxOverridesBytes bounds the XID overrides file: a table of a few hundred
// codes per cluster is a few kilobytes.
const maxOverridesBytes = 1 << 20

// readBounded reads the file at path, refusing one larger than limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
