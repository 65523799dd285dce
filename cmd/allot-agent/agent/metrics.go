package agent

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allot-dev/allot/fleet/health"
)

// Metrics are the agent's Prometheus collectors, for one node.
type Metrics struct {
	node        string
	check       *prometheus.GaugeVec
	healthy     *prometheus.GaugeVec
	gpus        *prometheus.GaugeVec
	healthyGPUs *prometheus.GaugeVec
	fatal       *prometheus.GaugeVec
	xids        *prometheus.CounterVec
	pollErrors  *prometheus.CounterVec

	mu   sync.Mutex
	seen map[[2]string]bool // (gpu, check) series set last time
}

// NewMetrics registers the agent's collectors on reg for node.
func NewMetrics(reg prometheus.Registerer, node string) (*Metrics, error) {
	m := &Metrics{
		node: node,
		check: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_agent_gpu_check_healthy",
			Help: "1 when the check passes (or does not apply) on the GPU, 0 while it counts as a fault; gpu is the NVML index, -1 for node-level checks."},
			[]string{"node", "gpu", "check"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_agent_node_gpu_healthy",
			Help: "1 when every GPU check of the node passes (GPUHealthy=True), else 0."}, []string{"node"}),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_agent_gpus",
			Help: "GPUs the node should have (advertised, or else seen by NVML)."}, []string{"node"}),
		healthyGPUs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_agent_healthy_gpus",
			Help: "GPUs of the node without a counted fault."}, []string{"node"}),
		fatal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_agent_node_gpu_fatal",
			Help: "1 while the node has a fatal GPU fault (it carries the allot.dev/gpu-fault taint), else 0."}, []string{"node"}),
		xids: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_agent_xid_errors_total",
			Help: "XID errors NVML reported, by code and class (application or hardware)."}, []string{"node", "xid", "class"}),
		pollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_agent_poll_errors_total",
			Help: "Polls that could not read or write the node."}, []string{"node"}),
		seen: map[[2]string]bool{},
	}
	for _, c := range []prometheus.Collector{m.check, m.healthy, m.gpus, m.healthyGPUs, m.fatal, m.xids, m.pollErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the agent metrics: %w", err)
		}
	}
	m.pollErrors.WithLabelValues(node)
	return m, nil
}

func (m *Metrics) pollFailed() {
	if m != nil {
		m.pollErrors.WithLabelValues(m.node).Inc()
	}
}

func (m *Metrics) observe(rep health.Report) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bad := map[[2]string]bool{}
	for _, f := range rep.Faults {
		if f.Counts() {
			bad[[2]string{strconv.Itoa(f.GPU), string(f.Check)}] = true
		}
	}
	now := map[[2]string]bool{}
	for _, r := range rep.Results {
		now[[2]string{strconv.Itoa(r.GPU), string(r.Check)}] = true
	}
	for k := range bad {
		now[k] = true
	}
	for k := range now {
		v := 1.0
		if bad[k] {
			v = 0
		}
		m.check.WithLabelValues(m.node, k[0], string(k[1])).Set(v)
	}
	for k := range m.seen {
		if !now[k] {
			m.check.DeleteLabelValues(m.node, k[0], k[1])
		}
	}
	m.seen = now
	m.healthy.WithLabelValues(m.node).Set(b2f(rep.Healthy))
	m.fatal.WithLabelValues(m.node).Set(b2f(rep.Fatal))
	m.gpus.WithLabelValues(m.node).Set(float64(rep.GPUs))
	m.healthyGPUs.WithLabelValues(m.node).Set(float64(rep.HealthyGPUs))
	for _, x := range rep.XIDs {
		m.xids.WithLabelValues(m.node, strconv.FormatUint(x.Code, 10), string(x.Class)).Inc()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
