package elastic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/allot-dev/allot/schema"
)

func burstPool(fixed, most, burstMax int64) Pool {
	return Pool{Fixed: fixed, Max: most, GPUsPerNode: 8, Named: true,
		Burst: &schema.Burst{MaxNodes: burstMax, IdleAfter: 30 * time.Minute}}
}

type burstStep struct {
	at      time.Duration
	gangs   []Gang
	nodes   []Node
	target  int64
	retired []string
	actions []ActionKind
}

func runBurst(t *testing.T, p Pool, steps []burstStep) State {
	t.Helper()
	var st State
	for i, s := range steps {
		var d Decision
		st, d = Decide(p, st, s.gangs, s.nodes, t0.Add(s.at))
		if d.Target != s.target || !slices.Equal(d.Retired, s.retired) || !slices.Equal(kinds(d), s.actions) {
			t.Fatalf("step %d (%s): target %d, retired %v, actions %v; want %d, %v, %v\n%+v", i, s.at, d.Target, d.Retired, kinds(d), s.target, s.retired, s.actions, d.Actions)
		}
		var sum int64
		for _, tn := range st.BurstTeams {
			sum += tn.Nodes
		}
		if sum != st.Burst {
			t.Fatalf("step %d: teams %v add up to %d, burst %d", i, st.BurstTeams, sum, st.Burst)
		}
		again, d2 := Decide(p, st, s.gangs, s.nodes, t0.Add(s.at))
		if diff := cmp.Diff(st, again); diff != "" || d2.Target != d.Target || !still(d2) {
			t.Fatalf("step %d: deciding again changed the state (%s) or acted: %v", i, diff, kinds(d2))
		}
	}
	return st
}

// joined makes nodes that registered at t.
func joined(at time.Duration, nodes []Node) []Node {
	for i := range nodes {
		nodes[i].Created = t0.Add(at)
	}
	return nodes
}

func TestBurstGrowsForWaitingGangsThenShrinksWhenIdle(t *testing.T) {
	p := burstPool(2, 10, 4)
	gang := []Gang{{Team: "vision", GPUs: 16}}
	st := runBurst(t, p, []burstStep{
		{0, nil, fleet("a*", "b*"), 2, nil, nil},
		// A gang of two nodes waits: two burst nodes.
		{time.Minute, gang, fleet("a*", "b*"), 4, nil, []ActionKind{ActionBurstUp}},
		// Not asked for twice while they are made, nor while they join.
		{2 * time.Minute, gang, fleet("a*", "b*"), 4, nil, nil},
		{6 * time.Minute, gang, append(fleet("a*", "b*"), joined(6*time.Minute, []Node{{Name: "c", NotReady: true}, {Name: "d", NotReady: true}})...), 4, nil, nil},
		{8 * time.Minute, gang, append(fleet("a*", "b*"), joined(6*time.Minute, fleet("c", "d"))...), 4, nil, nil},
		// The gang runs on them.
		{9 * time.Minute, nil, append(fleet("a*", "b*"), joined(6*time.Minute, fleet("c*", "d*"))...), 4, nil, nil},
		// It ends: idle for idleAfter, then given back, longest idle
		// first, the highest seats of those idle as long.
		{60 * time.Minute, nil, append(fleet("a*", "b"), joined(6*time.Minute, fleet("c", "d"))...), 4, nil, nil},
		{90 * time.Minute, nil, append(fleet("a*", "b"), joined(6*time.Minute, fleet("c", "d"))...), 2, []string{"c", "d"}, []ActionKind{ActionBurstDown}},
	})
	if st.Burst != 0 || len(st.BurstTeams) != 0 {
		t.Fatalf("burst %d teams %v after giving back", st.Burst, st.BurstTeams)
	}
	// The retired nodes are forgotten once gone.
	st, d := Decide(p, st, nil, fleet("a*", "b"), t0.Add(95*time.Minute))
	if len(st.Nodes) != 0 || d.Target != 2 || len(d.Retired) != 0 {
		t.Fatalf("after the retired nodes went: records %+v, target %d, retired %v", st.Nodes, d.Target, d.Retired)
	}
}

func TestBurstSizesInWholeDomainsWithinItsRoom(t *testing.T) {
	p := burstPool(4, 9, 8) // room: 5 nodes
	st, d := Decide(p, State{}, []Gang{
		{Team: "a", GPUs: 24, DomainNodes: 4}, // 3 nodes → one domain of 4
		{Team: "b", GPUs: 16, DomainNodes: 4}, // 4 more: beyond the room, skipped
		{Team: "c", GPUs: 8, PodGPUs: 4},      // 1 node of two pods
	}, fleet("a*", "b*", "c*", "d*"), t0)
	if st.Burst != 5 || d.Target != 9 {
		t.Fatalf("burst %d, target %d; want 5, 9", st.Burst, d.Target)
	}
	if !slices.Equal(kinds(d), []ActionKind{ActionBurstUp, ActionBurstAtMax}) {
		t.Fatalf("actions %v", kinds(d))
	}
	// Said once while it lasts.
	gangs := []Gang{{Team: "a", GPUs: 24, DomainNodes: 4}, {Team: "b", GPUs: 16, DomainNodes: 4}, {Team: "c", GPUs: 8, PodGPUs: 4}}
	if _, d2 := Decide(p, st, gangs, fleet("a*", "b*", "c*", "d*"), t0.Add(time.Minute)); len(d2.Actions) != 0 {
		t.Fatalf("deciding again: %v", kinds(d2))
	}
	if want := []TeamNodes{{"a", 4}, {"c", 1}}; !slices.Equal(st.BurstTeams, want) {
		t.Fatalf("teams %v, want %v", st.BurstTeams, want)
	}
	// Pods of 6 GPUs take a node each on nodes of 8.
	st, _ = Decide(p, State{}, []Gang{{Team: "d", GPUs: 18, PodGPUs: 6}}, fleet("a*", "b*", "c*", "d*"), t0)
	if want := []TeamNodes{{"d", 3}}; !slices.Equal(st.BurstTeams, want) {
		t.Fatalf("teams %v, want %v", st.BurstTeams, want)
	}
}

func TestBurstCreditsIdleNodesAndNeverTakesABusyOne(t *testing.T) {
	p := burstPool(3, 10, 4)
	// One idle node: a gang of two nodes needs one more.
	st, d := Decide(p, State{}, []Gang{{Team: "a", GPUs: 16}}, fleet("a*", "b*", "c"), t0)
	if st.Burst != 1 || d.Target != 4 {
		t.Fatalf("burst %d, target %d; want 1, 4", st.Burst, d.Target)
	}
	// Everything busy long after: nothing is given back.
	nodes := fleet("a*", "b*", "c*", "d*")
	for _, at := range []time.Duration{time.Hour, 2 * time.Hour} {
		st, d = Decide(p, st, nil, nodes, t0.Add(at))
		if st.Burst != 1 || len(d.Retired) != 0 {
			t.Fatalf("at %s: burst %d retired %v with every node busy", at, st.Burst, d.Retired)
		}
	}
	// An idle node a waiting gang could use stays.
	nodes = fleet("a*", "b*", "c*", "d")
	st, _ = Decide(p, st, nil, nodes, t0.Add(3*time.Hour))
	st, d = Decide(p, st, []Gang{{Team: "a", GPUs: 8, DomainNodes: 0}}, nodes, t0.Add(5*time.Hour))
	if st.Burst != 1 || len(d.Retired) != 0 {
		t.Fatalf("burst %d retired %v while a gang could use the idle node", st.Burst, d.Retired)
	}
}

// A gang the room can never serve holds no idle burst node.
func TestBurstGivesBackWhileAGangTooLargeWaits(t *testing.T) {
	p := burstPool(2, 3, 1)
	st, _ := Decide(p, State{}, []Gang{{Team: "a", GPUs: 8}}, fleet("a*", "b*"), t0)
	nodes := fleet("a*", "b*", "c")
	huge := []Gang{{Team: "b", GPUs: 32}}
	st, _ = Decide(p, st, huge, nodes, t0.Add(time.Hour))
	st, d := Decide(p, st, huge, nodes, t0.Add(2*time.Hour))
	if st.Burst != 0 || !slices.Equal(d.Retired, []string{"c"}) {
		t.Fatalf("burst %d retired %v; want 0, [c]", st.Burst, d.Retired)
	}
}

func TestBurstOfACountShrinksTheCount(t *testing.T) {
	p := burstPool(2, 10, 2)
	p.Named = false
	st, _ := Decide(p, State{}, []Gang{{Team: "a", GPUs: 8}}, fleet("a*", "b*"), t0)
	nodes := fleet("a*", "b", "c*")
	st, _ = Decide(p, st, nil, nodes, t0.Add(time.Hour))
	st, d := Decide(p, st, nil, nodes, t0.Add(2*time.Hour))
	if st.Burst != 0 || d.Target != 2 || len(d.Retired) != 0 {
		t.Fatalf("burst %d target %d retired %v; want 0, 2, none", st.Burst, d.Target, d.Retired)
	}
}

func TestBurstLeavesRoomForRepair(t *testing.T) {
	p := burstPool(4, 7, 8)
	p.Repair = &schema.Repair{After: 15 * time.Minute, MaxNodes: 2, Broken: schema.BrokenKeep, Flaps: 3, FlapWindow: 24 * time.Hour}
	// nodes.max 7: repair takes 2 of the 3 spare, burst gets 1.
	st, d := Decide(p, State{}, []Gang{{GPUs: 64}, {GPUs: 8}}, fleet("a*", "b*", "c*", "d*"), t0)
	if st.Burst != 1 || d.Target != 5 {
		t.Fatalf("burst %d target %d; want 1, 5", st.Burst, d.Target)
	}
	if st.BurstTeams[0].Team != "" || st.BurstTeams[0].Nodes != 1 {
		t.Fatalf("teams %v", st.BurstTeams)
	}
	// An idle burst node given back is removed even where repair keeps.
	nodes := fleet("a*", "b*", "c*", "d*", "e")
	st, _ = Decide(p, st, nil, nodes, t0.Add(time.Hour))
	st, d = Decide(p, st, nil, nodes, t0.Add(2*time.Hour))
	if !slices.Equal(d.Retired, []string{"e"}) || len(d.Kept) != 0 || d.Target != 4 {
		t.Fatalf("retired %v kept %v target %d; want [e], none, 4", d.Retired, d.Kept, d.Target)
	}
}

// TestBurstBounds drives random pools through random histories: the target
// stays within nodes.max and the envelope, burst within its room, no busy
// node is retired, the teams add up.
func TestBurstBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 2))
	var ups, downs int
	for trial := range 300 {
		fixed := r.Int64N(6)
		p := burstPool(fixed, fixed+r.Int64N(6), r.Int64N(5))
		p.Named = r.IntN(3) > 0
		if r.IntN(2) == 0 {
			p.Repair = &schema.Repair{After: 10 * time.Minute, MaxNodes: r.Int64N(3), Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: time.Hour}
		}
		env := p.Fixed + p.burstRoom(State{}, 0)
		if p.Repair != nil {
			env += min(p.Repair.MaxNodes, p.Max-p.Fixed)
		}
		var st State
		names := 0
		var nodes []Node
		for step := range 60 {
			now := t0.Add(time.Duration(step) * 7 * time.Minute)
			var gangs []Gang
			for range r.IntN(3) {
				gangs = append(gangs, Gang{Team: fmt.Sprint("t", r.IntN(3)), GPUs: 1 + r.Int64N(40), DomainNodes: r.Int64N(3)})
			}
			for i := range nodes {
				nodes[i].Busy = r.IntN(3) == 0
				nodes[i].Usable = r.IntN(10) > 0
			}
			var d Decision
			st, d = Decide(p, st, gangs, nodes, now)
			where := fmt.Sprintf("trial %d step %d (%+v)", trial, step, p)
			for _, a := range d.Actions {
				switch a.Kind {
				case ActionBurstUp:
					ups++
				case ActionBurstDown:
					downs++
				}
			}
			if d.Target > p.Max || d.Target > env {
				t.Fatalf("%s: target %d beyond max %d or envelope %d", where, d.Target, p.Max, env)
			}
			if st.Burst < 0 || st.Burst > p.Burst.MaxNodes {
				t.Fatalf("%s: burst %d", where, st.Burst)
			}
			var sum int64
			for _, tn := range st.BurstTeams {
				sum += tn.Nodes
			}
			if sum != st.Burst {
				t.Fatalf("%s: teams %v != %d", where, st.BurstTeams, st.Burst)
			}
			for _, n := range nodes {
				if n.Busy && slices.Contains(d.Retired, n.Name) && !slices.Contains(d.Kept, n.Name) {
					t.Fatalf("%s: busy node %s retired to be removed", where, n.Name)
				}
			}
			// The cluster follows: retired nodes not kept go, the count
			// moves to the target.
			nodes = slices.DeleteFunc(nodes, func(n Node) bool {
				return slices.Contains(d.Retired, n.Name) && !slices.Contains(d.Kept, n.Name) && !n.Busy
			})
			seated := int64(0)
			for _, n := range nodes {
				if !slices.Contains(d.Retired, n.Name) || !p.Named {
					seated++
				}
			}
			for ; seated < d.Target; seated++ {
				names++
				nodes = append(nodes, Node{Name: fmt.Sprint("n", names), Usable: true, HealthyGPUs: 8, Created: now})
			}
			for i := len(nodes) - 1; i >= 0 && seated > d.Target; i-- {
				if !nodes[i].Busy && !slices.Contains(d.Retired, nodes[i].Name) {
					nodes = slices.Delete(nodes, i, i+1)
					seated--
				}
			}
		}
	}
	if ups < 100 || downs < 50 {
		t.Fatalf("the histories grew %d and shrank %d times: too few to test the bounds", ups, downs)
	}
}

// indexed is a Named pool whose nodes are named by index ("a".."z" = 0..25).
func indexed(p Pool) Pool {
	p.IndexOf = func(name string) (int64, bool) { return int64(name[0] - 'a'), len(name) == 1 }
	return p
}

// A gang that needs a domain gets the new seats that complete one, with the
// idle nodes already there: not a whole domain more.
func TestBurstCompletesADomainWhereNewSeatsGo(t *testing.T) {
	p := indexed(burstPool(2, 8, 4)) // domains of 2: {a b} {c d} {e f}
	st, d := Decide(p, State{Burst: 1}, []Gang{{Team: "a", GPUs: 16, DomainNodes: 2}}, fleet("a*", "b*", "c"), t0.Add(time.Hour))
	if st.Burst != 2 || d.Target != 4 {
		t.Fatalf("burst %d target %d; want 2, 4: d joins idle c's domain", st.Burst, d.Target)
	}
	// With a hole below: a gang of a domain needs the new seats up to a
	// whole free domain (c, then e and f; d is taken).
	p = indexed(burstPool(3, 8, 4))
	st, d = Decide(p, State{}, []Gang{{Team: "a", GPUs: 16, DomainNodes: 2}}, fleet("a*", "b*", "d*"), t0)
	if st.Burst != 3 || d.Target != 6 {
		t.Fatalf("burst %d target %d; want 3, 6", st.Burst, d.Target)
	}
}

// Nothing changes while the last change is under way: a node given back in
// a pool of a count stays until the cloud removes one, and is not given
// back again meanwhile.
func TestBurstWaitsForItsLastChange(t *testing.T) {
	p := burstPool(2, 10, 2)
	p.Named = false
	nodes := fleet("a*", "b*", "c", "d*")
	st, _ := Decide(p, State{Burst: 2}, nil, nodes, t0)
	st, d := Decide(p, st, nil, nodes, t0.Add(31*time.Minute))
	if st.Burst != 1 || d.Target != 3 {
		t.Fatalf("burst %d target %d; want 1, 3", st.Burst, d.Target)
	}
	for _, at := range []time.Duration{32 * time.Minute, 63 * time.Minute, 3 * time.Hour} {
		st, d = Decide(p, st, []Gang{{Team: "x", GPUs: 32}}, nodes, t0.Add(at))
		if st.Burst != 1 || d.Target != 3 || slices.Contains(kinds(d), ActionBurstUp) || slices.Contains(kinds(d), ActionBurstDown) {
			t.Fatalf("at %s: burst %d target %d actions %v while a node leaves", at, st.Burst, d.Target, kinds(d))
		}
	}
}

// A pod larger than a node never fits: it grows nothing and holds no idle
// node; nor is a broken node given back as an idle one.
func TestBurstIgnoresWhatItCannotServe(t *testing.T) {
	p := burstPool(2, 10, 4)
	huge := []Gang{{Team: "x", GPUs: 32, PodGPUs: 16}}
	st, d := Decide(p, State{}, huge, fleet("a*", "b*"), t0)
	if st.Burst != 0 || !slices.Equal(kinds(d), []ActionKind{ActionBurstAtMax}) {
		t.Fatalf("burst %d actions %v; want 0, BurstAtMax", st.Burst, kinds(d))
	}
	nodes := fleet("a*", "b-", "c")
	st, _ = Decide(p, State{Burst: 1}, huge, nodes, t0)
	st, d = Decide(p, st, huge, nodes, t0.Add(time.Hour))
	if !slices.Equal(d.Retired, []string{"c"}) {
		t.Fatalf("retired %v; want the idle healthy c, not broken b", d.Retired)
	}
}

// Repair keeping a busy flapping node beside the seats: burst gives way so
// that the count Terraform reads stays within nodes.max.
func TestBurstGivesWayToAKeptNode(t *testing.T) {
	p := burstPool(2, 3, 1)
	p.Repair = &schema.Repair{After: time.Hour, MaxNodes: 0, Broken: schema.BrokenRemove, Flaps: 2, FlapWindow: 24 * time.Hour}
	st := State{Burst: 1, Nodes: []NodeState{{Name: "b", Failures: []time.Time{t0.Add(-time.Hour)}}}}
	st, d := Decide(p, st, nil, fleet("a*", "b-*", "c*"), t0)
	if !slices.Equal(d.Kept, []string{"b"}) || st.Burst+p.Fixed+int64(len(d.Kept)) > p.Max || d.Target+int64(len(d.Kept)) > p.Max {
		t.Fatalf("kept %v burst %d target %d: beyond nodes.max %d", d.Kept, st.Burst, d.Target, p.Max)
	}
}

// Every decision is a fixed point: deciding again on the same view, with
// the state it left, does nothing.
func TestBurstDecisionsAreFixedPoints(t *testing.T) {
	for seed := range uint64(8) {
		fixedPoints(t, rand.New(rand.NewPCG(46, seed)))
	}
}

func fixedPoints(t *testing.T, r *rand.Rand) {
	for trial := range 3000 {
		fixed := r.Int64N(5)
		p := burstPool(fixed, fixed+r.Int64N(9), r.Int64N(6))
		p.Named = r.IntN(2) == 0
		if r.IntN(2) == 0 {
			p = indexed(p)
		}
		if r.IntN(3) == 0 {
			p.Repair = &schema.Repair{After: 10 * time.Minute, MaxNodes: r.Int64N(3), Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: time.Hour}
			if r.IntN(2) == 0 {
				p.Repair.Broken = schema.BrokenKeep
			}
		}
		var nodes []Node
		st := State{Burst: r.Int64N(4)}
		for i := range int(fixed) + r.IntN(8) {
			n := Node{Name: string(rune('a' + i)), Usable: r.IntN(8) > 0, HealthyGPUs: 8, Busy: r.IntN(2) == 0}
			nodes = append(nodes, n)
			if r.IntN(4) == 0 {
				// Lost for a while, or with a failure on record.
				ns := NodeState{Name: n.Name, Failures: []time.Time{t0.Add(-time.Duration(r.IntN(120)) * time.Minute)}}
				if !n.Usable {
					ns.UnusableSince = ns.Failures[0]
				}
				st.Nodes = append(st.Nodes, ns)
			}
		}
		for _, n := range nodes {
			if r.IntN(2) == 0 {
				st.Idle = append(st.Idle, IdleNode{Name: n.Name, Since: t0.Add(-time.Duration(r.IntN(90)) * time.Minute)})
			}
		}
		var gangs []Gang
		for range r.IntN(3) {
			gangs = append(gangs, Gang{Team: "t", GPUs: 1 + r.Int64N(40), DomainNodes: r.Int64N(5), PodGPUs: r.Int64N(10)})
		}
		st1, d1 := Decide(p, st, gangs, nodes, t0)
		// Seats and kept nodes stay within the envelope the plan prices
		// (when the cluster was).
		if kept := keptCount(p, records(st1), nodes); int64(len(nodes)) <= envelope(p) && d1.Target+kept > envelope(p) {
			t.Fatalf("trial %d (%+v, nodes %+v): %d seats and %d kept nodes, beyond the envelope's %d", trial, p, nodes, d1.Target, kept, envelope(p))
		}
		// The cluster does not follow yet: the same view again.
		st2, d2 := Decide(p, st1, gangs, nodes, t0)
		if d2.Target != d1.Target || len(d2.Actions) != 0 || !cmp.Equal(st1, st2, cmpopts.EquateEmpty()) {
			t.Fatalf("trial %d (%+v, nodes %+v, gangs %+v): again burst %d→%d target %d→%d actions %v then %v",
				trial, p, nodes, gangs, st1.Burst, st2.Burst, d1.Target, d2.Target, kinds(d1), kinds(d2))
		}
	}
}

// Cases a review found, each once a fixed point broken or nodes asked for
// twice.
func TestBurstReviewCases(t *testing.T) {
	lost := func(names ...string) []NodeState {
		var out []NodeState
		for _, n := range names {
			out = append(out, NodeState{Name: n, UnusableSince: t0.Add(-time.Hour), Failures: []time.Time{t0.Add(-time.Hour)}})
		}
		return out
	}
	twice := func(name string, p Pool, st State, gangs []Gang, nodes []Node) (State, Decision) {
		t.Helper()
		st1, d1 := Decide(p, st, gangs, nodes, t0)
		st2, d2 := Decide(p, st1, gangs, nodes, t0)
		if len(d2.Actions) != 0 || st2.Burst != st1.Burst || d2.Target != d1.Target {
			t.Errorf("%s: deciding again acted: %v then %v (burst %d→%d)", name, kinds(d1), kinds(d2), st1.Burst, st2.Burst)
		}
		return st1, d1
	}
	// Repair's seat under way is not burst's to give back.
	p := burstPool(3, 8, 2)
	p.Repair = &schema.Repair{After: 10 * time.Minute, MaxNodes: 2, Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: 24 * time.Hour}
	twice("repair seat", p, State{Burst: 1, Nodes: lost("b", "c")}, nil, fleet("a*", "b-*", "c-*", "d*"))
	// Idle nodes a later gang can use stay while an earlier gang waits for
	// room.
	p = indexed(burstPool(3, 6, 3))
	idle := []IdleNode{{Name: "m", Since: t0.Add(-time.Hour)}, {Name: "n", Since: t0.Add(-time.Hour)}}
	nodes := fleet("a*", "d", "f", "g", "m", "n")
	twice("swap", p, State{Burst: 3, Idle: idle}, []Gang{{Team: "A", GPUs: 24, DomainNodes: 4}, {Team: "B", GPUs: 24}}, nodes)
	// New seats that fill holes serve the gangs that need no domain.
	p = indexed(burstPool(4, 20, 10))
	if st, _ := twice("holes", p, State{}, []Gang{{Team: "A", GPUs: 16, DomainNodes: 2}, {Team: "B", GPUs: 16}}, fleet("a*", "c*", "e*", "f*")); st.Burst != 4 {
		t.Errorf("holes: burst %d, want 4 (b and d for B, g and h for A)", st.Burst)
	}
	// Repair's count changed without an action: burst decides again.
	p = Pool{Fixed: 2, Max: 10, GPUsPerNode: 8, Burst: &schema.Burst{MaxNodes: 2, IdleAfter: 30 * time.Minute},
		Repair: &schema.Repair{After: 10 * time.Minute, MaxNodes: 1, Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: time.Hour}}
	twice("silent repair", p, State{Replacements: 1, Burst: 1, Nodes: []NodeState{{Name: "z", Retired: true}}}, nil, fleet("a*", "b*", "c"))
	// Seats under way are not given back while gangs ask for new seats
	// above them.
	p = Pool{Fixed: 3, Max: 11, GPUsPerNode: 8, Named: true, Burst: &schema.Burst{MaxNodes: 6, IdleAfter: time.Hour},
		IndexOf: func(name string) (int64, bool) { return int64(name[1] - '0'), len(name) == 2 }}
	nn := func(name string, busy bool) Node { return Node{Name: name, Usable: true, HealthyGPUs: 8, Busy: busy} }
	twice("seats under way", p, State{Burst: 4, Nodes: []NodeState{{Name: "n3", Retired: true}, {Name: "n5", Retired: true}, {Name: "n7", Retired: true, Burst: true}}},
		[]Gang{{Team: "A", GPUs: 19, DomainNodes: 4, PodGPUs: 2}},
		[]Node{nn("n1", true), nn("n3", false), nn("n4", true), nn("n5", false), nn("n7", true), nn("n8", false), nn("n9", false)})
	// Replacements in a pool of a count whose retired nodes hold their
	// slots.
	p = Pool{Fixed: 4, Max: 10, GPUsPerNode: 8, Burst: &schema.Burst{MaxNodes: 4, IdleAfter: 30 * time.Minute},
		Repair: &schema.Repair{After: 10 * time.Minute, MaxNodes: 3, Broken: schema.BrokenKeep, Flaps: 3, FlapWindow: time.Hour}}
	st0 := State{Burst: 1, Idle: []IdleNode{{Name: "e", Since: t0.Add(-time.Hour)}, {Name: "f", Since: t0.Add(-time.Hour)}},
		Nodes: []NodeState{{Name: "b", Retired: true}, {Name: "c", Retired: true}, {Name: "d", Retired: true}}}
	if _, d := twice("count retired", p, st0, nil, fleet("a*", "b*", "c*", "d*", "e", "f")); slices.Index(kinds(d), ActionAtMax) >= 0 && slices.Index(kinds(d), ActionAtMax) < len(d.Actions)-1 && slices.Contains(kinds(d)[slices.Index(kinds(d), ActionAtMax):], ActionReplace) {
		t.Errorf("count retired: ReplacementAtMax said before replacements still added: %v", kinds(d))
	}
	// A healthy idle node with an old failure on record serves a gang.
	p = burstPool(1, 4, 2)
	p.Repair = &schema.Repair{After: 10 * time.Minute, MaxNodes: 1, Broken: schema.BrokenRemove, Flaps: 3, FlapWindow: 24 * time.Hour}
	old := []NodeState{{Name: "b", Failures: []time.Time{t0.Add(-2 * time.Hour)}}}
	if st, _ := twice("old failure", p, State{Nodes: old}, []Gang{{Team: "x", GPUs: 8}}, fleet("a*", "b")); st.Burst != 0 {
		t.Errorf("old failure: burst %d, want 0 (b is free)", st.Burst)
	}
}

// A node kept for repair stays kept once repair is taken out of the pool:
// burst counts it as the decision does (it takes the envelope's one node of
// room), and deciding again does nothing.
func TestBurstBesideANodeKeptBeforeRepairWasRemoved(t *testing.T) {
	p := burstPool(2, 6, 1)
	st := State{Nodes: []NodeState{{Name: "c", Retired: true, Kept: true}}}
	nodes, gangs := fleet("a*", "b*", "c"), []Gang{{Team: "x", GPUs: 8}}
	st, d1 := Decide(p, st, gangs, nodes, t0)
	if st.Burst != 0 || d1.Target != 2 || !slices.Equal(kinds(d1), []ActionKind{ActionBurstAtMax}) {
		t.Errorf("burst %d, target %d, %v: want no burst beside the kept node (envelope %d), said once", st.Burst, d1.Target, kinds(d1), envelope(p))
	}
	if _, d := Decide(p, st, gangs, nodes, t0); len(d.Actions) != 0 {
		t.Errorf("not a fixed point: %v (burst %d)", kinds(d), st.Burst)
	}
}
