package runner

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// meterKey is what GPU time is metered by.
type meterKey struct{ team, flavor, tier string }

// meter counts the GPU-seconds of the pods the runner bound, per team, flavor
// and tier. Totals start from what the Teams' status holds (written by this
// runner or by the leader before it), so they survive restarts and hand-overs:
// a pod already bound at a restart is metered from the Team's MeteredAt, the
// moment the totals were last brought up to date. The runner's mutex guards it.
type meter struct {
	total map[meterKey]float64
	// upTo is how far each bound pod has been metered.
	upTo map[types.UID]time.Time
	// seeded holds each Team's MeteredAt as first seen (zero: never metered).
	seeded map[string]time.Time
}

func newMeter() meter {
	return meter{total: map[meterKey]float64{}, upTo: map[types.UID]time.Time{}, seeded: map[string]time.Time{}}
}

// seed takes a Team's persisted totals the first time the runner sees it.
func (m *meter) seed(t *allotv1.Team) {
	if _, ok := m.seeded[t.Name]; ok {
		return
	}
	var at time.Time
	if t.Status.MeteredAt != nil {
		at = t.Status.MeteredAt.Time
	}
	m.seeded[t.Name] = at
	for _, u := range t.Status.Metered {
		m.total[meterKey{t.Name, u.Flavor, u.Tier}] += float64(u.GPUSeconds)
	}
}

// accrue meters a bound pod's GPUs up to until.
func (r *Runner) accrue(p *podInfo, until time.Time) {
	if p.node == "" || p.binding || p.gpus <= 0 {
		return
	}
	if !p.deletedAt.IsZero() && p.deletedAt.Before(until) {
		// Asked to go: charged to the end of its grace period (the deletion
		// timestamp, when the kubelet kills it), not while a finalizer or a
		// node that does not answer keeps the object.
		until = p.deletedAt
	}
	m := &r.meter
	from, ok := m.upTo[p.uid]
	if !ok {
		if p.scheduledAt.IsZero() {
			m.upTo[p.uid] = until // bound when, unknown: meter from now on
			return
		}
		from = p.scheduledAt
		if s := m.seeded[r.meterKeyOf(p).team]; s.After(from) {
			from = s // the time before was metered by the runner before this one
		}
	}
	if until.After(from) {
		m.total[r.meterKeyOf(p)] += float64(p.gpus) * until.Sub(from).Seconds()
		m.upTo[p.uid] = until
	} else if !ok {
		m.upTo[p.uid] = from
	}
}

// stopMetering meters a pod that finished or went, up to until, and forgets it.
func (r *Runner) stopMetering(p *podInfo, until time.Time) {
	r.accrue(p, until)
	delete(r.meter.upTo, p.uid)
}

// meterKeyOf is what a bound pod's GPU time is charged to: its gang's team
// and tier as the core took them; for a pod the core does not account for,
// its namespace's team and what it was bound as. Never a label written
// since: a label can be changed while the pod runs. Only a pod allot did not
// bind, in a namespace of no team, is charged to what its labels say.
func (r *Runner) meterKeyOf(p *podInfo) meterKey {
	k := meterKey{team: p.labels[contract.LabelTeam], tier: p.labels[contract.LabelTier]}
	if p.as != nil {
		k.team, k.tier = p.as.Team, p.as.Tier
	}
	if t, ok := r.namespaceTeam(p.ns); ok {
		k.team = t
	}
	if g := r.st.gangs[p.gang]; g != nil && g.spec.Team != "" && g.phase == admitted {
		k.team, k.tier = string(g.spec.Team), string(g.spec.Tier)
	}
	if m, ok := r.known[p.node]; ok {
		k.flavor = string(m.spec.Flavor)
	} else if nm, ok := r.model(p.node); ok {
		k.flavor = string(nm.spec.Flavor)
	}
	return k
}

// meterAll brings every bound pod's metering up to now and returns the totals
// per team, as Team status has them.
func (r *Runner) meterAll(now time.Time) map[string][]allotv1.MeteredUsage {
	for _, p := range r.st.pods {
		if !p.terminal {
			r.accrue(p, now)
		}
	}
	out := map[string][]allotv1.MeteredUsage{}
	for k, v := range r.meter.total {
		out[k.team] = append(out[k.team], allotv1.MeteredUsage{Flavor: k.flavor, Tier: k.tier, GPUSeconds: int64(v)})
	}
	for _, us := range out {
		slices.SortFunc(us, func(a, b allotv1.MeteredUsage) int {
			return cmp.Or(cmp.Compare(a.Flavor, b.Flavor), cmp.Compare(a.Tier, b.Tier))
		})
	}
	meterExport.set(maps.Clone(r.meter.total))
	return out
}

// meterCollector exports the metered totals as counters that continue across
// restarts (they start from the persisted totals, not from zero).
type meterCollector struct {
	mu    sync.Mutex
	total map[meterKey]float64
}

var (
	meterDesc = prometheus.NewDesc("allot_team_gpu_seconds_total",
		"GPU-seconds used by the pods allot bound, per team, flavor and tier; continues across restarts from the Teams' status.",
		[]string{"team", "flavor", "tier"}, nil)
	meterExport = &meterCollector{}
)

func (c *meterCollector) set(t map[meterKey]float64) {
	c.mu.Lock()
	c.total = t
	c.mu.Unlock()
}

// setTeam replaces team's totals by metered (none: the team is gone).
func (c *meterCollector) setTeam(team string, metered []allotv1.MeteredUsage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total == nil {
		c.total = map[meterKey]float64{}
	}
	maps.DeleteFunc(c.total, func(k meterKey, _ float64) bool { return k.team == team })
	for _, m := range metered {
		c.total[meterKey{team: team, flavor: m.Flavor, tier: m.Tier}] += float64(m.GPUSeconds)
	}
}

// SetTeamMetered exports a team's metered GPU time (its Team status, as
// another admitter's usage meters it: allot manager --scheduler=kueue) as
// allot_team_gpu_seconds_total, the counter the runner exports.
func SetTeamMetered(team string, metered []allotv1.MeteredUsage) { meterExport.setTeam(team, metered) }

// Describe implements prometheus.Collector.
func (c *meterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- meterDesc }

// Collect implements prometheus.Collector.
func (c *meterCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.total {
		ch <- prometheus.MustNewConstMetric(meterDesc, prometheus.CounterValue, v, k.team, k.flavor, k.tier)
	}
}

func meteredAt(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }
