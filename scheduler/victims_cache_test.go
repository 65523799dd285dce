package scheduler

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fromScratch is what a preemption search tries, built from the running
// workloads the slow way (every one collected and sorted), as the kept lists
// must give it: the candidates in order, and whether all of them free enough.
func fromScratch(s *Scheduler, w *workload, f *flavorState) ([]candidate, bool) {
	t := w.team
	r := t.q.R(f.id)
	v := s.viewOf(w, f)
	var reclaim, own []candidate
	if !w.tier.spec.BorrowOnly && r.Usage+w.GPUs() <= r.Nominal && t.q.Parent != nil {
		root := t.q.Root()
		if root.ReclaimableIn(f.id) > 0 {
			for _, o := range s.trees[root] {
				if o == t || o.reclaimable(f.id) == 0 {
					continue
				}
				all := borrowing(o, f)
				var rest []candidate
				for x := range o.running {
					if !helps(f, v, x) {
						continue
					}
					if x.tier.spec.BorrowOnly {
						reclaim = append(reclaim, takenBy(s.candidate(x), byReclaim))
					} else if all {
						rest = append(rest, takenBy(s.candidate(x), byReclaim))
					}
				}
				slices.SortFunc(rest, victimOrder)
				or := o.q.R(f.id)
				for excess, i := or.Usage-or.BorrowOnly-or.Nominal, 0; excess > 0 && i < len(rest); i++ {
					reclaim = append(reclaim, rest[i])
					excess -= rest[i].w.GPUs()
				}
			}
		}
	}
	for x := range t.running {
		if x.tier.spec.Preemptible && helps(f, v, x) && x.tier.spec.Priority < w.tier.spec.Priority {
			own = append(own, takenBy(s.candidate(x), byHigherTier))
		}
	}
	room := v.All.Free
	for _, c := range append(slices.Clone(reclaim), own...) {
		room += c.w.GPUs()
	}
	slices.SortFunc(reclaim, victimOrder)
	slices.SortFunc(own, victimOrder)
	return append(reclaim, own...), room >= w.GPUs()
}

// The victim lists kept as workloads start and end give every search what one
// built from scratch would, after any sequence of cycles (with preemptions),
// completions, arrivals and node faults: the same candidates, in the same
// order, and the same verdict.
func TestVictimListsMatchAFreshSearch(t *testing.T) {
	b := newBusy(t, 400)
	compared, nonEmpty := 0, 0
	for step := range 240 {
		switch step % 4 {
		case 0:
			b.churn(t, 1+b.rng.IntN(10))
		case 1:
			b.flap(t)
		case 2: // gangs admitted on drained nodes age past their grace
			b.sec += 45 * 60
			b.s.Advance(at(b.sec))
		}
		b.cycle(t)
		for _, w := range b.s.workloads {
			if w.state != statePending || b.rng.IntN(3) != 0 {
				continue
			}
			for _, f := range w.cands {
				vs, ok := b.s.candidates(w, f, false)
				var got []candidate
				for c, more := vs.next(); more; c, more = vs.next() {
					got = append(got, c)
				}
				want, wantOK := fromScratch(b.s, w, f)
				if ok != wantOK || !slices.Equal(got, want) {
					t.Fatalf("step %d, %s (team %s, tier %s) on %s: kept lists give %d candidates (enough: %v), from scratch %d (%v)",
						step, w.spec.ID, w.team.spec.Name, w.tier.spec.Name, f.name, len(got), ok, len(want), wantOK)
				}
				compared++
				if len(want) > 0 {
					nonEmpty++
				}
			}
		}
	}
	if compared < 200 || nonEmpty < 50 {
		t.Fatalf("only %d searches compared (%d with candidates)", compared, nonEmpty)
	}
	t.Logf("%d searches compared, %d with candidates", compared, nonEmpty)
}

// A gang admitted on nodes drained for it is taken last in its tier for its
// grace (drainedGrace); once that ends it takes its place by admission time
// again, and the kept lists follow, as a list built from scratch does.
func TestVictimListsReorderWhenTheGraceEnds(t *testing.T) {
	// The first busy fleet where a team runs what the test needs.
	for _, size := range []int{200, 300, 400, 600} {
		if graceEndsReorder(t, newBusy(t, size)) {
			return
		}
	}
	t.Fatal("no team runs two workloads of one preemptible tier, the later a gang")
}

// graceEndsReorder checks the order of a team of b that runs two workloads
// of one preemptible tier, the later a gang, if there is one.
func graceEndsReorder(t *testing.T, b *busy) bool {
	f := b.s.flavorList[0]
	for _, tm := range b.s.teamList {
		// Two running of one preemptible tier: the later (the first victim) a gang.
		var older, gang *workload
		for x := range tm.running {
			for y := range tm.running {
				if x != y && x.tier == y.tier && x.tier.spec.Preemptible && y.spec.Pods > 1 &&
					(x.admittedAt.Before(y.admittedAt) || (x.admittedAt.Equal(y.admittedAt) && x.seq < y.seq)) {
					older, gang = x, y
				}
			}
		}
		if gang == nil {
			continue
		}
		gang.drained = true
		tm.victims = nil
		order := func() []*workload {
			var out []*workload
			l := b.s.teamVictims(f, f.view, tm)
			for _, c := range append(l.borrowOnly.list(), l.rest.list()...) {
				if c.w == older || c.w == gang {
					out = append(out, c.w)
				}
			}
			return out
		}
		b.s.Advance(gang.admittedAt.Add(time.Hour))
		if got := order(); !slices.Equal(got, []*workload{older, gang}) {
			t.Fatalf("within its grace the drained gang is not last: %v", got)
		}
		b.s.Advance(gang.admittedAt.Add(drainedGrace + time.Hour))
		if got := order(); !slices.Equal(got, []*workload{gang, older}) {
			t.Fatalf("after its grace the drained gang is not first (the more recent): %v", got)
		}
		return true
	}
	return false
}

// fitsWithAllEvicted says whether w would fit f were every candidate a
// search from scratch tries evicted (and returns them); the scheduler is left
// as it was.
func fitsWithAllEvicted(s *Scheduler, w *workload, f *flavorState) ([]candidate, bool) {
	all, _ := fromScratch(s, w, f)
	var ids []WorkloadID
	for _, c := range all {
		ids = append(ids, c.w.spec.ID)
	}
	restore := s.WhatIfEvict(ids...)
	defer restore()
	return all, s.fitsNow(w, f)
}

// The bounds of a gang held to one domain (its GPUs, then its whole pods
// in one domain) never turn away a search that would succeed: on every
// pending gang of a busy fleet that names a level, when a bound says no,
// evicting every candidate does not make it fit.
func TestRoomInOneDomainIsABound(t *testing.T) {
	b := newBusy(t, 300)
	refused, inPods, could := 0, 0, 0
	for step := range 120 {
		// Before the cycle: what just arrived may need victims to fit.
		b.churn(t, 10)
		for _, w := range b.s.workloads {
			if w.state != statePending || w.spec.Require == "" {
				continue
			}
			for _, f := range w.cands {
				vs, ok := b.s.candidates(w, f, false)
				if !ok {
					continue
				}
				// each reads the candidates all yields, without taking any.
				var seen []WorkloadID
				vs.each(func(c *candidate) bool { seen = append(seen, c.w.spec.ID); return true })
				room := b.s.roomInOneDomain(w, f, vs)
				if room && w.spec.GPUsPerPod > 1 {
					if room = b.s.domainPodShort(f, b.s.viewOf(w, f), w.spec.Require, w.spec.GPUsPerPod, w.spec.Pods, vs) <= 0; !room {
						inPods++
					}
				}
				cands := vs.all()
				var want []WorkloadID
				for _, c := range cands {
					want = append(want, c.w.spec.ID)
				}
				slices.Sort(seen)
				slices.Sort(want)
				if !slices.Equal(seen, want) {
					t.Fatalf("step %d: each yields %v, all %v", step, seen, want)
				}
				all, fits := fitsWithAllEvicted(b.s, w, f)
				if fits && b.s.viewOf(w, f).Levels[w.spec.Require].LargestFree() < w.GPUs() {
					could++ // only with victims
				}
				if room {
					continue
				}
				refused++
				if fits {
					t.Fatalf("step %d: %s (%d x %d GPUs in one %s) fits with its %d candidates evicted, but the bound refused it (%d kept)",
						step, w.spec.ID, w.spec.Pods, w.spec.GPUsPerPod, w.spec.Require, len(all), len(cands))
				}
			}
		}
		b.cycle(t)
	}
	if refused < 20 || inPods < 20 || could < 5 {
		t.Fatalf("the bounds refused %d searches (%d for want of whole pods), %d could succeed: too few to tell", refused, inPods, could)
	}
	t.Logf("%d searches refused by the bounds (%d for want of whole pods), none of which could succeed; %d could, and were let through", refused, inPods, could)
}

// domainPodShort is exact, not merely a bound: on every pending gang of
// whole pods held to a domain, the pods it says the best domain lacks are
// those that domain lacks once every candidate is evicted, counted on the
// nodes placement may use. A busy fleet whose gangs reserve (drain) nodes,
// and worlds of placement rules, whose candidates also run on nodes of
// classes the gang's view does not admit: GPUs freed there count for
// nothing.
func TestDomainPodShortIsExact(t *testing.T) {
	var n podShortCounts
	b := newBusy(t, 300)
	for range 80 {
		b.churn(t, 10)
		n.check(t, b.s)
		b.sec += 59 // a minute a step: gangs wait past ReserveAfter
		b.cycle(t)
	}
	for seed := range 12 {
		rng := rand.New(rand.NewPCG(uint64(seed), 45))
		cfg := orgConfig()
		nodes := classed(rack("n", "a", 12, 8, 2, 3), func(int) string { return ruleClasses[rng.IntN(len(ruleClasses))] })
		f := newFx(t, cfg, nodes, Options{ReserveAfter: 3 * time.Minute, StarvationAfter: 2 * time.Minute})
		levels := []string{"rack", "block"}
		next := 0
		for sec := 20; sec <= 4000; sec += 20 {
			for range rng.IntN(4) {
				f.submit(orgArrival(rng, cfg, next, sec, levels, true))
				next++
			}
			endOne(rng, f)
			n.check(t, f.s)
			f.cycle(sec)
		}
	}
	if n.checked < 1000 || n.short < 100 || n.room < 100 || n.unlisted < 100 {
		t.Fatalf("%+v: too few to tell", n)
	}
	t.Logf("%+v", n)
}

// podShortCounts are what TestDomainPodShortIsExact checked: gangs, those
// short of pods and those with room, and candidates' placements on nodes
// the gang's view does not list.
type podShortCounts struct{ checked, short, room, unlisted int }

// check compares domainPodShort with the pods the best domain lacks with
// every candidate evicted, for every pending gang of s held to a domain.
func (n *podShortCounts) check(t *testing.T, s *Scheduler) {
	t.Helper()
	for _, w := range s.workloads {
		if w.state != statePending || w.spec.Require == "" || w.spec.GPUsPerPod < 2 {
			continue
		}
		for _, f := range w.cands {
			vs, ok := s.candidates(w, f, false)
			if !ok {
				continue
			}
			v := s.viewOf(w, f)
			li := v.Levels[w.spec.Require]
			if li == nil || li.BestFit(w.spec.GPUsPerPod, w.spec.Pods, nil) != nil {
				continue // placed as it is: no search
			}
			got := s.domainPodShort(f, v, w.spec.Require, w.spec.GPUsPerPod, w.spec.Pods, vs)
			var ids []WorkloadID
			for _, c := range vs.all() {
				ids = append(ids, c.w.spec.ID)
				for _, p := range c.w.placements {
					if !v.lists(f, p.node) {
						n.unlisted++
					}
				}
			}
			restore := s.WhatIfEvict(ids...)
			var best int64
			for i := range li.Doms {
				best = max(best, li.Doms[i].G.Usable(w.spec.GPUsPerPod, math.MaxInt64))
			}
			restore()
			want := w.spec.Pods - best
			if (want <= 0) != (got <= 0) || (want > 0 && got != want) {
				t.Fatalf("%s (%d x %d GPUs in one %s): domainPodShort %d, with its %d candidates evicted the best domain lacks %d",
					w.spec.ID, w.spec.Pods, w.spec.GPUsPerPod, w.spec.Require, got, len(ids), want)
			}
			n.checked++
			if want > 0 {
				n.short++
			} else {
				n.room++
			}
		}
	}
}

// The bound checked before a search is built never turns away one that would
// succeed, and the team's sums it reads are exact: on a busy fleet, after
// completions, arrivals, node faults and the cycles' preemptions (whose
// what-if evictions come and go), each team's usage by preemptible tier
// equals what its running workloads add up to, and when the bound says no,
// evicting every candidate a search from scratch would try does not make the
// workload fit.
func TestPreemptionBoundIsSound(t *testing.T) {
	b := newBusy(t, 300)
	refused, searched, could, short := 0, 0, 0, 0
	for step := range 120 {
		b.churn(t, 10)
		if step%10 == 3 {
			b.flap(t)
		}
		for _, tm := range b.s.teamList {
			for _, f := range b.s.flavorList {
				want := map[int64]GPUs{}
				for x := range tm.running {
					if x.flavor == f && x.tier.spec.Preemptible {
						want[x.tier.spec.Priority] += x.GPUs()
					}
				}
				got := map[int64]GPUs{}
				for _, x := range tm.q.R(f.id).Preemptible {
					if x.GPUs != 0 {
						got[x.Prio] = x.GPUs
					}
				}
				if !maps.Equal(got, want) {
					t.Fatalf("step %d: team %s uses %v GPUs of %s by preemptible tier, its sums say %v", step, tm.spec.Name, want, f.name, got)
				}
			}
		}
		for _, w := range b.s.workloads {
			if w.state != statePending {
				continue
			}
			for _, f := range w.cands {
				if b.s.fitsNow(w, f) {
					continue // no search: it is placed as it is
				}
				all, fits := fitsWithAllEvicted(b.s, w, f)
				v := b.s.viewOf(w, f)
				bound := "worthSearching"
				ok := b.s.worthSearching(w, f, v)
				if ok {
					if vs, enough := b.s.candidates(w, f, false); enough {
						bound, ok = "roomInPods", b.s.roomInPods(w, f, v, vs)
						if !ok {
							short++
						}
					}
				}
				if ok {
					searched++
					if fits && !b.s.reclaims(w, f) {
						could++ // by its own team's lower tiers
					}
					continue
				}
				refused++
				if fits {
					t.Fatalf("step %d: %s (team %s, tier %s, %d x %d GPUs) fits with its %d candidates evicted, but %s refused the search",
						step, w.spec.ID, w.team.spec.Name, w.tier.spec.Name, w.spec.Pods, w.spec.GPUsPerPod, len(all), bound)
				}
			}
		}
		b.cycle(t)
	}
	if refused < 100 || could < 5 || short < 20 {
		t.Fatalf("the bounds refused %d searches (%d for want of nodes) and let %d through, %d of which own tiers could make room for: too few to tell", refused, short, searched, could)
	}
	t.Logf("%d searches refused by the bounds (%d for want of nodes), none of which could succeed; %d let through, %d of which its own lower tiers could make room for", refused, short, searched, could)
}

// list is the vlist's candidates in victim order.
func (l *vlist) list() []candidate {
	var out []candidate
	for c := range l.from(vpos{}) {
		out = append(out, *c)
	}
	return out
}

// candidates is candidatesOf for the search findVictims makes: starving asks
// for a starving workload's even where its team may reclaim within its
// nominal (the second search, see preempt).
func (s *Scheduler) candidates(w *workload, f *flavorState, starving bool) (vs *victimSearch, ok bool) {
	vs, _, ok = s.candidatesOf(w, f, s.kindOf(w, f, starving))
	return vs, ok
}

// roomInOneDomain is domainRoom for w's required level on its view.
func (s *Scheduler) roomInOneDomain(w *workload, f *flavorState, search *victimSearch) bool {
	return s.domainRoom(f, s.viewOf(w, f), w.spec.Require, w.GPUs(), search)
}

// roomInPods is podRoom for w's pods on view v.
func (s *Scheduler) roomInPods(w *workload, f *flavorState, v *view, search *victimSearch) bool {
	return s.podRoom(f, v, w.spec.GPUsPerPod, w.spec.Pods, search)
}

// A search's room is read only until it reaches what the workload asks:
// below that it is the whole room, and it reaches it exactly when the
// whole room does, for every kind of search of every pending workload of a
// busy fleet.
func TestRoomReadUntilEnough(t *testing.T) {
	b := newBusy(t, 300)
	checked, short := 0, 0
	for step := range 40 {
		b.churn(t, 10)
		for _, w := range b.s.workloads {
			if w.state != statePending {
				continue
			}
			for _, f := range w.cands {
				v := b.s.viewOf(w, f)
				for _, kind := range []searchKind{kindOwn, kindReclaim, kindStarving} {
					_, whole := b.s.candidatesFor(w.team, w.tier.spec.Priority, w.spec.Submitted, f, v, kind, maxGPUs)
					for _, need := range []GPUs{0, w.GPUs(), whole / 2, whole, whole + 1} {
						_, room := b.s.candidatesFor(w.team, w.tier.spec.Priority, w.spec.Submitted, f, v, kind, need)
						if (room >= need) != (whole >= need) || (room < need && room != whole) {
							t.Fatalf("step %d: %s (kind %v) asks %d: room %d, whole room %d", step, w.spec.ID, kind, need, room, whole)
						}
						checked++
						if room < need {
							short++
						}
					}
				}
			}
		}
		b.cycle(t)
	}
	if checked < 1000 || short < 100 {
		t.Fatalf("checked %d rooms, %d short: too few to tell", checked, short)
	}
}

// takenBy is c as a search takes it by rule r.
func takenBy(c candidate, r why) candidate {
	c.reason = r
	return c
}
