package scheduler

import "math"

// The quota tree follows Kueue's hierarchical cohorts. Every team and cohort has,
// per flavor, a subtree quota (a team: its nominal; a cohort: what its children
// lend it) and a usage. A child keeps a guaranteed part of its subtree quota that it
// never lends (subtree - lendingLimit); only usage above that part counts in the
// parent. Usage changes propagate up incrementally, so a quota check costs
// O(depth).

const unlimited GPUs = -1

type qres struct {
	nominal GPUs
	borrow  GPUs // unlimited or >= 0
	lend    GPUs // unlimited or >= 0
	subtree GPUs
	usage   GPUs
	// borrowOnly is the part of a team's usage by borrowOnly tiers.
	borrowOnly GPUs
	// preemptible is a team's usage by its preemptible tiers, by priority.
	preemptible []tierGPUs
	has         bool
}

type tierGPUs struct {
	prio int64
	gpus GPUs
}

// below is what r's preemptible tiers of a priority under prio use.
func (r *qres) below(prio int64) GPUs {
	var g GPUs
	for _, x := range r.preemptible {
		if x.prio < prio {
			g += x.gpus
		}
	}
	return g
}

// addPreemptible adds delta GPUs to the usage of the preemptible tier prio.
func (r *qres) addPreemptible(prio int64, delta GPUs) {
	for i := range r.preemptible {
		if r.preemptible[i].prio == prio {
			r.preemptible[i].gpus += delta
			return
		}
	}
	r.preemptible = append(r.preemptible, tierGPUs{prio, delta})
}

type qnode struct {
	name     string
	parent   *qnode
	children []*qnode
	team     *team
	res      []qres
	// root: reclaimable is, per flavor, the sum over the tree's teams of what
	// they use above nominal or in borrowOnly tiers; it lets a cycle skip the
	// reclaim search when nothing in the cohort can be reclaimed.
	reclaimable []GPUs
	teams       []*team
}

func (q *qnode) r(f int) *qres {
	for f >= len(q.res) {
		q.res = append(q.res, qres{borrow: unlimited, lend: unlimited})
	}
	return &q.res[f]
}

func (q *qnode) root() *qnode {
	for q.parent != nil {
		q = q.parent
	}
	return q
}

func (q *qnode) guaranteed(f int) GPUs {
	r := q.r(f)
	if r.lend == unlimited {
		return 0
	}
	return max(0, r.subtree-r.lend)
}

// computeSubtree fills subtree quotas bottom-up.
func (q *qnode) computeSubtree(flavors int) {
	for f := range flavors {
		if q.team != nil {
			q.r(f).subtree = q.r(f).nominal
			continue
		}
		q.r(f).subtree = 0
	}
	for _, c := range q.children {
		c.computeSubtree(flavors)
		for f := range flavors {
			q.r(f).subtree += c.r(f).subtree - c.guaranteed(f)
		}
	}
}

// available is what q may still use of flavor f.
func (q *qnode) available(f int) GPUs {
	r := q.r(f)
	if q.parent == nil {
		return r.subtree - r.usage
	}
	g := q.guaranteed(f)
	local := max(0, g-r.usage)
	pa := q.parent.available(f)
	if r.borrow != unlimited {
		stored := r.subtree - g
		inParent := max(0, r.usage-g)
		pa = min(pa, stored-inParent+r.borrow)
	}
	return local + max(0, pa)
}

// addUsage adds delta GPUs of flavor f to q and, as far as it exceeds the
// guaranteed parts, to its ancestors.
func (q *qnode) addUsage(f int, delta GPUs) {
	for n := q; n != nil && delta != 0; n = n.parent {
		g := n.guaranteed(f)
		r := n.r(f)
		before := max(0, r.usage-g)
		r.usage += delta
		delta = max(0, r.usage-g) - before
	}
}

// limit is the most of flavor f team q may ever use, or unlimited.
func (q *qnode) limit(f int) GPUs {
	r := q.r(f)
	if q.parent == nil {
		return r.nominal
	}
	if r.borrow == unlimited {
		return unlimited
	}
	return r.nominal + r.borrow
}

// team is the scheduler's record of a Team.
type team struct {
	spec   Team
	q      *qnode
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
	// runs are what skipRun learnt of the team's runs, by tier.
	runs map[*tier]*runCache
}

// reclaimable is what the team uses of flavor f that others may reclaim.
func (t *team) reclaimable(f int) GPUs {
	r := t.q.r(f)
	return max(0, r.usage-r.borrowOnly-r.nominal) + r.borrowOnly
}

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
	root := t.q.root()
	before := t.reclaimable(f.id)
	t.q.addUsage(f.id, sign*w.GPUs())
	if w.tier.spec.BorrowOnly {
		t.q.r(f.id).borrowOnly += sign * w.GPUs()
	}
	if w.tier.spec.Preemptible {
		t.q.r(f.id).addPreemptible(w.tier.spec.Priority, sign*w.GPUs())
	}
	for f.id >= len(root.reclaimable) {
		root.reclaimable = append(root.reclaimable, 0)
	}
	root.reclaimable[f.id] += t.reclaimable(f.id) - before
}

// shareOf is the team's weighted dominant-resource share: the largest ratio of
// usage to nominal quota over its flavors, divided by its weight.
func (s *Scheduler) shareOf(t *team) float64 {
	var share float64
	for _, f := range t.flavors {
		r := t.q.r(f.id)
		if r.usage == 0 {
			continue
		}
		share = math.Max(share, float64(r.usage)/float64(max(r.nominal, 1)))
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
		q.addUsage(f.id, w.GPUs())
		after := q.available(f.id)
		q.addUsage(f.id, -w.GPUs())
		return after < h.GPUs()
	}
	if len(h.reserved) < 2 {
		return false
	}
	r := q.r(f.id)
	if !w.tier.spec.BorrowOnly && r.usage-r.borrowOnly+w.GPUs() <= r.nominal {
		return false
	}
	if q.root() != h.team.q.root() {
		return false
	}
	held := min(h.GPUs(), s.drainedFree(h.reserved, h.spec.GPUsPerPod))
	if held == 0 {
		return false
	}
	q.addUsage(f.id, w.GPUs())
	after := h.team.q.available(f.id)
	q.addUsage(f.id, -w.GPUs())
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
	root := w.team.q.root()
	h := s.borrowFirst[root]
	ok := w.spec.Pods > 1 && w.reason.Code == ReasonCohortExhausted && s.now.Sub(w.since) >= s.opts.BorrowFirstAfter
	switch {
	case h == w && !ok:
		delete(s.borrowFirst, root)
	case ok && (h == nil || h.state != statePending || w.since.Before(h.since)):
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
	h := s.borrowFirst[w.team.q.root()]
	if h == nil || h == w || h.state != statePending || h.team == w.team || w.GPUs() >= h.GPUs() || !h.spec.Submitted.Before(w.spec.Submitted) {
		return nil, false
	}
	r := w.team.q.r(f.id)
	return h, w.tier.spec.BorrowOnly || r.usage-r.borrowOnly+w.GPUs() > r.nominal
}

// quotaCheck says whether w fits the quota of flavor f, and why not.
func (s *Scheduler) quotaCheck(w *workload, f *flavorState) (PendingReason, bool) {
	q := w.team.q
	need := w.GPUs()
	avail := q.available(f.id)
	if avail >= need {
		if h := f.res; h != nil && h != w && s.takesHeadroom(w, h, f) {
			return PendingReason{Code: ReasonReserved, Flavor: f.name, Requested: need, Available: avail, Holder: h.spec.ID}, false
		}
		if h, ahead := s.borrowsAhead(w, f); ahead {
			return PendingReason{Code: ReasonReserved, Flavor: f.name, Requested: need, Available: avail, Holder: h.spec.ID}, false
		}
		return PendingReason{}, true
	}
	lim := q.limit(f.id)
	r := PendingReason{Flavor: f.name, Requested: need}
	if lim != unlimited && q.r(f.id).usage+need > lim {
		r.Code, r.Available, r.Limit = ReasonOverQuota, max(0, lim-q.r(f.id).usage), lim
		return r, false
	}
	r.Code, r.Available = ReasonCohortExhausted, max(0, avail)
	if lim != unlimited {
		r.Limit = lim
	}
	return r, false
}
