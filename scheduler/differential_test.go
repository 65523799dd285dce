package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// bruteFits searches every assignment of pods to nodes (free GPUs per node) and
// says whether pods pods of gpp GPUs fit.
func bruteFits(free []GPUs, gpp GPUs, pods int64) bool {
	if pods == 0 {
		return true
	}
	for i := range free {
		if free[i] >= gpp {
			free[i] -= gpp
			ok := bruteFits(free, gpp, pods-1)
			free[i] += gpp
			if ok {
				return true
			}
		}
	}
	return false
}

// bruteWant says whether w fits, by brute force, on nodes of the free GPUs all
// or, when w requires a rack, on those of one rack of free; and then the least
// free GPUs of a rack where it fits (-1 when it does not).
func bruteWant(w Workload, all []GPUs, free map[string][]GPUs) (bool, GPUs) {
	if w.Require == "" {
		return bruteFits(all, w.GPUsPerPod, w.Pods), -1
	}
	var want bool
	bestFree := GPUs(-1)
	for _, fr := range free {
		if bruteFits(fr, w.GPUsPerPod, w.Pods) {
			want = true
			var sum GPUs
			for _, x := range fr {
				sum += x
			}
			if bestFree < 0 || sum < bestFree {
				bestFree = sum
			}
		}
	}
	return want, bestFree
}

// TestPlacementAgainstBruteForce: on small random fleets with random load, a
// gang is placed exactly when a brute-force search finds room, in a domain of
// the required level when one is required, and in the fitting domain that leaves
// the least free capacity (best fit).
func TestPlacementAgainstBruteForce(t *testing.T) {
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		nodes := rack("n", "a", 2+rng.IntN(5), GPUs(2+rng.IntN(7)), 1+rng.IntN(3), 0)
		f := newFx(t, Config{Teams: []Team{teamQ("a", "", 1000, nil, nil)}}, nodes, noReserve())
		for i := range rng.IntN(8) {
			f.submit(wl(fmt.Sprintf("fill%d", i), "a", "production", 1, GPUs(1+rng.IntN(4)), 0))
		}
		f.cycle(0)
		free := map[string][]GPUs{} // per rack
		var all []GPUs
		for _, n := range f.s.nodes {
			free[n.spec.Domains[0].Name] = append(free[n.spec.Domains[0].Name], n.free())
			all = append(all, n.free())
		}
		w := wl("g", "a", "production", int64(1+rng.IntN(4)), GPUs(1+rng.IntN(4)), 1)
		if rng.IntN(2) == 0 {
			w.Require = "rack"
		}
		f.submit(w)
		res := f.cycle(1)
		placed := len(res.Admitted) == 1
		want, bestFree := bruteWant(w, all, free)
		if placed != want {
			t.Fatalf("seed %d: placed = %v, brute force says %v (gang %dx%d, require %q, free %v)", seed, placed, want, w.Pods, w.GPUsPerPod, w.Require, free)
		}
		if placed && w.Require != "" {
			rackName := res.Admitted[0].Domain.Name
			var sum GPUs
			for _, x := range free[rackName] {
				sum += x
			}
			if sum != bestFree {
				t.Errorf("seed %d: chose rack %s with %d free, best fit has %d", seed, rackName, sum, bestFree)
			}
		}
	}
}
