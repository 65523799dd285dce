package scheduler

import (
	"math"
	"strings"
	"testing"
)

// TestSubmitRefusesWorkloadsBeyondAnyFleet: a pod's GPU request and a Job's size
// come from whoever writes the pod; a workload whose GPUs overflow 64 bits
// (2^62 pods of 4 GPUs is 0 GPUs in int64) must be refused, not admitted for
// nothing.
func TestSubmitRefusesWorkloadsBeyondAnyFleet(t *testing.T) {
	for name, tc := range map[string]struct{ pods, gpp int64 }{
		"overflowing product": {pods: 1 << 62, gpp: 4},
		"too many pods":       {pods: MaxPods + 1, gpp: 1},
		"too many GPUs a pod": {pods: 1, gpp: MaxGPUsPerPod + 1},
		"max int64 GPUs":      {pods: 1, gpp: 1<<63 - 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFx(t, Config{Teams: []Team{teamQ("a", "", 8, nil, nil)}}, rack("n", "h", 1, 8, 0, 0), noReserve())
			err := f.s.Submit(wl("w", "a", "production", tc.pods, tc.gpp, 0))
			if err == nil || !strings.Contains(err.Error(), "more than any fleet holds") {
				t.Fatalf("Submit(%d x %d) = %v, want refused as beyond any fleet", tc.pods, tc.gpp, err)
			}
		})
	}
}

// A team's weight is checked where every quota tree arrives, in the core: zero
// is the default of 1, anything else not a positive finite number is refused.
func TestTeamWeightChecked(t *testing.T) {
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		cfg := Config{Tiers: tiers, Teams: []Team{{Name: "a", Weight: w, Quota: map[Flavor]Quota{"a": {Nominal: 8}}}}}
		if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "weight") {
			t.Errorf("weight %v: error %v, want one naming the weight", w, err)
		}
	}
	for _, w := range []float64{0, 0.5, 3} {
		cfg := Config{Tiers: tiers, Teams: []Team{{Name: "a", Weight: w, Quota: map[Flavor]Quota{"a": {Nominal: 8}}}}}
		if _, err := New(cfg, Options{}); err != nil {
			t.Errorf("weight %v: %v", w, err)
		}
	}
}
