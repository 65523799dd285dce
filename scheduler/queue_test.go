package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestMergeKeepsTheQueueInOrder: workloads join a queue (some requeued ahead
// of their tier after a fault), leave it (admitted) and join it again, in
// random order; after every merge the queue's live entries are exactly its
// pending workloads, each once, in the order before gives them, the gaps
// left behind never break the order a merge's binary search relies on, every
// gap is marked gone and find finds every pending workload's entry.
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
					q.leave(w, nil)
					w.state, w.ahead = stateAdmitted, false
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
			for i, e := range q.items {
				if e.live() {
					live = append(live, e.w)
				}
				if e.gone == e.live() {
					t.Fatalf("seed %d step %d: item %d gone %v, live %v", seed, step, i, e.gone, e.live())
				}
			}
			for _, w := range ws {
				if w.state == statePending {
					want = append(want, w)
					if e := q.find(w); e == nil || e.w != w || !e.live() {
						t.Fatalf("seed %d step %d: a pending workload's entry is not found", seed, step)
					}
				}
			}
			slices.SortFunc(want, before)
			if !slices.Equal(live, want) {
				t.Fatalf("seed %d step %d: the queue holds %d live entries, want the %d pending in order", seed, step, len(live), len(want))
			}
		}
	}
}

// checkQueues says where a queue's entries stop mirroring their workloads
// (entry): a gap not marked gone or a live entry marked so, a live entry
// whose reservation, consideration, wait or backoff is not its workload's,
// a pending workload find does not find.
func checkQueues(s *Scheduler) error {
	for _, t := range s.teamList {
		for _, list := range [][]entry{t.queue.items, t.queue.incoming} {
			for i := range list {
				e := &list[i]
				if e.gone == e.live() {
					return fmt.Errorf("team %s: the entry of %s (generation %d) is gone %v, live %v", t.spec.Name, e.w.spec.ID, e.gen, e.gone, e.live())
				}
				w := e.w
				if !e.gone && (e.held != (w.reserved != nil) || e.seen != (w.reason.Code != ReasonQueued) || e.since != w.since || e.notBefore != unixNanos(w.notBefore) || e.sub != unixNanos(w.spec.Submitted)) {
					return fmt.Errorf("team %s: the entry of %s holds %v, seen %v, since %v, not before %v; the workload %v, %q, %v, %v",
						t.spec.Name, w.spec.ID, e.held, e.seen, e.since, e.notBefore, w.reserved != nil, w.reason.Code, w.since, w.notBefore)
				}
			}
		}
	}
	for _, w := range s.workloads {
		if w.state == statePending && w.team.queue.find(w) == nil {
			return fmt.Errorf("pending %s has no entry in its queue", w.spec.ID)
		}
	}
	return nil
}
