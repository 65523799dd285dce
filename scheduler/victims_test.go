package scheduler

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allot-dev/allot/scheduler/internal/quota"
)

// TestStreamTakesWhatTheRuleSays checks a borrowing team's stream of reclaim
// candidates against the rule it stands for: of the team's workloads in victim
// order, every borrowOnly one and the others while the team still borrows,
// and nothing else.
func TestStreamTakesWhatTheRuleSays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 15))
	tierOf := make([]*tier, len(tiers))
	for i := range tiers {
		tierOf[i] = &tier{spec: tiers[i]}
	}
	for round := range 2000 {
		var cands []candidate
		var r quota.Res
		for i := range rng.IntN(30) {
			w := &workload{spec: Workload{Pods: int64(1 + rng.IntN(3)), GPUsPerPod: GPUs(1 + rng.IntN(8))}, tier: tierOf[rng.IntN(len(tierOf))], seq: int64(i)}
			r.Usage += w.GPUs()
			if w.tier.spec.BorrowOnly {
				r.BorrowOnly += w.GPUs()
			}
			c := candidateOf(w, rng.IntN(4) == 0)
			c.at = int64(rng.IntN(5))
			cands = append(cands, c)
		}
		r.Nominal = GPUs(rng.IntN(int(r.Usage) + 1))
		// The rule: all in victim order, skipping the others once the team
		// no longer borrows.
		all := slices.Clone(cands)
		slices.SortFunc(all, victimOrder)
		var want []candidate
		excess := r.Usage - r.BorrowOnly - r.Nominal
		for _, c := range all {
			if c.w.tier.spec.BorrowOnly {
				want = append(want, c)
			} else if excess > 0 {
				want = append(want, c)
				excess -= c.w.GPUs()
			}
		}
		var l teamVictims
		l.preemptible = map[int64]GPUs{}
		for _, c := range cands {
			l.add(c)
		}
		st := stream{borrowOnly: &l.borrowOnly, rest: &l.rest, all: true, budget: r.Usage - r.BorrowOnly - r.Nominal}
		var got []candidate
		for c, ok := st.head(); ok; c, ok = st.head() {
			got = append(got, c)
			st.pop()
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: kept %d candidates, the search takes %d", round, len(got), len(want))
		}
	}
}

// TestVictimListGaps adds and removes candidates at random: the list yields
// the live ones in victim order, and its gaps never outnumber them by more
// than one segment's worth.
func TestVictimListGaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	tierOf := make([]*tier, len(tiers))
	for i := range tiers {
		tierOf[i] = &tier{spec: tiers[i]}
	}
	var l vlist
	live := map[*workload]candidate{}
	for i := range 5000 {
		if len(live) > 0 && rng.IntN(2) == 0 {
			for w, c := range live {
				l.remove(c)
				delete(live, w)
				break
			}
		} else {
			w := &workload{spec: Workload{Pods: 1, GPUsPerPod: 1}, tier: tierOf[rng.IntN(len(tierOf))], seq: int64(i)}
			c := candidateOf(w, rng.IntN(4) == 0)
			c.at = int64(rng.IntN(50))
			l.add(c)
			live[w] = c
		}
		want := slices.SortedFunc(maps.Values(live), victimOrder)
		if got := l.list(); !slices.EqualFunc(got, want, func(a, b candidate) bool { return a.w == b.w }) {
			t.Fatalf("step %d: the list yields %d candidates, %d live", i, len(got), len(want))
		}
		for _, g := range l.segs {
			if n := len(g.c) - g.gaps; g.gaps > n+1 {
				t.Fatalf("step %d: a segment of %d live candidates keeps %d gaps", i, n, g.gaps)
			}
		}
	}
}
