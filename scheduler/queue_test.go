package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestMergeKeepsTheQueueInOrder: workloads join a queue (some requeued ahead
// of their tier after a fault), leave it (admitted) and join it again, in
// random order; after every merge the queue's live entries are exactly its
// pending workloads, each once, in the order before gives them, and the gaps
// left behind never break the order a merge's binary search relies on.
func TestMergeKeepsTheQueueInOrder(t *testing.T) {
	ts := []*tier{{spec: Tier{Name: "high", Priority: 10}}, {spec: Tier{Name: "low", Priority: 1}}}
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 5))
		var q queue
		var ws []*workload
		for step := range 60 {
			for range rng.IntN(6) {
				w := &workload{tier: ts[rng.IntN(2)], seq: int64(len(ws))}
				w.spec.Submitted = time.Unix(int64(rng.IntN(20)), 0)
				ws = append(ws, w)
				q.push(w)
			}
			for _, w := range ws {
				switch {
				case w.state == statePending && rng.IntN(5) == 0:
					w.state, w.ahead = stateAdmitted, false
					q.leave()
				case w.state == stateAdmitted && rng.IntN(4) == 0:
					w.state, w.ahead = statePending, rng.IntN(2) == 0
					q.push(w)
				}
			}
			q.merge()
			for i := 1; i < len(q.items); i++ {
				if byEntry(q.items[i-1], q.items[i]) > 0 {
					t.Fatalf("seed %d step %d: items %d and %d out of order", seed, step, i-1, i)
				}
			}
			var live, want []*workload
			for _, e := range q.items {
				if e.live() {
					live = append(live, e.w)
				}
			}
			for _, w := range ws {
				if w.state == statePending {
					want = append(want, w)
				}
			}
			slices.SortFunc(want, before)
			if !slices.Equal(live, want) {
				t.Fatalf("seed %d step %d: the queue holds %d live entries, want the %d pending in order", seed, step, len(live), len(want))
			}
		}
	}
}
