package elastic

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/schema"
)

var t0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

func pool(fixed, spare, most int64) Pool {
	return Pool{Fixed: fixed, Spare: spare, Max: most, GPUsPerNode: 8, Named: true, Repair: &schema.Repair{
		After: 15 * time.Minute, MaxNodes: 1, Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: 24 * time.Hour}}
}

// fleet is a pool's nodes by name: "+" usable, "-" unusable, "*" busy.
func fleet(spec ...string) []Node {
	var out []Node
	for _, s := range spec {
		n := Node{Name: s[:1], Usable: true, HealthyGPUs: 8}
		for _, c := range s[1:] {
			switch c {
			case '-':
				n.Usable, n.HealthyGPUs = false, 0
			case '*':
				n.Busy = true
			}
		}
		out = append(out, n)
	}
	return out
}

func kinds(d Decision) []ActionKind {
	var out []ActionKind
	for _, a := range d.Actions {
		out = append(out, a.Kind)
	}
	return out
}

type step struct {
	at      time.Duration
	nodes   []Node
	target  int64
	retired []string
	actions []ActionKind
}

func run(t *testing.T, p Pool, steps []step) State {
	t.Helper()
	var st State
	for i, s := range steps {
		var d Decision
		st, d = Repair(p, st, s.nodes, t0.Add(s.at))
		if d.Target != s.target || !slices.Equal(d.Retired, s.retired) || !slices.Equal(kinds(d), s.actions) {
			t.Fatalf("step %d (%s): target %d, retired %v, actions %v; want %d, %v, %v\n%+v", i, s.at, d.Target, d.Retired, kinds(d), s.target, s.retired, s.actions, d.Actions)
		}
		// A decision is a fixed point: deciding again on the same view does
		// nothing more.
		again, d2 := Repair(p, st, s.nodes, t0.Add(s.at))
		if diff := cmp.Diff(st, again); diff != "" || !still(d2) || d2.Target != d.Target {
			t.Fatalf("step %d: deciding again changed the state (%s) or acted: %v", i, diff, kinds(d2))
		}
	}
	return st
}

func TestReplaceThenRetireOnceTheGangLeft(t *testing.T) {
	p := pool(4, 0, 6)
	run(t, p, []step{
		{0, fleet("a*", "b", "c", "d"), 4, nil, nil},
		{time.Minute, fleet("a-*", "b", "c", "d"), 4, nil, nil}, // within the grace
		{16 * time.Minute, fleet("a-*", "b", "c", "d"), 5, nil, []ActionKind{ActionReplace}},
		{20 * time.Minute, fleet("a-*", "b", "c", "d", "e"), 5, nil, nil}, // the gang is still on a
		{25 * time.Minute, fleet("a-", "b", "c", "d", "e*"), 4, []string{"a"}, []ActionKind{ActionRetire}},
		{30 * time.Minute, fleet("b", "c", "d", "e*"), 4, nil, nil}, // a removed: forgotten
	})
}

func TestNotRetiredBeforeItsReplacementIsThere(t *testing.T) {
	p := pool(4, 0, 6)
	run(t, p, []step{
		{0, fleet("a-", "b", "c", "d"), 4, nil, nil},
		{16 * time.Minute, fleet("a-", "b", "c", "d"), 5, nil, []ActionKind{ActionReplace}},
		// The replacement is not registered yet: a keeps its seat.
		{17 * time.Minute, fleet("a-", "b", "c", "d"), 5, nil, nil},
		// Registered but not usable yet (within its grace): still not covered.
		{18 * time.Minute, fleet("a-", "b", "c", "d", "e-"), 5, nil, nil},
		{19 * time.Minute, fleet("a-", "b", "c", "d", "e"), 4, []string{"a"}, []ActionKind{ActionRetire}},
	})
}

func TestRecoveredNodeGivesItsReplacementBack(t *testing.T) {
	p := pool(4, 0, 6)
	st := run(t, p, []step{
		{0, fleet("a-*", "b", "c", "d"), 4, nil, nil},
		{16 * time.Minute, fleet("a-*", "b", "c", "d"), 5, nil, []ActionKind{ActionReplace}},
		{20 * time.Minute, fleet("a-*", "b", "c", "d", "e"), 5, nil, nil},
		{22 * time.Minute, fleet("a*", "b", "c", "d", "e"), 4, nil, []ActionKind{ActionGiveBack}},
	})
	// The failure stays on record: it counts towards flapping.
	if len(st.Nodes) != 1 || st.Nodes[0].Name != "a" || len(st.Nodes[0].Failures) != 1 || !st.Nodes[0].UnusableSince.IsZero() {
		t.Errorf("state = %+v", st)
	}
}

func TestGiveBackWaitsForANodeWithoutAGang(t *testing.T) {
	p := pool(2, 0, 4)
	run(t, p, []step{
		{0, fleet("a-*", "b*"), 2, nil, nil},
		{16 * time.Minute, fleet("a-*", "b*"), 3, nil, []ActionKind{ActionReplace}},
		{17 * time.Minute, fleet("a*", "b*", "c*"), 3, nil, nil},
		{18 * time.Minute, fleet("a*", "b*", "c"), 2, nil, []ActionKind{ActionGiveBack}},
	})
}

func TestFlappingNodeIsRetiredOnce(t *testing.T) {
	p := pool(4, 0, 6)
	h := time.Hour
	run(t, p, []step{
		{0, fleet("a-", "b", "c", "d"), 4, nil, nil},
		{5 * time.Minute, fleet("a", "b", "c", "d"), 4, nil, nil},
		{1 * h, fleet("a-", "b", "c", "d"), 4, nil, nil},
		{1*h + 5*time.Minute, fleet("a*", "b", "c", "d"), 4, nil, nil},
		// The third failure within 24h retires it although it is busy: the
		// seat it leaves is filled by a new node (the target stays).
		{2 * h, fleet("a-*", "b", "c", "d"), 4, []string{"a"}, []ActionKind{ActionFlapping}},
		{2*h + 5*time.Minute, fleet("a*", "b", "c", "d"), 4, []string{"a"}, nil},
		{3 * h, fleet("a-", "b", "c", "d", "e"), 4, []string{"a"}, nil},
	})
	// Failures further apart than the window do not add up.
	run(t, p, []step{
		{0, fleet("a-", "b", "c", "d"), 4, nil, nil},
		{5 * time.Minute, fleet("a", "b", "c", "d"), 4, nil, nil},
		{13 * h, fleet("a-", "b", "c", "d"), 4, nil, nil},
		{13*h + 5*time.Minute, fleet("a", "b", "c", "d"), 4, nil, nil},
		{25 * h, fleet("a-", "b", "c", "d"), 4, nil, nil},
	})
}

func TestReplacementsStayWithinTheirBounds(t *testing.T) {
	// Two nodes lost, one replacement allowed at once.
	run(t, pool(4, 0, 8), []step{
		{0, fleet("a-*", "b-*", "c", "d"), 4, nil, nil},
		{16 * time.Minute, fleet("a-*", "b-*", "c", "d"), 5, nil, []ActionKind{ActionReplace, ActionAtMax}},
	})
	// At nodes.max: nothing to add, said once while it lasts, and again
	// when it starts again.
	run(t, pool(4, 0, 4), []step{
		{0, fleet("a-*", "b", "c", "d"), 4, nil, nil},
		{16 * time.Minute, fleet("a-*", "b", "c", "d"), 4, nil, []ActionKind{ActionAtMax}},
		{20 * time.Minute, fleet("a-*", "b", "c", "d"), 4, nil, nil},
		{21 * time.Minute, fleet("a", "b", "c", "d"), 4, nil, nil},
		{22 * time.Minute, fleet("a-*", "b", "c", "d"), 4, nil, nil},
		{40 * time.Minute, fleet("a-*", "b", "c", "d"), 4, nil, []ActionKind{ActionAtMax}},
	})
}

func TestSpareNodesCoverALostNode(t *testing.T) {
	// The quotas need 4 nodes of 5: a lost node is retired without a
	// replacement, and its seat is filled again at the planned size.
	run(t, pool(5, 1, 6), []step{
		{0, fleet("a-", "b", "c", "d", "e"), 5, nil, nil},
		{16 * time.Minute, fleet("a-", "b", "c", "d", "e"), 5, []string{"a"}, []ActionKind{ActionRetire}},
	})
}

func TestPartlyHealthyNodeIsMadeUpFor(t *testing.T) {
	p := pool(4, 0, 6)
	nodes := fleet("a", "b", "c", "d")
	nodes[0].HealthyGPUs = 6
	// Within the grace it counts whole; after it, with what it offers. It
	// is never retired: it still serves.
	st, d := Repair(p, State{}, nodes, t0)
	if d.Target != 4 || len(st.Nodes) != 1 {
		t.Fatalf("within the grace: target %d, state %+v", d.Target, st)
	}
	st, d = Repair(p, st, nodes, t0.Add(16*time.Minute))
	if d.Target != 5 || st.Replacements != 1 || len(d.Retired) != 0 {
		t.Fatalf("after the grace: target %d, replacements %d, retired %v; want 5, 1, none", d.Target, st.Replacements, d.Retired)
	}
	// Back to 8 GPUs: the replacement is given back (the highest seat, e, is
	// idle), and the episode counts as a failure.
	nodes = fleet("a", "b", "c", "d", "e")
	st, d = Repair(p, st, nodes, t0.Add(20*time.Minute))
	if d.Target != 4 || len(st.Nodes) != 1 || len(st.Nodes[0].Failures) != 1 {
		t.Fatalf("recovered: target %d, state %+v", d.Target, st)
	}
}

func TestGiveBackInANamedPoolNeedsTheLastSeatIdle(t *testing.T) {
	p := pool(2, 0, 4)
	run(t, p, []step{
		{0, fleet("a-", "b"), 2, nil, nil},
		{16 * time.Minute, fleet("a-", "b"), 3, nil, []ActionKind{ActionReplace}},
		// a recovers, but the replacement c, the last seat, took a gang.
		{17 * time.Minute, fleet("a", "b", "c*"), 3, nil, nil},
		{18 * time.Minute, fleet("a", "b", "c"), 2, nil, []ActionKind{ActionGiveBack}},
	})
}

func TestCountPoolHoldsTheReplacementUntilTheBrokenNodeIsGone(t *testing.T) {
	p := pool(2, 0, 4)
	p.Named = false
	run(t, p, []step{
		{0, fleet("a-", "b"), 2, nil, nil},
		{16 * time.Minute, fleet("a-", "b"), 3, nil, []ActionKind{ActionReplace}},
		// Retired (cordoned), but the cloud's group of a count removes
		// nodes of its choosing: the replacement stays.
		{20 * time.Minute, fleet("a-", "b", "c"), 3, []string{"a"}, []ActionKind{ActionRetire}},
		{25 * time.Minute, fleet("a-", "b", "c"), 3, []string{"a"}, nil},
		// Someone (the cloud's auto-repair) removed a: the count comes back.
		{30 * time.Minute, fleet("b", "c"), 2, nil, nil},
	})
}

func TestAnOutageIsNoFlapping(t *testing.T) {
	p := pool(4, 0, 6)
	h := time.Hour
	// Every node goes NotReady three times within the window: an outage of
	// the pool, not of its nodes; nothing is retired.
	var st State
	for i := range 3 {
		at := time.Duration(i) * h
		st, _ = Repair(p, st, fleet("a-", "b-", "c-", "d-"), t0.Add(at))
		var d Decision
		st, d = Repair(p, st, fleet("a", "b", "c", "d"), t0.Add(at+time.Minute))
		if len(d.Retired) != 0 {
			t.Fatalf("outage %d: retired %v", i, d.Retired)
		}
	}
	for _, ns := range st.Nodes {
		if len(ns.Failures) != 0 {
			t.Errorf("node %s has failures %v from an outage", ns.Name, ns.Failures)
		}
	}
}

func TestWithoutRepairNothingIsHeld(t *testing.T) {
	p := pool(4, 0, 6)
	p.Repair, p.Burst = nil, &schema.Burst{MaxNodes: 2, IdleAfter: time.Hour}
	st, d := Repair(p, State{Replacements: 2, Burst: 1, Nodes: []NodeState{{Name: "x", Retired: true}}}, fleet("a-"), t0)
	if d.Target != 5 || st.Replacements != 0 || !slices.Equal(d.Retired, []string{"x"}) {
		t.Errorf("target %d, state %+v, retired %v", d.Target, st, d.Retired)
	}
}

// TestRepairHoldsItsBounds drives random pools through random histories and
// checks what must hold after every decision: the target within the plan and
// nodes.max, replacements within repair.maxNodes, a node with a gang never
// retired unless it flaps, records bounded, and each decision a fixed point.
func TestRepairHoldsItsBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 1))
	for trial := range 300 {
		fixed := 1 + rng.Int64N(6)
		p := pool(fixed, rng.Int64N(2), fixed+rng.Int64N(4))
		p.Repair.MaxNodes = rng.Int64N(3)
		p.Repair.Flaps = 2 + rng.IntN(3)
		p.Named = rng.IntN(3) > 0
		if rng.IntN(4) == 0 {
			p.Repair.Broken = schema.BrokenKeep
		}
		var st State
		names := []string{}
		for i := range fixed {
			names = append(names, fmt.Sprintf("n%d", i))
		}
		now := t0
		for s := range 60 {
			now = now.Add(time.Duration(1+rng.IntN(30)) * time.Minute)
			var nodes []Node
			for _, name := range names {
				n := Node{Name: name, Usable: rng.IntN(5) > 0, Busy: rng.IntN(3) == 0}
				if n.Usable {
					n.HealthyGPUs = 8 - rng.Int64N(2)*rng.Int64N(8)
				}
				nodes = append(nodes, n)
			}
			before := map[string]bool{}
			for _, ns := range st.Nodes {
				before[ns.Name] = ns.Retired
			}
			next, d := Repair(p, st, nodes, now)
			var kept int64
			for _, n := range nodes {
				if p.Named && slices.Contains(d.Kept, n.Name) {
					kept++
				}
			}
			if d.Target+kept > max(p.Fixed, p.Max) || d.Target < 0 || next.Replacements < 0 || next.Replacements > p.Repair.MaxNodes {
				t.Fatalf("trial %d step %d: target %d, replacements %d (pool %+v)", trial, s, d.Target, next.Replacements, p)
			}
			// The envelope the plan prices the ceiling at: kept retired
			// nodes are billed, so they take of the replacement room.
			if d.Target+kept > envelope(p) {
				t.Fatalf("trial %d step %d: %d seats and %d kept nodes, beyond the envelope's %d (pool %+v)", trial, s, d.Target, kept, envelope(p), p)
			}
			for _, c := range d.Cordon {
				if !slices.Contains(d.Retired, c) {
					t.Fatalf("trial %d step %d: cordons %s, which is not retired", trial, s, c)
				}
			}
			for _, a := range d.Actions {
				if a.Kind != ActionRetire {
					continue
				}
				for _, n := range nodes {
					if n.Name == a.Node && n.Busy {
						t.Fatalf("trial %d step %d: retired %s with a gang on it", trial, s, a.Node)
					}
				}
			}
			again, d2 := Repair(p, next, nodes, now)
			if !reflect.DeepEqual(next, again) || !still(d2) {
				t.Fatalf("trial %d step %d: not a fixed point: %s %v", trial, s, cmp.Diff(next, again), kinds(d2))
			}
			st = next
			// The module's view: retired nodes go (removed) unless kept, new
			// seats appear (a pool of a count keeps its retired nodes).
			var live, kept2 []string
			for _, name := range names {
				switch {
				case !slices.Contains(d.Retired, name) || !p.Named:
					live = append(live, name)
				case slices.Contains(d.Kept, name):
					kept2 = append(kept2, name)
				}
			}
			live = live[:min(int64(len(live)), d.Target)]
			for int64(len(live)) < d.Target {
				live = append(live, fmt.Sprintf("n%d", trial*1000+s*10+len(live)))
			}
			names = append(live, kept2...)
		}
	}
}

// still says a decision taken again on the same view did nothing: not even
// a warning already given.
func still(d Decision) bool { return len(d.Actions) == 0 }

func TestKeptWhileBusyOrForRepair(t *testing.T) {
	p := pool(4, 0, 6)
	var st State
	st, _ = Repair(p, st, fleet("a-*", "b", "c", "d"), t0)
	st.Nodes[0].Failures = []time.Time{t0, t0} // two earlier failures on record
	st.Nodes[0].UnusableSince = time.Time{}
	// The third failure retires a while its gang still runs: it stays.
	st, d := Repair(p, st, fleet("a-*", "b", "c", "d"), t0.Add(time.Minute))
	if !slices.Equal(d.Retired, []string{"a"}) || !slices.Equal(d.Kept, []string{"a"}) {
		t.Fatalf("busy flapping node: retired %v, kept %v", d.Retired, d.Kept)
	}
	_, d = Repair(p, st, fleet("a-", "b", "c", "d"), t0.Add(2*time.Minute))
	if !slices.Equal(d.Retired, []string{"a"}) || len(d.Kept) != 0 || !slices.Equal(d.Cordon, []string{"a"}) {
		t.Fatalf("once the gang left: retired %v, kept %v, cordon %v", d.Retired, d.Kept, d.Cordon)
	}
	// With broken: keep, a retired node stays, cordoned, without a gang.
	p.Repair.Broken = schema.BrokenKeep
	_, d = Repair(p, st, fleet("a-", "b", "c", "d"), t0.Add(3*time.Minute))
	if !slices.Equal(d.Kept, []string{"a"}) || !slices.Equal(d.Cordon, []string{"a"}) {
		t.Fatalf("broken: keep: kept %v, cordon %v", d.Kept, d.Cordon)
	}
}

func TestJoiningNodeIsNoFailure(t *testing.T) {
	p := pool(2, 0, 4)
	nodes := fleet("a", "b-")
	nodes[1].Created, nodes[1].NotReady = t0, true
	st, d := Repair(p, State{}, nodes, t0.Add(time.Minute))
	if len(st.Nodes) != 0 || len(d.Actions) != 0 {
		t.Fatalf("a node joining for a minute: state %+v, actions %v", st, kinds(d))
	}
	// A new node with a GPU fault is not joining: it is failing.
	faulty := slices.Clone(nodes)
	faulty[1].NotReady = false
	if st, _ := Repair(p, State{}, faulty, t0.Add(time.Minute)); len(st.Nodes) != 1 {
		t.Fatalf("a new node with a fault: state %+v", st)
	}
	// Past JoinGrace it is unusable like any other: lost after repair.after.
	st, _ = Repair(p, st, nodes, t0.Add(JoinGrace))
	st, d = Repair(p, st, nodes, t0.Add(JoinGrace+16*time.Minute))
	if d.Target != 3 || len(st.Nodes) != 1 || len(st.Nodes[0].Failures) != 1 {
		t.Fatalf("a node that never joined: target %d, state %+v", d.Target, st)
	}
}

// A flapping node with a gang on it is retired and cordoned even where the
// pool has no room beside its plan: the seats give way to it (nodes.max,
// the envelope).
func TestABusyFlapperIsCordonedAtMax(t *testing.T) {
	p := pool(4, 0, 4)
	p.Repair.Flaps = 2
	st := State{Nodes: []NodeState{{Name: "a", Failures: []time.Time{t0.Add(-time.Hour), t0.Add(-30 * time.Minute)}}}}
	nodes := fleet("a*", "b*", "c*", "d*")
	_, d := Repair(p, st, nodes, t0)
	if !slices.Contains(d.Cordon, "a") || !slices.Equal(d.Kept, []string{"a"}) || d.Target != 3 {
		t.Errorf("cordon %v, kept %v, target %d; want a cordoned and kept beside 3 seats", d.Cordon, d.Kept, d.Target)
	}
}

// envelope is the most nodes the plan prices a pool's cost ceiling at
// (planner.EnvelopeOf), within nodes.max.
func envelope(p Pool) int64 {
	r, b := schema.ElasticRoom(p.Max, p.Fixed, p.Repair, p.Burst)
	return min(p.Max, p.Fixed+r+b)
}
