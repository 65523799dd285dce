package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
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
		var r qres
		for i := range rng.IntN(30) {
			w := &workload{spec: Workload{Pods: int64(1 + rng.IntN(3)), GPUsPerPod: GPUs(1 + rng.IntN(8))}, tier: tierOf[rng.IntN(len(tierOf))], seq: int64(i)}
			r.usage += w.GPUs()
			if w.tier.spec.BorrowOnly {
				r.borrowOnly += w.GPUs()
			}
			c := candidateOf(w, rng.IntN(4) == 0)
			c.at = int64(rng.IntN(5))
			cands = append(cands, c)
		}
		r.nominal = GPUs(rng.IntN(int(r.usage) + 1))
		// The rule: all in victim order, skipping the others once the team
		// no longer borrows.
		all := slices.Clone(cands)
		slices.SortFunc(all, victimOrder)
		var want []candidate
		excess := r.usage - r.borrowOnly - r.nominal
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
		st := stream{borrowOnly: &l.borrowOnly, rest: &l.rest, all: true, budget: r.usage - r.borrowOnly - r.nominal}
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
