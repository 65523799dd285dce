package runner

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/scheduler"
)

// statusLoop refreshes the metrics and the Teams' status every StatusInterval
// until ctx ends, and says on each Team how many of its pods' events were held
// back.
func (r *Runner) statusLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.StatusInterval)
	defer t.Stop()
	for {
		r.publishStatus(ctx)
		r.summarizeHeldEvents()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publishStatus takes the core's usage under the lock, then sets the gauges and
// patches each Team whose status changed.
func (r *Runner) publishStatus(ctx context.Context) {
	r.mu.Lock()
	var usage []scheduler.TeamUsage
	if r.core != nil {
		usage = r.core.Usage()
	}
	teams := maps.Clone(r.st.teams)
	quotaGen, coreErr := maps.Clone(r.quotaGen), r.coreErr
	// Metered up to a whole second: the Team's meteredAt keeps seconds, and
	// a scheduler taking over meters from it (not a second is counted twice).
	now := r.opts.Now().Truncate(time.Second)
	metered := r.meterAll(now)
	type poolHealth struct {
		flavor             string
		healthy, unhealthy int
		gpus               int64
	}
	pools := map[string]*poolHealth{}
	for name, n := range r.st.nodes {
		pool := n.Labels[contract.LabelPool]
		if pool == "" {
			continue
		}
		m, ok := r.model(name)
		if !ok {
			continue
		}
		ph := pools[pool]
		if ph == nil {
			ph = &poolHealth{flavor: string(m.spec.Flavor)}
			pools[pool] = ph
		}
		if m.spec.Unhealthy || !m.graceEnds.IsZero() {
			ph.unhealthy++
		} else {
			ph.healthy++
			ph.gpus += m.spec.GPUs - m.faulty
		}
	}
	r.mu.Unlock()

	for _, g := range []interface{ Reset() }{metricQuota, metricUsed, metricBorrowed, metricLent, metricPending, metricAdmitted, metricPoolNodes, metricPoolHealthyGPUs} {
		g.Reset()
	}
	for pool, ph := range pools {
		metricPoolNodes.WithLabelValues(pool, ph.flavor, "healthy").Set(float64(ph.healthy))
		metricPoolNodes.WithLabelValues(pool, ph.flavor, "unhealthy").Set(float64(ph.unhealthy))
		metricPoolHealthyGPUs.WithLabelValues(pool, ph.flavor).Set(float64(ph.gpus))
	}
	for _, u := range usage {
		team := string(u.Team)
		for _, f := range u.Flavors {
			fl := string(f.Flavor)
			metricQuota.WithLabelValues(team, fl).Set(float64(f.Nominal))
			metricUsed.WithLabelValues(team, fl).Set(float64(f.Used))
			metricBorrowed.WithLabelValues(team, fl).Set(float64(f.Borrowed))
			metricLent.WithLabelValues(team, fl).Set(float64(f.Lent))
		}
		var pending int64
		for tier, n := range u.Pending {
			metricPending.WithLabelValues(team, string(tier)).Set(float64(n))
			pending += n
		}
		metricAdmitted.WithLabelValues(team).Set(float64(u.Admitted))

		obj := teams[team]
		if obj == nil {
			continue
		}
		want := allotv1.TeamStatus{CommonStatus: quotaStatus(obj, quotaGen[team], coreErr), PendingWorkloads: pending, AdmittedWorkloads: u.Admitted,
			Metered: metered[team], MeteredAt: obj.Status.MeteredAt}
		if !slices.Equal(want.Metered, obj.Status.Metered) {
			want.MeteredAt = meteredAt(now)
		}
		for _, f := range u.Flavors {
			want.Flavors = append(want.Flavors, allotv1.FlavorUsage{Flavor: string(f.Flavor), UsedGPUs: int64(f.Used), BorrowedGPUs: int64(f.Borrowed), LentGPUs: int64(f.Lent)})
		}
		slices.SortFunc(want.Flavors, func(a, b allotv1.FlavorUsage) int { return cmp.Compare(a.Flavor, b.Flavor) })
		if teamStatusEqual(obj.Status, want) {
			continue
		}
		patched := obj.DeepCopy()
		patched.Status = want
		if err := r.client.Status().Patch(ctx, patched, client.MergeFrom(obj)); err != nil && !apierrors.IsNotFound(err) {
			r.log.Error(err, "writing team status", "team", team)
		}
	}
}

// Reasons of a Team's QuotaApplied condition.
const (
	ReasonQuotaInForce = "QuotaInForce"
	ReasonQuotaPending = "QuotaPending"
	ReasonQuotaRefused = "QuotaRefused"
)

// quotaStatus says whether the Team's current spec is the quota the scheduler
// enforces: QuotaApplied, with the generation in force as observedGeneration.
func quotaStatus(t *allotv1.Team, gen int64, coreErr error) allotv1.CommonStatus {
	obj := t.DeepCopy()
	switch {
	case gen == t.Generation && coreErr == nil:
		conditions.MarkTrue(obj, allotv1.QuotaAppliedCondition, ReasonQuotaInForce, "the scheduler enforces generation %d of this quota", gen)
		obj.Status.ObservedGeneration = gen
	case coreErr != nil:
		conditions.MarkFalse(obj, allotv1.QuotaAppliedCondition, ReasonQuotaRefused, "%s",
			apilimits.Condition(fmt.Sprintf("the quota objects were refused, generation %d stays in force: %v", gen, coreErr)))
	default:
		conditions.MarkFalse(obj, allotv1.QuotaAppliedCondition, ReasonQuotaPending, "generation %d is not yet in force (%d is)", t.Generation, gen)
	}
	return obj.Status.CommonStatus
}

func teamStatusEqual(a, b allotv1.TeamStatus) bool {
	ca, cb := conditions.Get(&allotv1.Team{Status: a}, allotv1.QuotaAppliedCondition), conditions.Get(&allotv1.Team{Status: b}, allotv1.QuotaAppliedCondition)
	if (ca == nil) != (cb == nil) || ca != nil && (ca.Status != cb.Status || ca.Reason != cb.Reason || ca.Message != cb.Message) ||
		a.ObservedGeneration != b.ObservedGeneration {
		return false
	}
	return a.PendingWorkloads == b.PendingWorkloads && a.AdmittedWorkloads == b.AdmittedWorkloads &&
		slices.Equal(a.Flavors, b.Flavors) && slices.Equal(a.Metered, b.Metered)
}
