package scheduler

import (
	"math"

	"github.com/allot-dev/allot/scheduler/internal/quota"
)

// org is the organisation: its teams (by name, and in order), tiers and
// cohorts, and the teams of each cohort tree by its root, in team order.
type org struct {
	teams    map[TeamName]*team
	teamList []*team
	tiers    map[TierName]*tier
	cohorts  map[CohortName]*quota.Node
	trees    map[*quota.Node][]*team
}

// team is the scheduler's record of a Team.
type team struct {
	spec   Team
	q      *quota.Node
	weight float64
	share  float64
	// flavors are the flavors the team has a quota for, by preference.
	flavors []*flavorState
	tiers   map[TierName]bool
	queue   queue
	// running are the team's admitted workloads.
	running map[*workload]struct{}
	// floor are the failures of the running cycle of the team's workloads
	// with no placement constraint (see failsLike).
	floor []failure
	// runs are what skipRun learnt of the team's runs, by tier (id).
	runs []*runCache
	// victims are its running workloads of each flavor (by id) on each
	// view, in victim order, kept as they start and end (see victims.go).
	victims []flavorVictims
}

// reclaimable is what the team uses of flavor f that others may reclaim.
func (t *team) reclaimable(f int) GPUs { return t.q.R(f).Reclaimable() }

// charge adds a workload's GPUs of flavor f to its team.
func (s *Scheduler) charge(w *workload, f *flavorState, sign GPUs) {
	s.changed(f)
	chargeQuota(w, f, sign)
	w.team.share = s.shareOf(w.team)
}

// chargeQuota is charge but for the team's share, which only orders the
// walk: a tally (tally.go) charges and undoes every victim it tries within
// one search, leaving each share as it was.
func chargeQuota(w *workload, f *flavorState, sign GPUs) {
	t := w.team
	before := t.reclaimable(f.id)
	t.q.AddUsage(f.id, sign*w.GPUs())
	if w.tier.spec.BorrowOnly {
		t.q.R(f.id).BorrowOnly += sign * w.GPUs()
	}
	if w.tier.spec.Preemptible {
		t.q.R(f.id).Preemptible.Add(w.tier.spec.Priority, sign*w.GPUs())
	}
	t.q.AddReclaimable(f.id, t.reclaimable(f.id)-before)
}

// shareOf is the team's weighted dominant-resource share: the largest ratio of
// usage to nominal quota over its flavors, divided by its weight.
func (s *Scheduler) shareOf(t *team) float64 {
	var share float64
	for _, f := range t.flavors {
		r := t.q.R(f.id)
		if r.Usage == 0 {
			continue
		}
		share = math.Max(share, float64(r.Usage)/float64(max(r.Nominal, 1)))
	}
	return share / t.weight
}

// takesHeadroom says whether admitting w would take quota that the gang h,
// holding a reservation of several nodes of f, has drained toward it: w's
// team would go above its nominal (or w's tier is borrowOnly), in h's tree,
// and h's available quota would fall below the GPUs free on its reserved
// nodes. A team within its nominal is never held back.
func (s *Scheduler) takesHeadroom(w, h *workload, f *flavorState) bool {
	q := w.team.q
	if w.team == h.team && before(h, w) < 0 {
		// The gang's own team's later work does not take what it needs.
		q.AddUsage(f.id, w.GPUs())
		after := q.Available(f.id)
		q.AddUsage(f.id, -w.GPUs())
		return after < h.GPUs()
	}
	if len(h.reserved) < 2 {
		return false
	}
	r := q.R(f.id)
	if !w.tier.spec.BorrowOnly && r.Usage-r.BorrowOnly+w.GPUs() <= r.Nominal {
		return false
	}
	if q.Root() != h.team.q.Root() {
		return false
	}
	held := min(h.GPUs(), s.drainedFree(h.reserved, h.spec.GPUsPerPod))
	if held == 0 {
		return false
	}
	q.AddUsage(f.id, w.GPUs())
	after := h.team.q.Available(f.id)
	q.AddUsage(f.id, -w.GPUs())
	return after < held
}

// noteBorrowFirst records w, which did not fit, as its cohort's borrow-first
// gang if it qualifies (a gang of several pods that has waited
// Options.BorrowFirstAfter for the cohort's idle quota) and waited longer
// than the one recorded; a recorded gang that no longer qualifies is dropped.
func (s *Scheduler) noteBorrowFirst(w *workload) {
	if s.opts.BorrowFirstAfter <= 0 {
		return
	}
	root := w.team.q.Root()
	h := s.borrowFirst[root]
	ok := w.spec.Pods > 1 && w.reason.Code == ReasonCohortExhausted && unixNanos(s.now)-w.since >= int64(s.opts.BorrowFirstAfter)
	switch {
	case h == w && !ok:
		delete(s.borrowFirst, root)
	case ok && (h == nil || h.state != statePending || w.since < h.since):
		s.borrowFirst[root] = w
	}
}

// borrowsAhead says whether admitting w would borrow the cohort quota that
// the borrow-first gang h of its tree waits for: w is of another team, smaller
// than h and submitted after it, and takes its team above its nominal (or its
// tier is borrowOnly). A team within its nominal is never held back.
func (s *Scheduler) borrowsAhead(w *workload, f *flavorState) (*workload, bool) {
	if s.opts.BorrowFirstAfter <= 0 {
		return nil, false
	}
	h := s.borrowFirst[w.team.q.Root()]
	if h == nil || h == w || h.state != statePending || h.team == w.team || w.GPUs() >= h.GPUs() || !h.spec.Submitted.Before(w.spec.Submitted) {
		return nil, false
	}
	r := w.team.q.R(f.id)
	return h, w.tier.spec.BorrowOnly || r.Usage-r.BorrowOnly+w.GPUs() > r.Nominal
}

// quotaCheck says whether w fits the quota of flavor f, and why not.
func (s *Scheduler) quotaCheck(w *workload, f *flavorState) (PendingReason, bool) {
	q := w.team.q
	need := w.GPUs()
	avail := q.Available(f.id)
	if avail >= need {
		if h := f.res; h != nil && h != w && s.takesHeadroom(w, h, f) {
			return PendingReason{Code: ReasonReserved, Flavor: f.name, Requested: need, Available: avail, Holder: h.spec.ID}, false
		}
		if h, ahead := s.borrowsAhead(w, f); ahead {
			return PendingReason{Code: ReasonReserved, Flavor: f.name, Requested: need, Available: avail, Holder: h.spec.ID}, false
		}
		return PendingReason{}, true
	}
	lim := q.Limit(f.id)
	r := PendingReason{Flavor: f.name, Requested: need}
	if lim != quota.Unlimited && q.R(f.id).Usage+need > lim {
		r.Code, r.Available, r.Limit = ReasonOverQuota, max(0, lim-q.R(f.id).Usage), lim
		return r, false
	}
	r.Code, r.Available = ReasonCohortExhausted, max(0, avail)
	if lim != quota.Unlimited {
		r.Limit = lim
	}
	return r, false
}
