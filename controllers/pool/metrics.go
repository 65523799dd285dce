package pool

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/internal/promreg"
)

// Metrics are what the Pool reconciler exports of repair. A nil *Metrics
// records nothing.
type Metrics struct {
	replacements *prometheus.GaugeVec
	retired      *prometheus.GaugeVec
	actions      *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg; set up again in one process, it
// shares the metrics registered first.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		replacements: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_pool_replacement_nodes",
			Help: "Replacement nodes a pool holds beyond its planned size for lost nodes (spec.repair).",
		}, []string{"pool"}),
		retired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_pool_retired_nodes",
			Help: "Nodes of a pool retired by repair and still on record, by whether they are kept (cordoned for repair, or a gang still runs on them).",
		}, []string{"pool", "kept"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allot_pool_repair_actions_total",
			Help: "Repair actions taken, by pool and action (ReplacementAdded, ReplacementReturned, NodeRetired, NodeFlapping, ReplacementAtMax).",
		}, []string{"pool", "action"}),
	}
	for _, g := range []**prometheus.GaugeVec{&m.replacements, &m.retired} {
		*g = promreg.Register(reg, *g)
	}
	m.actions = promreg.Register(reg, m.actions)
	return m
}

// observe records a pool's repair state and the actions of one decision.
func (m *Metrics) observe(pool string, st elastic.State, d elastic.Decision) {
	if m == nil {
		return
	}
	m.replacements.WithLabelValues(pool).Set(float64(st.Replacements))
	m.retired.WithLabelValues(pool, "true").Set(float64(len(d.Kept)))
	m.retired.WithLabelValues(pool, "false").Set(float64(len(d.Retired) - len(d.Kept)))
	for _, a := range d.Actions {
		m.actions.WithLabelValues(pool, string(a.Kind)).Inc()
	}
}

// forget drops the gauges of a pool without repair.
func (m *Metrics) forget(pool string) {
	if m == nil {
		return
	}
	m.replacements.DeleteLabelValues(pool)
	m.retired.DeleteLabelValues(pool, "true")
	m.retired.DeleteLabelValues(pool, "false")
}
