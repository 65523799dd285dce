package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBorrowedPrefixKeepsWhatTheSearchTakes checks the shortcut of candidates
// against the rule it stands for: of a borrowing team's candidates in victim
// order, the search takes every borrowOnly one and the others while the team
// still borrows, and nothing else.
func TestBorrowedPrefixKeepsWhatTheSearchTakes(t *testing.T) {
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
			cands = append(cands, candidate{w: w, prio: w.tier.spec.Priority, late: rng.IntN(4) == 0, at: int64(rng.IntN(5)), seq: w.seq})
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
		other := candidate{w: &workload{tier: tierOf[0]}, seq: -1}
		got := borrowedPrefix(append([]candidate{other}, cands...), 1, &r)
		if got[0] != other {
			t.Fatalf("round %d: the candidates before start changed", round)
		}
		got = got[1:]
		slices.SortFunc(got, victimOrder)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: kept %d candidates, the search takes %d", round, len(got), len(want))
		}
	}
}
