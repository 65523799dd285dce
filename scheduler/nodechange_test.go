package scheduler

import (
	"fmt"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rebuilt is a scheduler made from scratch on b's nodes (in their order) with
// b's admitted workloads restored where they run: what a runner would rebuild.
func rebuilt(t *testing.T, b *busy) *Scheduler {
	t.Helper()
	s, err := New(b.cfg, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range b.s.nodes {
		if !n.removed {
			if err := s.AddNode(n.spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, w := range b.s.workloads {
		if w.state != stateAdmitted {
			continue
		}
		pods, _ := b.s.Admitted(id)
		if err := s.Restore(w.spec, pods); err != nil {
			t.Fatalf("restoring %s: %v", id, err)
		}
	}
	return s
}

// accounts is the state to compare, without the domains left empty (a
// relabelled node's old rack stays in the index, empty, until a rebuild).
func accounts(s *Scheduler) State {
	st := s.state()
	maps.DeleteFunc(st.DomainFree, func(_ string, free GPUs) bool { return free == 0 })
	return st
}

// Nodes removed, relabelled (removed and added again under their name) and
// added change the core in place, and leave it with the accounts a rebuild on
// the same nodes and running workloads would have, and its invariants.
func TestNodeChangesInPlaceMatchARebuild(t *testing.T) {
	b := newBusy(t, 300)
	extra := 0
	for step := range 120 {
		name := NodeName(fmt.Sprintf("n%d", b.rng.IntN(b.nodes)))
		n, exists := b.s.nodeByName[name]
		switch step % 4 {
		case 0: // removed
			if !exists {
				continue
			}
			ids, err := b.s.RemoveNode(name)
			if err != nil {
				t.Fatal(err)
			}
			b.gone(ids...)
		case 1: // relabelled: another rack
			if !exists {
				continue
			}
			spec := n.spec
			spec.Domains = append([]Domain(nil), spec.Domains...)
			spec.Domains[1].Name = fmt.Sprintf("r%d", b.rng.IntN(b.nodes/16+2))
			ids, err := b.s.RemoveNode(name)
			if err != nil {
				t.Fatal(err)
			}
			b.gone(ids...)
			spec.Unhealthy = false
			if err := b.s.AddNode(spec); err != nil {
				t.Fatal(err)
			}
		case 2: // added
			nd := benchNode(b.nodes + extra)
			extra++
			if err := b.s.AddNode(nd); err != nil {
				t.Fatal(err)
			}
		case 3:
			b.churn(t, 1+b.rng.IntN(5))
		}
		b.cycle(t)
		if err := b.s.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%10 != 9 {
			continue
		}
		r := rebuilt(t, b)
		if diff := cmp.Diff(accounts(r), accounts(b.s)); diff != "" {
			t.Fatalf("step %d: accounts in place differ from a rebuild (-rebuilt +in place):\n%s", step, diff)
		}
	}
	if _, err := b.s.RemoveNode("no-such-node"); err == nil {
		t.Error("removing an unknown node: no error")
	}
}
