package capacity

import (
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/prometheus/client_golang/prometheus"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/internal/promreg"
	"github.com/allot-dev/allot/planner"
)

// Metrics are what the capacity reconciler exports. A nil *Metrics records
// nothing.
type Metrics struct {
	duration *prometheus.HistogramVec
	ready    *prometheus.GaugeVec
	errors   *prometheus.GaugeVec
	nodes    *prometheus.GaugeVec
	cost     *prometheus.GaugeVec
	quota    *prometheus.GaugeVec
}

// NewMetrics registers the metrics on reg; set up again in one process, it
// shares the metrics registered first.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "allot_capacity_reconcile_duration_seconds",
			Help:    "Time to reconcile a CapacitySource: fetch, validate, plan and apply, by result (applied, stalled, failed, suspended).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"namespace", "name", "result"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_capacity_source_ready",
			Help: "1 when the CapacitySource's last revision is applied (Ready=True), else 0.",
		}, []string{"namespace", "name"}),
		errors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_capacity_source_findings",
			Help: "Findings of the CapacitySource's last attempted revision, by severity.",
		}, []string{"namespace", "name", "severity"}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_plan_pool_nodes_target",
			Help: "Nodes the applied plan sizes each pool to.",
		}, []string{"namespace", "name", "pool", "cluster", "flavor"}),
		cost: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_plan_pool_monthly_cost_usd",
			Help: "Monthly cost of each pool at its planned size, in USD.",
		}, []string{"namespace", "name", "pool", "cluster", "flavor"}),
		quota: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_plan_flavor_quota_gpus",
			Help: "Sum of the teams' nominal quotas per flavor in the applied plan.",
		}, []string{"namespace", "name", "flavor"}),
	}
	m.duration = promreg.Register(reg, m.duration)
	for _, g := range []**prometheus.GaugeVec{&m.ready, &m.errors, &m.nodes, &m.cost, &m.quota} {
		*g = promreg.Register(reg, *g)
	}
	return m
}

func (m *Metrics) observe(src *allotv1.CapacitySource, d time.Duration) {
	if m == nil {
		return
	}
	result := "applied"
	switch {
	case src.Spec.Suspend:
		result = "suspended"
	case conditions.IsStalled(src):
		result = "stalled"
	case !conditions.IsReady(src):
		result = "failed"
	}
	m.duration.WithLabelValues(src.Namespace, src.Name, result).Observe(d.Seconds())
	ready := 0.0
	if conditions.IsReady(src) {
		ready = 1
	}
	m.ready.WithLabelValues(src.Namespace, src.Name).Set(ready)
	counts := map[string]float64{"error": 0, "warning": 0}
	for _, f := range src.Status.Findings {
		counts[f.Severity]++
	}
	for sev, n := range counts {
		m.errors.WithLabelValues(src.Namespace, src.Name, sev).Set(n)
	}
}

// plan records the applied plan of one source (another source's stay).
func (m *Metrics) plan(src *allotv1.CapacitySource, p *planner.Plan) {
	if m == nil {
		return
	}
	mine := prometheus.Labels{"namespace": src.Namespace, "name": src.Name}
	m.nodes.DeletePartialMatch(mine)
	m.cost.DeletePartialMatch(mine)
	m.quota.DeletePartialMatch(mine)
	for _, pp := range p.Pools {
		m.nodes.WithLabelValues(src.Namespace, src.Name, string(pp.Pool), string(pp.Cluster), string(pp.Flavor)).Set(float64(pp.NodesTarget))
		usd := pp.MonthlyUSD.Float64()
		m.cost.WithLabelValues(src.Namespace, src.Name, string(pp.Pool), string(pp.Cluster), string(pp.Flavor)).Set(usd)
	}
	for _, f := range p.Flavors {
		m.quota.WithLabelValues(src.Namespace, src.Name, string(f.Flavor)).Set(float64(f.NominalGPUs))
	}
}
