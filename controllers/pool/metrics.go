package pool

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/internal/promreg"
)

// Metrics are what the Pool reconciler exports of repair and burst. A nil *Metrics
// records nothing.
type Metrics struct {
	replacements *prometheus.GaugeVec
	retired      *prometheus.GaugeVec
	actions      *prometheus.CounterVec
	burst        *prometheus.GaugeVec

	mu sync.Mutex
	// teams are the teams each pool's burst gauge has, to drop those gone.
	teams map[string][]string
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
			Help: "Repair and burst actions taken, by pool and action (ReplacementAdded, ReplacementReturned, NodeRetired, NodeFlapping, ReplacementAtMax, BurstScaledUp, BurstScaledDown, BurstAtMax).",
		}, []string{"pool", "action"}),
		burst: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "allot_pool_burst_nodes",
			Help: "Burst nodes a pool holds beyond its planned size for pending gangs (spec.burst), by the team whose gangs caused them (team \"\": nobody's, always present); times the pool's GPUs per node and summed over time, the burst GPU-hours per team.",
		}, []string{"pool", "team"}),
		teams: map[string][]string{},
	}
	for _, g := range []**prometheus.GaugeVec{&m.replacements, &m.retired, &m.burst} {
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
	m.mu.Lock()
	defer m.mu.Unlock()
	now := []string{""}
	m.burst.WithLabelValues(pool, "").Set(0)
	for _, t := range st.BurstTeams {
		m.burst.WithLabelValues(pool, t.Team).Set(float64(t.Nodes))
		now = append(now, t.Team)
	}
	for _, t := range m.teams[pool] {
		if !slices.Contains(now, t) {
			m.burst.DeleteLabelValues(pool, t)
		}
	}
	m.teams[pool] = now
}

// forget drops the gauges of a pool without repair.
func (m *Metrics) forget(pool string) {
	if m == nil {
		return
	}
	m.replacements.DeleteLabelValues(pool)
	m.retired.DeleteLabelValues(pool, "true")
	m.retired.DeleteLabelValues(pool, "false")
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.teams[pool] {
		m.burst.DeleteLabelValues(pool, t)
	}
	delete(m.teams, pool)
}
