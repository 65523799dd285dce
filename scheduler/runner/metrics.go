package runner

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// The scheduler's metrics, on the manager's /metrics. Labels are bounded: team,
// flavor, tier, pool, reason, result; never a pod or workload name.
var (
	metricBinds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allot_scheduler_binds_total",
		Help: "Pod bindings the scheduler made, by result (ok, error).",
	}, []string{"result"})
	metricSynced = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "allot_scheduler_cache_synced",
		Help: "1 once the scheduler's cache shows every pod the API has bound and it schedules; 0 while it waits (it schedules nothing meanwhile).",
	})
	metricCycle = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "allot_scheduler_cycle_duration_seconds",
		Help:    "Time the scheduling core takes for one cycle.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	metricWalks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allot_scheduler_walks_total",
		Help: "Cycles by how far they walked the queue: arrivals (only what was just submitted), whole, stopped (after --walk-depth workloads in a row that did not fit; the whole queue follows within --full-walk-every).",
	}, []string{"walk"})
	metricConsidered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "allot_scheduler_workloads_considered_total",
		Help: "Pending workloads the cycles considered.",
	})
	metricSkipped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "allot_scheduler_workloads_skipped_total",
		Help: "Pending workloads the cycles passed over without considering them: a team's work of one tier that provably could not start (they keep their last reasons).",
	})
	metricEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allot_scheduler_evictions_total",
		Help: "Gangs taken back whole other than by preemption, by reason (NodeUnhealthy, GangTimeout, ...).",
	}, []string{"reason"})
	metricUnbindFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "allot_scheduler_unbind_failures_total",
		Help: "Pods of a gang bound in part that could not be taken back (the API would not make a bare pod again, or refused to read or delete it): they stay bound, and their gang is tried again after a backoff that doubles up to 5m.",
	})
	metricEventsSuppressed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allot_scheduler_events_suppressed_total",
		Help: "Events of pods the scheduler held back to bound its events (budgets of 32 a team and 128 in all, refilled every 10s), by the team of the pod's namespace (\"\" for none) and event reason; each team's are summed up in an EventsSuppressed event on its Team.",
	}, []string{"team", "reason"})
	metricRebuilds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "allot_scheduler_core_rebuilds_total",
		Help: "Times the scheduling core was built again from the quota objects, nodes and pods (a quota change, a relabelled node running gangs); nodes added, removed or relabelled empty change it in place.",
	})
	metricPreemptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allot_scheduler_preemptions_total",
		Help: "Workloads preempted, by the rule that allowed it (ReclaimBorrowed, HigherTier, ReclaimForStarving).",
	}, []string{"reason"})
	metricWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "allot_scheduler_admission_wait_seconds",
		Help:    "Time from a workload's submission to its admission, by tier.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 18),
	}, []string{"tier"})
	metricQuota = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_quota_nominal_gpus",
		Help: "A team's nominal quota of a flavor, in GPUs.",
	}, []string{"team", "flavor"})
	metricUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_used_gpus",
		Help: "GPUs of a team's admitted workloads, per flavor.",
	}, []string{"team", "flavor"})
	metricBorrowed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_borrowed_gpus",
		Help: "GPUs a team uses that its cohort may reclaim (above nominal, or in borrowOnly tiers), per flavor.",
	}, []string{"team", "flavor"})
	metricLent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_lent_gpus",
		Help: "A team's idle nominal GPUs other teams of its cohort use, per flavor.",
	}, []string{"team", "flavor"})
	metricPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_pending_workloads",
		Help: "A team's workloads waiting for admission, per tier.",
	}, []string{"team", "tier"})
	metricAdmitted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_team_admitted_workloads",
		Help: "A team's admitted workloads that have not finished.",
	}, []string{"team"})
	metricPoolNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_pool_nodes",
		Help: "Nodes of a pool the scheduler sees, by health (healthy, unhealthy).",
	}, []string{"pool", "flavor", "health"})
	metricPoolHealthyGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "allot_pool_healthy_gpus",
		Help: "GPUs of a pool on healthy nodes that the agent reports healthy.",
	}, []string{"pool", "flavor"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(metricBinds, metricSynced, metricCycle, metricWalks, metricConsidered, metricSkipped, metricEvictions, metricUnbindFailures, metricEventsSuppressed, metricRebuilds, metricPreemptions, metricWait,
		metricQuota, metricUsed, metricBorrowed, metricLent, metricPending, metricAdmitted,
		metricPoolNodes, metricPoolHealthyGPUs, meterExport)
}

// SetTeamGauges sets a team's allot_team_* gauges from what another admitter
// reports (allot manager --scheduler=kueue, from the team's ClusterQueue):
// its nominal quota and use per flavor, its pending workloads (all tiers
// under tier "", which Kueue does not tell apart) and admitted ones. The
// dashboards and alerts then read the same series in either mode.
func SetTeamGauges(team string, nominal map[string]int64, flavors []allotv1.FlavorUsage, pending, admitted int64) {
	forgetTeamGauges(team)
	for f, n := range nominal {
		metricQuota.WithLabelValues(team, f).Set(float64(n))
	}
	for _, f := range flavors {
		metricUsed.WithLabelValues(team, f.Flavor).Set(float64(f.UsedGPUs))
		metricBorrowed.WithLabelValues(team, f.Flavor).Set(float64(f.BorrowedGPUs))
		metricLent.WithLabelValues(team, f.Flavor).Set(float64(f.LentGPUs))
	}
	metricPending.WithLabelValues(team, "").Set(float64(pending))
	metricAdmitted.WithLabelValues(team).Set(float64(admitted))
}

// forgetTeamGauges drops a team's allot_team_* gauges.
func forgetTeamGauges(team string) {
	for _, g := range []*prometheus.GaugeVec{metricQuota, metricUsed, metricBorrowed, metricLent, metricPending, metricAdmitted} {
		g.DeletePartialMatch(prometheus.Labels{"team": team})
	}
}

// ForgetTeam drops every allot_team_* series of a team removed, its metered
// GPU time too.
func ForgetTeam(team string) {
	forgetTeamGauges(team)
	meterExport.setTeam(team, nil)
}
