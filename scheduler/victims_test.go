package scheduler

import (
	"maps"
	"math/rand/v2"
	"reflect"
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

// TestQuotaRoomDecidesAsWithout: a search's room counts the free GPUs only as
// far as the team's quota has room (roomFor). The schedulers with and without
// that cut decide alike in lockstep, over random worlds with starving work,
// reservations and faults, while the cut refuses searches unrun.
func TestQuotaRoomDecidesAsWithout(t *testing.T) {
	cuts := 0
	for seed := range 100 {
		rng := rand.New(rand.NewPCG(uint64(seed), 53))
		rules := seed%2 == 1
		cfg, nodes := evenWorld(rng, rules)
		opts := starvingOptions(rng)
		a, b := newFx(t, cfg, nodes, opts), newFx(t, cfg, nodes, opts)
		a.s.hooks().quotaRoomCut = func() { cuts++ }
		b.s.hooks().noQuotaRoom = true
		next := 0
		for step := range 150 {
			sec := step * 30
			next = evenEvents(t, rng, cfg, rules, next, sec, a, b)
			if rng.IntN(12) == 0 {
				setHealth(t, nodes[rng.IntN(len(nodes))].Name, rng.IntN(2) == 0, a, b)
			}
			ra, rb := a.cycle(sec), b.cycle(sec)
			if !reflect.DeepEqual(decisions(ra), decisions(rb)) {
				t.Fatalf("seed %d step %d: with the quota in the room %v, without %v", seed, step, decisions(ra), decisions(rb))
			}
		}
		if ua, ub := a.s.Usage(), b.s.Usage(); !reflect.DeepEqual(ua, ub) {
			t.Fatalf("seed %d: usage with the quota in the room %+v, without %+v", seed, ua, ub)
		}
	}
	if cuts < 1000 {
		t.Fatalf("the quota lowered only %d rooms in all the worlds: the test does not exercise roomFor", cuts)
	}
	t.Logf("the quota lowered %d rooms", cuts)
}

// TestQuotaRoomRefusesUnrun: free nodes do not make a search worth running
// when the team's quota cannot take the workload even with every victim
// evicted. Team a (nominal 8, in no cohort) runs 4 GPUs of a preemptible tier
// and asks 16 of production on 32 free GPUs: evicting its 4 raises what it
// may use to 8 at most.
func TestQuotaRoomRefusesUnrun(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 8, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 5, 8, 0, 0), noReserve())
	f.submit(wl("low", "a", "research", 1, 4, 0))
	if res := f.cycle(0); len(res.Admitted) != 1 {
		t.Fatalf("low was not admitted: %+v", res)
	}
	f.submit(wl("big", "a", "production", 2, 8, 1))
	searched := 0
	f.s.hooks().searched = func(bool) { searched++ }
	res := f.cycle(1)
	if len(res.Admitted) != 0 || len(res.Preempted) != 0 {
		t.Fatalf("big cannot fit its quota, yet: %+v", res)
	}
	if searched != 0 {
		t.Fatalf("big's search ran %d times: the room it could have (8 of quota) is less than the 16 it asks", searched)
	}
	w := f.s.workloads["big"]
	fl := w.cands[0]
	if _, room, ok := f.s.candidatesOf(w, fl, kindOwn); ok || room != 8 {
		t.Fatalf("big's room on %s = %d (ok %v), want 8: 4 of quota left and the 4 GPUs of low", fl.name, room, ok)
	}
}
