package scheduler

import (
	"slices"
	"testing"
)

// The victim lists kept between searches are the lists a search would build
// from scratch, after any sequence of cycles, completions, arrivals and node
// faults: same candidates, same order, same verdict.
func TestVictimListsMatchAFreshSearch(t *testing.T) {
	b := newBusy(t, 400)
	fresh := func(w *workload, f *flavorState) ([]candidate, []candidate, bool) {
		kept := f.victims
		f.victims = nil
		defer func() { f.victims = kept }()
		return s2(b.s.candidates(w, f))
	}
	compared := 0
	for step := range 60 {
		switch step % 4 {
		case 0:
			b.churn(t, 1+b.rng.IntN(10))
		case 1:
			name := benchNode(b.rng.IntN(b.nodes)).Name
			ids, err := b.s.SetNodeHealth(name, false)
			if err != nil {
				t.Fatal(err)
			}
			b.gone(ids...)
			if _, err := b.s.SetNodeHealth(name, true); err != nil {
				t.Fatal(err)
			}
		}
		b.cycle(t)
		// Compare on every pending workload of a sample: the kept lists
		// (built by the first, reused by the next) against fresh ones.
		for _, w := range b.s.workloads {
			if w.state != statePending || b.rng.IntN(4) != 0 {
				continue
			}
			for _, f := range w.cands {
				r1, o1, ok1 := b.s.candidates(w, f)
				r2, o2, ok2 := fresh(w, f)
				if ok1 != ok2 || !slices.Equal(r1, r2) || !slices.Equal(o1, o2) {
					t.Fatalf("step %d, %s on %s: kept lists (%d, %d, %v) differ from fresh ones (%d, %d, %v)",
						step, w.spec.ID, f.name, len(r1), len(o1), ok1, len(r2), len(o2), ok2)
				}
				compared++
			}
		}
	}
	if compared < 100 {
		t.Fatalf("only %d searches compared", compared)
	}
}

// s2 copies the lists a search returns (the kept ones are reused in place).
func s2(r, o []candidate, ok bool) ([]candidate, []candidate, bool) {
	return slices.Clone(r), slices.Clone(o), ok
}
