package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// GPUs held on a node by work the scheduler does not place are not given out;
// releasing them lets the waiting work in, and the index stays whole throughout.
func TestHoldKeepsHeldGPUs(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 2, 8, 0, 0), noReserve())
	for _, n := range []NodeName{"n-0", "n-1"} {
		if err := f.s.Hold(n, 6); err != nil {
			t.Fatal(err)
		}
	}
	f.submit(wl("big", "a", "production", 1, 4, 0))
	f.submit(wl("small", "a", "production", 2, 2, 0))
	res := f.cycle(0)
	if got := admittedIDs(res); !cmp.Equal(got, []WorkloadID{"small"}) {
		t.Fatalf("admitted with 6 of 8 GPUs held on each node = %v, want only small", got)
	}
	r, _ := f.s.Reason("big")
	if r.Code != ReasonInsufficientNodes || r.Available != 0 || r.Limit != 4 || r.Held != 12 {
		t.Errorf("reason of the gang that does not fit = %+v, want %s with 0 of 4 GPUs, 12 held", r, ReasonInsufficientNodes)
	}
	if msg := r.String(); !strings.Contains(msg, "4 healthy in all, 12 more held") {
		t.Errorf("reason says %q, want the held GPUs named", msg)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// Holding more than is free over-commits nothing the scheduler placed.
	if err := f.s.Hold("n-0", 8); err != nil {
		t.Fatal(err)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := admittedIDs(f.cycle(1)); len(got) != 0 {
		t.Fatalf("admitted %v with the nodes full", got)
	}
	// Released: the gang goes in on the node that was freed.
	if err := f.s.Hold("n-1", 0); err != nil {
		t.Fatal(err)
	}
	if got := admittedIDs(f.cycle(2)); !cmp.Equal(got, []WorkloadID{"big"}) {
		t.Fatalf("admitted after the release = %v, want big", got)
	}
	if got := f.nodesOf("big"); !cmp.Equal(got, []NodeName{"n-1"}) {
		t.Errorf("big placed on %v, want the released n-1", got)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A held node that turns unhealthy and back keeps its hold: the flavor's
// capacity is the nodes' GPUs less what is held, before and after.
func TestHoldSurvivesHealthChanges(t *testing.T) {
	cfg := Config{Teams: []Team{teamQ("a", "", 64, nil, nil)}}
	f := newFx(t, cfg, rack("n", "a", 2, 8, 0, 0), noReserve())
	if err := f.s.Hold("n-0", 3); err != nil {
		t.Fatal(err)
	}
	capacity := func() (GPUs, GPUs) { return f.s.flavors["a"].All.Capacity, f.s.flavors["a"].held }
	if c, h := capacity(); c != 13 || h != 3 {
		t.Fatalf("capacity, held with 3 held = %d, %d; want 13, 3", c, h)
	}
	if _, err := f.s.SetNodeHealth("n-0", false); err != nil {
		t.Fatal(err)
	}
	if c, h := capacity(); c != 8 || h != 0 {
		t.Fatalf("capacity, held with n-0 unhealthy = %d, %d; want 8, 0", c, h)
	}
	if err := f.s.Hold("n-0", 1); err != nil { // changed while unhealthy
		t.Fatal(err)
	}
	if _, err := f.s.SetNodeHealth("n-0", true); err != nil {
		t.Fatal(err)
	}
	if c, h := capacity(); c != 15 || h != 1 {
		t.Fatalf("capacity, held with n-0 back and 1 held = %d, %d; want 15, 1", c, h)
	}
	f.submit(wl("g", "a", "production", 2, 7, 0))
	if got := admittedIDs(f.cycle(0)); !cmp.Equal(got, []WorkloadID{"g"}) {
		t.Fatalf("admitted = %v, want g on the 7 free GPUs of each node", got)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestHoldRejectsBadInput(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 8, nil, nil)}}, rack("n", "a", 1, 8, 0, 0), noReserve())
	if err := f.s.Hold("nope", 1); !errors.Is(err, ErrUnknown) {
		t.Errorf("Hold on an unknown node: %v, want ErrUnknown", err)
	}
	if err := f.s.Hold("n-0", -1); err == nil {
		t.Error("Hold of negative GPUs accepted")
	}
}

// A workload found running on a node whose GPUs are held (a cordoned node, or
// another scheduler's pods beside it) is restored: what runs is a fact.
func TestRestoreOnAHeldNode(t *testing.T) {
	f := newFx(t, Config{Teams: []Team{teamQ("a", "", 16, nil, nil)}}, rack("n", "a", 1, 8, 0, 0), noReserve())
	if err := f.s.Hold("n-0", 8); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Restore(wl("g", "a", "production", 1, 4, 0), []PodPlacement{{Node: "n-0", Pods: 1}}); err != nil {
		t.Fatalf("Restore on a held node: %v", err)
	}
	if err := f.s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	// The node's GPUs are still not the scheduler's to give.
	f.submit(wl("new", "a", "production", 1, 4, 0))
	if got := admittedIDs(f.cycle(0)); len(got) != 0 {
		t.Fatalf("admitted %v on a held node", got)
	}
	// Two restores of the same GPUs are refused.
	if err := f.s.Restore(wl("h", "a", "production", 1, 8, 0), []PodPlacement{{Node: "n-0", Pods: 1}}); err == nil {
		t.Error("a second restore over the node's GPUs was accepted")
	}
}
