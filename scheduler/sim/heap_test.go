package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestEventHeapPopsInOrder: events pushed and popped in random interleavings
// come out by time, then kind, then as pushed, as a sort of them would
// order them.
func TestEventHeapPopsInOrder(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 3))
		var h eventHeap
		var pending, got, want []event
		seq := 0
		for range 300 {
			if r.IntN(3) > 0 || len(h) == 0 {
				e := event{at: time.Unix(int64(r.IntN(20)), 0), kind: kind(r.IntN(int(kWake) + 1)), seq: seq}
				seq++
				h.push(e)
				pending = append(pending, e)
				continue
			}
			e := h.pop()
			got = append(got, e)
			i := slices.IndexFunc(pending, func(x event) bool { return x.seq == e.seq })
			least := slices.MinFunc(pending, func(a, b event) int {
				if c := a.at.Compare(b.at); c != 0 {
					return c
				}
				if a.kind != b.kind {
					return int(a.kind) - int(b.kind)
				}
				return a.seq - b.seq
			})
			want = append(want, least)
			pending = slices.Delete(pending, i, i+1)
		}
		for i := range got {
			if got[i].seq != want[i].seq {
				t.Fatalf("seed %d: pop %d gave event %d (%v, kind %d), want %d (%v, kind %d)", seed, i, got[i].seq, got[i].at, got[i].kind, want[i].seq, want[i].at, want[i].kind)
			}
		}
	}
}
