package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBestFitDomain(t *testing.T) {
	for name, tc := range map[string]struct {
		first    []Workload
		gang     Workload
		wantRack string
	}{
		// Racks r0 (2 free after x), r1 (4 free): a 2-node gang takes r0 and keeps r1 whole.
		"the rack left with the least free capacity": {
			first:    []Workload{withRequire(wl("x", "a", "production", 2, 8, 0), "rack")},
			gang:     withRequire(wl("g", "a", "production", 2, 8, 1), "rack"),
			wantRack: "n-r0",
		},
		"prefer uses the level when it fits": {
			first:    []Workload{withRequire(wl("x", "a", "production", 3, 8, 0), "rack")},
			gang:     withPrefer(wl("g", "a", "production", 1, 8, 1), "rack"),
			wantRack: "n-r0",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, rack("n", "a", 8, 8, 4, 0), noReserve())
			f.submit(tc.first...)
			f.cycle(0)
			f.submit(tc.gang)
			res := f.cycle(1)
			if len(res.Admitted) != 1 || res.Admitted[0].Domain == nil {
				t.Fatalf("gang not admitted in a domain: %+v, reason %v", res, f.s.workloads[tc.gang.ID].reason)
			}
			if got := res.Admitted[0].Domain.Name; got != tc.wantRack {
				t.Errorf("domain = %s, want %s", got, tc.wantRack)
			}
		})
	}
}

func TestNodeFailureRequeuesGangWholeAheadOfItsTier(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, rack("n", "a", 3, 8, 0, 0), noReserve())
	f.submit(wl("g", "a", "research", 2, 8, 0))
	f.cycle(0)
	f.submit(wl("other", "a", "research", 2, 8, 1))
	f.cycle(1)
	victim := f.nodesOf("g")[0]
	evicted, err := f.s.SetNodeHealth(victim, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]WorkloadID{"g"}, evicted); diff != "" {
		t.Fatalf("evicted (-want +got):\n%s", diff)
	}
	delete(f.admitted, "g")
	// Two healthy nodes are left, both free once g is gone: g goes first, though
	// "other" was submitted at the same tier and waited in the queue.
	res := f.cycle(2)
	if diff := cmp.Diff([]WorkloadID{"g"}, admittedIDs(res)); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	for _, n := range f.nodesOf("g") {
		if n == victim {
			t.Errorf("g placed on failed node %s", n)
		}
	}
	if got := f.s.Restarts("g"); got != 1 {
		t.Errorf("restarts = %d, want 1", got)
	}
}

// A workload resubmitted with its restarts (its pods made anew after a fault)
// goes ahead of its tier like one the core requeued itself.
func TestResubmittedRestartGoesAheadOfItsTier(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, rack("n", "a", 2, 8, 0, 0), noReserve())
	f.submit(wl("other", "a", "research", 2, 8, 0))
	again := wl("g", "a", "research", 2, 8, 1)
	again.Restarts = 2
	f.submit(again)
	res := f.cycle(2)
	if diff := cmp.Diff([]WorkloadID{"g"}, admittedIDs(res)); diff != "" {
		t.Errorf("admitted (-want +got):\n%s", diff)
	}
	if got := f.s.Restarts("g"); got != 2 {
		t.Errorf("restarts = %d, want 2", got)
	}
}

func TestReservationStopsSmallWorkFromStarvingAGang(t *testing.T) {
	run := func(reserveAfter time.Duration) (gangStart int) {
		f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, rack("n", "a", 4, 8, 0, 0), Options{ReserveAfter: reserveAfter})
		// Each node runs one small job; a new small job arrives every 10s and every
		// small job runs 40s, so there is always one to backfill a free node.
		for i := range 4 {
			f.submit(wl(fmt.Sprintf("s%d", i), "a", "production", 1, 8, 0))
		}
		f.cycle(0)
		f.submit(wl("gang", "a", "production", 4, 8, 1))
		ends := map[WorkloadID]int{"s0": 10, "s1": 20, "s2": 30, "s3": 40}
		next := 4
		for now := 10; now <= 2000; now += 10 {
			for id, end := range ends {
				if end == now {
					f.finish(id)
					delete(ends, id)
				}
			}
			id := WorkloadID(fmt.Sprintf("s%d", next))
			next++
			f.submit(wl(string(id), "a", "production", 1, 8, now))
			res := f.cycle(now)
			for _, a := range res.Admitted {
				if a.Workload == "gang" {
					return now
				}
				ends[a.Workload] = now + 40
			}
		}
		return -1
	}
	if got := run(-1); got != -1 {
		t.Errorf("without reservations the gang started at %d; the test's stream of small jobs should starve it", got)
	}
	got := run(60 * time.Second)
	if got < 0 || got > 200 {
		t.Errorf("with a reservation after 60s the gang started at %d, want within 200s", got)
	}
}

func TestGangTimeoutEvictsAndBacksOff(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}, rack("n", "a", 2, 8, 0, 0),
		Options{ReserveAfter: -1, GangTimeout: time.Minute, Backoff: 30 * time.Second})
	f.submit(wl("g", "a", "production", 2, 8, 0))
	if res := f.s.Cycle(at(0)); len(res.Admitted) != 1 {
		t.Fatalf("not admitted")
	}
	// The runner never reports the pods running.
	res := f.s.Cycle(at(60))
	if len(res.Evicted) != 1 || res.Evicted[0].Workload != "g" {
		t.Fatalf("evicted = %+v, want g", res.Evicted)
	}
	if c := f.s.workloads["g"].reason.Code; c != ReasonBackoff {
		t.Errorf("reason = %s, want %s", c, ReasonBackoff)
	}
	if !res.Wake.Equal(at(90)) {
		t.Errorf("wake = %v, want %v", res.Wake, at(90))
	}
	if res := f.s.Cycle(at(90)); len(res.Admitted) != 1 {
		t.Errorf("not readmitted after the backoff")
	}
}

func TestWhatIfRestoresTheState(t *testing.T) {
	f := newFx(t, Config{Cohorts: []Cohort{{Name: "ml"}}, Teams: []Team{teamQ("a", "ml", 16, nil, nil), teamQ("b", "ml", 16, nil, nil)}},
		rack("n", "a", 4, 8, 2, 0), noReserve())
	f.submit(wl("a1", "a", "research", 3, 8, 0), withRequire(wl("b1", "b", "research", 1, 4, 0), "rack"))
	f.cycle(0)
	before := f.s.state()
	restore := f.s.WhatIfEvict("a1", "b1")
	if after := f.s.state(); cmp.Equal(before, after) {
		t.Fatalf("what-if eviction changed nothing")
	}
	restore()
	if diff := cmp.Diff(before, f.s.state()); diff != "" {
		t.Errorf("state after restore (-before +after):\n%s", diff)
	}
}
