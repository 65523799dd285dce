package quota

import (
	"math/rand/v2"
	"testing"
)

// world is a random tree of cohorts and teams with the usage charged to it.
type world struct {
	nodes []*Node
	teams []*Node
	own   map[*Node][]GPUs // what was charged to each team, per flavor
}

const flavors = 2

func randomWorld(rng *rand.Rand) *world {
	w := &world{own: map[*Node][]GPUs{}}
	limit := func() GPUs {
		if rng.IntN(3) == 0 {
			return Unlimited
		}
		return GPUs(rng.IntN(12))
	}
	cohorts := []*Node{{Name: "root"}}
	for i := range rng.IntN(4) {
		c := &Node{Name: "c" + string(rune('a'+i))}
		c.Attach(cohorts[rng.IntN(len(cohorts))])
		for f := range flavors {
			c.R(f).Borrow, c.R(f).Lend = limit(), limit()
		}
		cohorts = append(cohorts, c)
	}
	for i := range 1 + rng.IntN(6) {
		t := &Node{Name: "t" + string(rune('a'+i)), Leaf: true}
		t.Attach(cohorts[rng.IntN(len(cohorts))])
		for f := range flavors {
			r := t.R(f)
			r.Nominal, r.Borrow, r.Lend = GPUs(rng.IntN(16)), limit(), limit()
			if r.Lend != Unlimited {
				r.Lend = min(r.Lend, r.Nominal)
			}
		}
		w.teams = append(w.teams, t)
		w.own[t] = make([]GPUs, flavors)
	}
	w.nodes = append(cohorts, w.teams...)
	cohorts[0].ComputeSubtree(flavors)
	return w
}

// fits says whether x more GPUs of f charged to team t keep every constraint
// of the tree, propagated the slow way: a node's usage counts in its parent
// only above its guaranteed part; a node's usage in its parent stays within
// what it lends plus its borrowing limit; the root's within its subtree quota.
func fits(t *Node, f int, x GPUs) bool {
	d := x
	for n := t; n != nil && d != 0; n = n.Parent {
		r := n.R(f)
		g := n.Guaranteed(f)
		before := max(0, r.Usage-g)
		after := max(0, r.Usage+d-g)
		if n.Parent == nil {
			return r.Usage+d <= r.Subtree
		}
		if r.Borrow != Unlimited && after > before && after > r.Subtree-g+r.Borrow {
			return false
		}
		d = after - before
	}
	return true
}

// usageFromScratch is every node's usage of f from what was charged to the
// teams: a cohort uses what its children use above their guaranteed parts.
func (w *world) usageFromScratch(f int) map[*Node]GPUs {
	u := map[*Node]GPUs{}
	var visit func(n *Node) GPUs
	visit = func(n *Node) GPUs {
		if n.Leaf {
			u[n] = w.own[n][f]
		} else {
			var sum GPUs
			for _, c := range n.Children {
				sum += max(0, visit(c)-c.Guaranteed(f))
			}
			u[n] = sum
		}
		return u[n]
	}
	visit(w.nodes[0])
	return u
}

// TestTreeAgainstItsDefinition charges and releases random amounts in random
// trees, only what Available allows, and checks after every step that the
// usage kept incrementally is the usage from scratch, and that Available is
// the most a team may add without breaking a limit of the tree.
func TestTreeAgainstItsDefinition(t *testing.T) {
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 7))
		w := randomWorld(rng)
		for step := range 60 {
			tm := w.teams[rng.IntN(len(w.teams))]
			f := rng.IntN(flavors)
			avail := tm.Available(f)
			brute := GPUs(-1)
			for x := GPUs(0); x <= 200 && fits(tm, f, x); x++ {
				brute = x
			}
			if brute >= 0 && avail != brute {
				t.Fatalf("seed %d step %d: %s Available(%d) = %d, the tree's limits allow %d", seed, step, tm.Name, f, avail, brute)
			}
			var d GPUs
			if rng.IntN(3) == 0 && w.own[tm][f] > 0 {
				d = -GPUs(1 + rng.IntN(int(w.own[tm][f])))
			} else if avail > 0 {
				d = GPUs(1 + rng.IntN(int(avail)))
			}
			tm.AddUsage(f, d)
			w.own[tm][f] += d
			for n, want := range w.usageFromScratch(f) {
				if got := n.R(f).Usage; got != want {
					t.Fatalf("seed %d step %d: %s uses %d of flavor %d, from scratch %d", seed, step, n.Name, got, f, want)
				}
			}
		}
	}
}

func TestLimitAndReclaimable(t *testing.T) {
	root := &Node{Name: "root"}
	a := &Node{Name: "a", Leaf: true}
	a.Attach(root)
	r := a.R(0)
	r.Nominal, r.Borrow = 8, 4
	root.ComputeSubtree(1)
	if got := a.Limit(0); got != 12 {
		t.Errorf("Limit = %d, want nominal 8 + borrowing limit 4", got)
	}
	a.R(0).Borrow = Unlimited
	if got := a.Limit(0); got != Unlimited {
		t.Errorf("Limit = %d, want Unlimited", got)
	}
	if got := root.Limit(0); got != 0 {
		t.Errorf("a root's Limit is its nominal: got %d, want 0", got)
	}
	r.Usage, r.BorrowOnly = 11, 2
	if got := r.Reclaimable(); got != 3 {
		t.Errorf("Reclaimable = %d, want 1 above nominal + 2 borrowOnly", got)
	}
	a.AddReclaimable(0, 3)
	a.AddReclaimable(2, 5)
	if root.ReclaimableIn(0) != 3 || root.ReclaimableIn(1) != 0 || root.ReclaimableIn(2) != 5 || root.ReclaimableIn(9) != 0 {
		t.Errorf("root's Reclaimable = %v, want [3 0 5]", root.Reclaimable)
	}
	r.Preemptible.Add(1, 4)
	r.Preemptible.Add(3, 2)
	r.Preemptible.Add(1, -1)
	if got := r.Preemptible.Below(3); got != 3 {
		t.Errorf("Below(3) = %d, want 3", got)
	}
	if got := r.Preemptible.Below(4); got != 5 {
		t.Errorf("Below(4) = %d, want 5", got)
	}
}

// TestLendingAndBorrowingLimits works Kueue's rules out by hand: a team
// lends at most its lending limit and borrows at most its borrowing limit;
// a team in no cohort has its nominal.
func TestLendingAndBorrowingLimits(t *testing.T) {
	root := &Node{Name: "c"}
	a, b, c := &Node{Name: "a", Leaf: true}, &Node{Name: "b", Leaf: true}, &Node{Name: "alone", Leaf: true}
	a.Attach(root)
	b.Attach(root)
	a.R(0).Nominal, a.R(0).Lend = 10, 4
	b.R(0).Nominal, b.R(0).Borrow = 2, 3
	c.R(0).Nominal = 5
	root.ComputeSubtree(1)
	c.ComputeSubtree(1)
	if g := a.Guaranteed(0); g != 6 {
		t.Errorf("a keeps %d, want 10 - lending limit 4", g)
	}
	if s := root.R(0).Subtree; s != 6 {
		t.Errorf("the cohort has %d, want 4 lent by a + 2 of b", s)
	}
	for _, tc := range []struct {
		n    *Node
		want GPUs
	}{{a, 12}, {b, 5}, {c, 5}} {
		if got := tc.n.Available(0); got != tc.want {
			t.Errorf("%s may use %d, want %d", tc.n.Name, got, tc.want)
		}
	}
	b.AddUsage(0, 5) // 2 of its own, 3 borrowed of what a lends
	if got := a.Available(0); got != 7 {
		t.Errorf("a may use %d once b borrows 3 of its 4, want 6 kept + 1 still lent", got)
	}
	if got := root.R(0).Usage; got != 5 {
		t.Errorf("the cohort counts %d, want b's 5 (b keeps nothing back)", got)
	}
	a.AddUsage(0, 6)
	if got := root.R(0).Usage; got != 5 {
		t.Errorf("the cohort counts %d once a uses the 6 it keeps, want still 5", got)
	}
	c.AddUsage(0, 2)
	if got := c.Available(0); got != 3 {
		t.Errorf("a team in no cohort may use %d, want 5 - 2", got)
	}
}

// TestAvailableMovesNoMoreThanUsage: taking x GPUs of usage off any team
// raises what any team has available by at most x (and never lowers it).
// A preemption search's room rests on it: evicting victims of x GPUs in all
// gives the searching team at most x more than it has available now.
func TestAvailableMovesNoMoreThanUsage(t *testing.T) {
	checked := 0
	for seed := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(seed), 47))
		w := randomWorld(rng)
		f := rng.IntN(flavors)
		// Charge what fits, team by team, so the tree is in a state a
		// scheduler reaches.
		for range 3 * len(w.teams) {
			tm := w.teams[rng.IntN(len(w.teams))]
			if x := GPUs(1 + rng.IntN(8)); fits(tm, f, x) {
				tm.AddUsage(f, x)
				w.own[tm][f] += x
			}
		}
		from := w.teams[rng.IntN(len(w.teams))]
		if w.own[from][f] == 0 {
			continue
		}
		x := GPUs(1 + rng.IntN(int(w.own[from][f])))
		before := make([]GPUs, len(w.teams))
		for i, tm := range w.teams {
			before[i] = tm.Available(f)
		}
		from.AddUsage(f, -x)
		for i, tm := range w.teams {
			if d := tm.Available(f) - before[i]; d < 0 || d > x {
				t.Fatalf("seed %d: %s's usage of flavor %d lowered by %d moved %s's available by %d (%d to %d)",
					seed, from.Name, f, x, tm.Name, d, before[i], tm.Available(f))
			}
			checked++
		}
	}
	if checked < 2000 {
		t.Fatalf("only %d teams checked: the worlds charge too little", checked)
	}
}
