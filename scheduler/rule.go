package scheduler

// Who may take from whom. A preemption search (preempt.go) evicts running
// workloads so that a pending one fits, and only these:
//
//   - A team within its nominal quota reclaims what the other teams of its
//     cohort borrow: a borrowing team's work above its nominal (whatever its
//     tier) and the borrowOnly tiers of any team (reclaims, reclaimsFor). It
//     may count the evictions of its own lower tiers the same decision makes
//     toward ending within its nominal (a bounded search, victims.go).
//   - Within a team, a higher tier preempts a lower, preemptible one
//     (worthSearching, ownMayMakeRoom).
//   - A workload that has waited Options.StarvationAfter (not of a
//     borrowOnly tier) takes back what other teams of its cohort borrow, of
//     its tier or lower, submitted after it (starving, takesBack, takes).
//   - A borrowing workload never preempts another team's work running
//     within that team's nominal quota (borrowing).
//
// The order victims are tried in, the smallest set kept and the bounds that
// refuse a search before it starts are the search's (preempt.go,
// victims.go, tally.go); the rules are here.

// reclaims says whether a search for w on f has reclaim candidates: w's team
// would stay within its nominal quota once its own preemptible work of lower
// tiers is evicted (w's tier is not borrowOnly) and some team of its cohort
// uses what may be reclaimed; or w is starving and another team of its
// cohort borrows.
func (s *Scheduler) reclaims(w *workload, f *flavorState) bool {
	return reclaimsFor(w.team, w.tier, f, w.GPUs()) || s.takesBack(w.team, w.tier, f, w.since)
}

// takesBack says whether a workload of team t and tier p waiting since then
// is starving and another team of its cohort borrows of f: what it may take
// back as a starving one.
func (s *Scheduler) takesBack(t *team, p *tier, f *flavorState, since int64) bool {
	return s.starving(p, since) && othersBorrow(t, f)
}

// starving says whether a workload of tier p waiting since then may take
// back borrowed capacity as a starving one (Options.StarvationAfter).
func (s *Scheduler) starving(p *tier, since int64) bool {
	return s.opts.StarvationAfter > 0 && !p.spec.BorrowOnly && since <= s.starveCut
}

// othersBorrow says whether a team of t's cohort other than t uses of f what
// may be reclaimed.
func othersBorrow(t *team, f *flavorState) bool {
	if t.q.Parent == nil {
		return false
	}
	root := t.q.Root()
	return root.ReclaimableIn(f.id)-t.reclaimable(f.id) > 0
}

// reclaimsFor is reclaims for a workload of team t and tier p asking need
// GPUs. Its bound is the team's usage after the evictions the same decision
// may make of its own lower tiers: the search (bounded) checks the team ends
// within its nominal with the victims it keeps.
func reclaimsFor(t *team, p *tier, f *flavorState, need GPUs) bool {
	if p.spec.BorrowOnly || t.q.Parent == nil {
		return false
	}
	if r := t.q.R(f.id); r.Usage-r.Preemptible.Below(p.spec.Priority)+need > r.Nominal {
		return false
	}
	root := t.q.Root()
	return root.ReclaimableIn(f.id) > 0
}

// takes says whether the search may evict c, which its streams yield: a
// starving workload takes back only work of its tier or lower submitted
// after it.
func (vs *victimSearch) takes(c *candidate) bool {
	return c.reason != byStarving || vs.laterBorrow(c)
}

// laterBorrow says whether c is of the starving workload's tier or lower and
// submitted after it.
func (vs *victimSearch) laterBorrow(c *candidate) bool {
	return c.prio <= vs.prio && c.submitted > vs.after
}

// borrowing says whether t uses more of f than its nominal quota, not counting
// its borrowOnly workloads.
func borrowing(t *team, f *flavorState) bool { return borrowed(t, f) > 0 }

// borrowed is what t uses of f beyond its nominal quota, its borrowOnly
// workloads not counted: the budget of the prefix of its victims others
// may take back (candidatesFor); none or less when it does not borrow.
func borrowed(t *team, f *flavorState) GPUs {
	r := t.q.R(f.id)
	return r.Usage - r.BorrowOnly - r.Nominal
}

// worthSearching is a bound checked before the search is built: a workload
// that may not reclaim can make room only by evicting its own team's lower,
// preemptible tiers; when its team runs none on f, or they and what is free
// on view v are not enough, no search can succeed. The team's sums cover
// every view of f, so the bound never turns away a search that could.
func (s *Scheduler) worthSearching(w *workload, f *flavorState, v *view) bool {
	return s.reclaims(w, f) || ownMayMakeRoom(w.team, w.tier, f, v, w.GPUs())
}

// ownMayMakeRoom says whether team t's preemptible work below tier p on f
// and what is free on view v add up to need GPUs.
func ownMayMakeRoom(t *team, p *tier, f *flavorState, v *view, need GPUs) bool {
	own := t.q.R(f.id).Preemptible.Below(p.spec.Priority)
	return own > 0 && v.All.Free+own >= need
}

// mayReclaim says whether w may take back what other teams borrow on one of
// its flavors (see candidatesOf).
func (s *Scheduler) mayReclaim(w *workload) bool {
	if w.tier.spec.BorrowOnly || w.team.q.Parent == nil {
		return false
	}
	if s.starving(w.tier, w.since) {
		return true
	}
	for _, f := range w.cands {
		if r := w.team.q.R(f.id); r.Usage-r.Preemptible.Below(w.tier.spec.Priority)+w.GPUs() <= r.Nominal {
			return true
		}
	}
	return false
}

// searchKind is which candidates a preemption search may take (candidatesOf).
type searchKind uint8

const (
	// kindReclaim: a team within its nominal reclaims what the others of
	// its cohort borrow, and evicts its own lower tiers.
	kindReclaim searchKind = iota
	// kindStarving: a starving workload takes back what the others borrow
	// of its tier or lower, submitted after it, and evicts its own lower
	// tiers.
	kindStarving
	// kindOwn: only its own team's lower, preemptible tiers.
	kindOwn
)

// kindOf says which search w may make on f; starving asks for a starving
// workload's even where its team may reclaim within its nominal (the second
// search, see preempt).
func (s *Scheduler) kindOf(w *workload, f *flavorState, starving bool) searchKind {
	switch {
	case !starving && reclaimsFor(w.team, w.tier, f, w.GPUs()):
		return kindReclaim
	case s.takesBack(w.team, w.tier, f, w.since):
		return kindStarving
	}
	return kindOwn
}

// why is the rule a search takes a candidate by: a byte in each candidate
// of the victim lists, where a PreemptReason is a string.
type why uint8

const (
	byNone why = iota
	byReclaim
	byHigherTier
	byStarving
)

// preempt is the reason a preemption by the rule reports.
func (y why) preempt() PreemptReason {
	return [...]PreemptReason{"", PreemptReclaim, PreemptHigherTier, PreemptStarving}[y]
}
