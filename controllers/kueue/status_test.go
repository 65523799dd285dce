package kueue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// TestMeter: GPU time is the usage recorded last times the whole seconds
// since MeteredAt, which moves by those seconds only (the fraction waits for
// the next call); the first call only starts the clock.
func TestMeter(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	m, at := meter(allotv1.TeamStatus{}, t0.Add(300*time.Millisecond))
	if m != nil || !at.Time.Equal(t0) {
		t.Fatalf("first call: %v at %v, want nothing at %v", m, at, t0)
	}
	s := allotv1.TeamStatus{MeteredAt: at,
		Flavors: []allotv1.FlavorUsage{{Flavor: "h100", UsedGPUs: 4}, {Flavor: "a100", UsedGPUs: 0}},
		Metered: []allotv1.MeteredUsage{{Flavor: "h100", Tier: "production", GPUSeconds: 7}, {Flavor: "h100", Tier: TierAll, GPUSeconds: 100}}}
	m, at = meter(s, t0.Add(10*time.Second+900*time.Millisecond))
	want := []allotv1.MeteredUsage{{Flavor: "h100", Tier: TierAll, GPUSeconds: 140}, {Flavor: "h100", Tier: "production", GPUSeconds: 7}}
	if d := cmp.Diff(want, m); d != "" || !at.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after 10.9 s of 4 GPUs: at %v (-want +got):\n%s", at, d)
	}
	s.Metered, s.MeteredAt = m, at
	if m2, at2 := meter(s, t0.Add(10*time.Second+999*time.Millisecond)); !cmp.Equal(m2, m) || at2 != at {
		t.Errorf("under a second later: %v at %v, want unchanged", m2, at2)
	}
	s.Flavors = []allotv1.FlavorUsage{{Flavor: "t4", UsedGPUs: 2}}
	if m3, _ := meter(s, t0.Add(12*time.Second)); len(m3) != 3 || m3[2] != (allotv1.MeteredUsage{Flavor: "t4", Tier: TierAll, GPUSeconds: 4}) {
		t.Errorf("a new flavor: %v", m3)
	}
	if s.MeteredAt.Time != t0.Add(10*time.Second) {
		t.Error("meter changed its input")
	}
}
