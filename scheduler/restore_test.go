package scheduler

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A restored workload holds its nodes and quota exactly as if it had been
// admitted there: the state matches a scheduler that admitted it in a cycle.
func TestRestoreMatchesAdmission(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}
	nodes := rack("n", "a", 4, 8, 2, 0)
	live := newFx(t, cfg, nodes, noReserve())
	live.submit(withRequire(wl("g", "a", "production", 3, 4, 0), "rack"))
	res := live.cycle(0)
	if len(res.Admitted) != 1 {
		t.Fatalf("not admitted: %+v", res)
	}

	restored := newFx(t, cfg, nodes, noReserve())
	if err := restored.s.Restore(withRequire(wl("g", "a", "production", 3, 4, 0), "rack"), res.Admitted[0].Pods); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live.s.state(), restored.s.state()); diff != "" {
		t.Errorf("state after restore (-admitted +restored):\n%s", diff)
	}
	if err := restored.s.checkInvariants(); err != nil {
		t.Error(err)
	}
	// A restored workload is not pending and runs: it is finished like any other.
	if _, pending := restored.s.Reason("g"); pending {
		t.Error("restored workload reported pending")
	}
	if err := restored.s.Finish("g"); err != nil {
		t.Fatal(err)
	}
	if got := restored.s.state().NodeUsed; got["n-0"]+got["n-1"]+got["n-2"]+got["n-3"] != 0 {
		t.Errorf("GPUs still used after finish: %v", got)
	}
}

func TestRestoreRejectsBadPlacements(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 64, nil, nil), {Name: "b", Quota: map[Flavor]Quota{"z": {Nominal: 8}}}}}
	nodes := append(rack("n", "a", 2, 8, 0, 0), Node{Name: "z-0", Flavor: "z", GPUs: 8})
	for name, tc := range map[string]struct {
		w    Workload
		pods []PodPlacement
	}{
		"unknown node":            {wl("g", "a", "production", 1, 8, 0), []PodPlacement{{Node: "nope", Pods: 1}}},
		"too few pods":            {wl("g", "a", "production", 2, 8, 0), []PodPlacement{{Node: "n-0", Pods: 1}}},
		"over the node":           {wl("g", "a", "production", 2, 8, 0), []PodPlacement{{Node: "n-0", Pods: 2}}},
		"two flavors":             {wl("g", "a", "production", 2, 4, 0), []PodPlacement{{Node: "n-0", Pods: 1}, {Node: "z-0", Pods: 1}}},
		"flavor without quota":    {wl("g", "a", "production", 1, 8, 0), []PodPlacement{{Node: "z-0", Pods: 1}}},
		"unknown team":            {wl("g", "x", "production", 1, 8, 0), []PodPlacement{{Node: "n-0", Pods: 1}}},
		"zero pods on a node row": {wl("g", "a", "production", 1, 8, 0), []PodPlacement{{Node: "n-0", Pods: 1}, {Node: "n-1", Pods: 0}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFx(t, cfg, nodes, noReserve())
			before := f.s.state()
			if err := f.s.Restore(tc.w, tc.pods); err == nil {
				t.Fatal("Restore accepted a bad placement")
			}
			if diff := cmp.Diff(before, f.s.state()); diff != "" {
				t.Errorf("state changed by a rejected restore (-before +after):\n%s", diff)
			}
			// The ID is free again: the workload may be submitted afresh.
			if tc.w.Team == "a" {
				f.submit(wl("g", "a", "production", 1, 8, 1))
				if got := admittedIDs(f.cycle(1)); !cmp.Equal(got, []WorkloadID{"g"}) {
					t.Errorf("admitted after a rejected restore = %v", got)
				}
			}
		})
	}
}

// A quota lowered below what a team runs: the running work stays, the excess
// counts as borrowed and is reclaimed by a cohort team under its nominal; the
// team itself admits nothing until it is back under its limit.
func TestRestoreAboveLoweredQuota(t *testing.T) {
	cfg := Config{
		Cohorts: []Cohort{{Name: "ml"}},
		Teams:   []Team{teamQ("a", "ml", 8, lim(0), nil), teamQ("b", "ml", 24, nil, nil)},
	}
	f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), noReserve())
	// a runs 24 GPUs, although its nominal is now 8 and it may not borrow.
	for i, n := range []NodeName{"n-0", "n-1", "n-2"} {
		id := WorkloadID("run-" + string(n))
		if err := f.s.Restore(Workload{ID: id, Team: "a", Tier: "production", Pods: 1, GPUsPerPod: 8, Submitted: at(i)}, []PodPlacement{{Node: n, Pods: 1}}); err != nil {
			t.Fatal(err)
		}
		f.admitted[id] = Admission{Workload: id}
	}
	u := usageOf(f.s, "a")
	if u.Used != 24 || u.Borrowed != 16 {
		t.Errorf("a: used %d borrowed %d, want 24 and 16", u.Used, u.Borrowed)
	}
	// a's new work waits: it is over its quota, though a node is free.
	f.submit(wl("more", "a", "production", 1, 8, 10))
	f.cycle(10)
	if got := f.reasonCode("more"); got != ReasonOverQuota {
		t.Errorf("a's new work: reason %q, want %q", got, ReasonOverQuota)
	}
	// b, under its nominal, needs 16 GPUs: one node is free, one is reclaimed from a.
	f.submit(wl("b1", "b", "production", 2, 8, 11))
	res := f.cycle(11)
	if got := admittedIDs(res); !cmp.Equal(got, []WorkloadID{"b1"}) {
		t.Fatalf("admitted = %v, want b1", got)
	}
	if len(res.Preempted) != 1 || res.Preempted[0].Reason != PreemptReclaim {
		t.Fatalf("preempted = %+v, want one reclaim", res.Preempted)
	}
	// Most recently started first.
	if res.Preempted[0].Victim != "run-n-2" {
		t.Errorf("victim = %s, want run-n-2 (the latest)", res.Preempted[0].Victim)
	}
}

func TestRequeueFreesAndBacksOff(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, rack("n", "a", 2, 8, 0, 0), Options{ReserveAfter: -1, Backoff: 30e9})
	f.submit(wl("g", "a", "production", 2, 8, 0))
	before := f.s.state()
	f.cycle(0)
	if err := f.s.Requeue("g"); err != nil {
		t.Fatal(err)
	}
	delete(f.admitted, "g")
	after := f.s.state()
	if diff := cmp.Diff(before.NodeUsed, after.NodeUsed); diff != "" {
		t.Errorf("nodes after requeue (-before +after):\n%s", diff)
	}
	if got := f.reasonCode("g"); got != ReasonBackoff {
		t.Errorf("reason = %q, want Backoff", got)
	}
	if res := f.cycle(10); len(res.Admitted) != 0 {
		t.Errorf("admitted during the backoff: %+v", res.Admitted)
	}
	if res := f.cycle(31); len(res.Admitted) != 1 {
		t.Errorf("not admitted after the backoff: %+v", res)
	}
	if err := f.s.Requeue("nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Requeue of an unknown workload: %v", err)
	}
}

func TestUsageReportsBorrowedAndLent(t *testing.T) {
	cfg := Config{
		Cohorts: []Cohort{{Name: "ml"}},
		Teams:   []Team{teamQ("a", "ml", 8, nil, nil), teamQ("b", "ml", 16, nil, nil), teamQ("c", "ml", 8, nil, lim(0))},
	}
	f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), noReserve())
	f.submit(wl("big", "a", "production", 3, 8, 0), wl("q", "a", "research", 1, 8, 1))
	f.cycle(0)
	a, b, c := usageOf(f.s, "a"), usageOf(f.s, "b"), usageOf(f.s, "c")
	// a uses 24 of nominal 8: 16 borrowed, all from b (c lends nothing).
	if a.Used != 24 || a.Borrowed != 16 || a.Lent != 0 {
		t.Errorf("a = %+v", a)
	}
	if b.Lent != 16 || c.Lent != 0 {
		t.Errorf("lent: b %d (want 16), c %d (want 0)", b.Lent, c.Lent)
	}
	all := f.s.Usage()
	if all[0].Admitted != 1 || all[0].Pending["research"] != 1 {
		t.Errorf("a: admitted %d pending %v, want 1 and research:1", all[0].Admitted, all[0].Pending)
	}
}

func usageOf(s *Scheduler, team TeamName) FlavorUsage {
	for _, u := range s.Usage() {
		if u.Team == team {
			return u.Flavors[0]
		}
	}
	return FlavorUsage{}
}

// TestNoPreemption: with Options.NoPreemption (a fleet's hub) a team under
// its nominal waits for what others borrow to end instead of reclaiming it.
func TestNoPreemption(t *testing.T) {
	cfg := Config{Cohorts: []Cohort{{Name: "ml"}}, Teams: []Team{teamQ("a", "ml", 16, nil, nil), teamQ("b", "ml", 16, nil, nil)}}
	for _, no := range []bool{false, true} {
		f := newFx(t, cfg, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: -1, NoPreemption: no})
		f.submit(wl("a1", "a", "production", 4, 8, 0))
		f.cycle(0)
		f.submit(wl("b1", "b", "production", 1, 8, 1))
		res := f.cycle(1)
		if got := len(res.Preempted) > 0; got == no {
			t.Errorf("NoPreemption %v: preempted %+v", no, res.Preempted)
		}
		if no && f.reasonCode("b1") == "" {
			t.Errorf("NoPreemption: b1 admitted, want it waiting")
		}
	}
}
