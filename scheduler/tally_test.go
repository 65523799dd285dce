package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTallyAnswersAsTheWhatIfSearch: on every preemption search of random
// fleets (topology, placement rules, reservations, borrow-first gangs, an
// even-priority borrowOnly tier, clusters and workloads pinned to one) and
// of a busy one, a tally keeps the
// victims the what-if search keeps on the same state, in the same order, or
// fails where it fails, and leaves the index and the quotas as it found
// them. Every fit test a tally makes is mutated by some failing case: the
// quota, the held headroom of a reservation, the pods per node, the domain.
func TestTallyAnswersAsTheWhatIfSearch(t *testing.T) {
	var found, failed, victims, required, held, clustered, pinned int
	var clusters []string // the world's
	watch := func(t *testing.T, s *Scheduler, where func() string) {
		var before string
		s.hooks().searched = func(done bool) {
			if !done {
				before = indexState(s)
			}
		}
		s.hooks().crossTally = func(w *workload, tallied []candidate, tok bool) func([]candidate, bool) {
			if after := indexState(s); after != before {
				t.Fatalf("%s: a tally for %s changed the index:\n%s", where(), w.spec.ID, firstDiff(before, after))
			}
			return func(tried []candidate, ok bool) {
				if ok != tok || !slices.EqualFunc(tallied, tried, func(a, b candidate) bool { return a.w == b.w && a.reason == b.reason }) {
					t.Fatalf("%s: for %s a tally keeps %v (%v), the what-if search %v (%v)", where(), w.spec.ID, ids(tallied), tok, ids(tried), ok)
				}
				if !ok {
					failed++
					return
				}
				found++
				victims += len(tried)
				if w.spec.Require != "" {
					required++
				}
				if len(clusters) > 0 {
					clustered++
				}
				if w.spec.Cluster != "" {
					pinned++
				}
			}
		}
	}
	for seed := range 60 {
		rng := rand.New(rand.NewPCG(uint64(seed), 47))
		rules := seed%2 == 1
		cfg, nodes := evenWorld(rng, rules)
		// A third of the worlds span clusters, a workload in four pinned to one.
		clusters = nil
		if seed%3 == 2 {
			clusters = inClusters(rng, nodes)
		}
		opts := Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute}
		if rng.IntN(2) == 0 {
			opts.BorrowFirstAfter = time.Duration(1+rng.IntN(3)) * time.Minute
		}
		f := newFx(t, cfg, nodes, opts)
		step := 0
		watch(t, f.s, func() string { return fmt.Sprintf("seed %d step %d", seed, step) })
		next := 0
		for ; step < 150; step++ {
			sec := step * 30
			for range rng.IntN(5) {
				w := evenWorkload(rng, cfg, next, sec, rules)
				if len(clusters) > 0 && rng.IntN(4) == 0 {
					w.Cluster = clusters[rng.IntN(len(clusters))]
				}
				f.submit(w)
				next++
			}
			if ids := f.running(); len(ids) > 0 && rng.IntN(3) > 0 {
				f.finish(ids[rng.IntN(len(ids))])
			}
			f.cycle(sec)
			held += tallyReadsReserved(t, f.s)
		}
	}
	clusters = nil
	b := newBusy(t, 300)
	step := 0
	watch(t, b.s, func() string { return fmt.Sprintf("busy fleet step %d", step) })
	for ; step < 40; step++ {
		b.churn(t, 10)
		b.cycle(t)
	}
	if found < 500 || failed < 100 || victims < 2*found/3 || required < 50 || held < 20 || clustered < 50 || pinned < 10 {
		t.Fatalf("only %d searches found victims (%d of them, %d for a required level, %d across clusters, %d pinned to one), %d failed, %d fit tests read a reservation's nodes: the test does not exercise tallies", found, victims, required, clustered, pinned, failed, held)
	}
	t.Logf("%d searches found %d victims (%d for a required level, %d across clusters, %d pinned to one), %d failed, the tally agreeing; %d fit tests read a reservation's drained nodes", found, victims, required, clustered, pinned, failed, held)
}

// tallyReadsReserved checks, for every reservation of several nodes, that a
// tally evicting a workload running on them tests the fit of every pending
// workload as fitsNow does with that workload evicted what-if: the headroom
// drained toward the gang counts the GPUs the tally freed. It returns how
// many such tests it made where the freed GPUs changed the headroom.
func tallyReadsReserved(t *testing.T, s *Scheduler) int {
	t.Helper()
	n := 0
	for _, f := range s.flavorList {
		h := f.res
		if h == nil || len(h.reserved) < 2 {
			continue
		}
		var on []*workload
		for _, nd := range h.reserved {
			for _, p := range nd.pods {
				on = append(on, p.w)
			}
		}
		for _, w := range s.workloads {
			if w.state != statePending || w == h || !slices.Contains(w.cands, f) {
				continue
			}
			for _, x := range on {
				tl := s.newTally(w, f)
				if tl == nil || x.state != stateAdmitted {
					continue
				}
				drained := s.drainedFree(h.reserved, h.spec.GPUsPerPod)
				s.tallying = tl.id
				tl.evict(x)
				got, freed := tl.fits(), s.drainedFree(h.reserved, h.spec.GPUsPerPod)
				tl.back(x, false)
				s.tallying = 0
				restore := s.WhatIfEvict(x.spec.ID)
				want, after := s.fitsNow(w, f), s.drainedFree(h.reserved, h.spec.GPUsPerPod)
				restore()
				if got != want || freed != after {
					t.Fatalf("%s with %s evicted: a tally fits %v (drained %d), what-if %v (drained %d)", w.spec.ID, x.spec.ID, got, freed, want, after)
				}
				if after != drained {
					n++
				}
			}
		}
	}
	return n
}

func ids(cs []candidate) []WorkloadID {
	var out []WorkloadID
	for _, c := range cs {
		out = append(out, c.w.spec.ID)
	}
	return out
}
