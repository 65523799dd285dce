package index

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// world is an index over random nodes beside the model it must agree with:
// each node's free GPUs, capacity and domains.
type world struct {
	ix Index
	v  View
	// rules is a view of some of the nodes, as placement rules make one;
	// dropped and made anew now and then.
	rules View
	nodes []*Node
	free  []GPUs
	cap   []GPUs
	doms  [][]Domain
}

func newWorld(r *rand.Rand) *world {
	w := &world{v: NewView()}
	clusters := 1 + r.IntN(2)
	for i := range 8 + r.IntN(40) {
		n := &Node{}
		w.ix.Add(n)
		c := GPUs(1 + r.IntN(16))
		cluster := fmt.Sprint("c", r.IntN(clusters))
		block := fmt.Sprint("b", r.IntN(3))
		rack := fmt.Sprint(block, "r", r.IntN(3))
		doms := []Domain{{ClusterLevel, cluster}, {"block", block}, {"rack", rack}}
		w.nodes, w.cap, w.doms = append(w.nodes, n), append(w.cap, c), append(w.doms, doms)
		w.free = append(w.free, GPUs(r.IntN(int(c)+1)))
		w.ix.Attach(&w.v, n, doms, cluster, int64(r.IntN(3)), c, w.free[i])
		n.MarkBase()
		if r.IntN(4) > 0 {
			w.ix.List(n, w.free[i])
		}
	}
	w.newRules(r)
	return w
}

// newRules drops every node's views of rules and makes one anew of a random
// half of the nodes.
func (w *world) newRules(r *rand.Rand) {
	w.rules = NewView()
	for i, n := range w.nodes {
		n.DropViews()
		if r.IntN(2) == 0 {
			w.ix.Attach(&w.rules, n, w.doms[i], w.doms[i][0].Name, 0, w.cap[i], w.free[i])
		}
	}
}

// step changes the index at random as the scheduler does: a node listed,
// unlisted, or its free GPUs moved; outside a trial, now and then, the
// views of rules made anew (a trial builds no view).
func (w *world) step(r *rand.Rand, trial bool) {
	i := r.IntN(len(w.nodes))
	n := w.nodes[i]
	switch r.IntN(40) {
	case 39:
		if !trial {
			w.newRules(r)
		}
	case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12:
		w.ix.List(n, w.free[i])
	case 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25:
		w.ix.Unlist(n, w.free[i])
	default:
		old := w.free[i]
		w.free[i] = GPUs(r.IntN(int(w.cap[i]) + 1))
		w.ix.Move(n, old, w.free[i])
	}
}

func (w *world) dump() string {
	var b strings.Builder
	w.v.dump(&b)
	for _, n := range w.nodes {
		// An unlisted node's slots are in no bucket: they mean nothing.
		if n.Listed {
			fmt.Fprintln(&b, n.ID, n.slots)
		}
	}
	return b.String()
}

// check holds the index against the model: its self-checks, each group's
// free GPUs, capacity and pods that fit, and each level's answers against
// a scan of its domains.
func (w *world) check(t *testing.T, r *rand.Rand) {
	t.Helper()
	if err := w.ix.check(func(n *Node) GPUs { return w.free[n.ID] }); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*View{&w.v, &w.rules} {
		if err := v.check(); err != nil {
			t.Fatal(err)
		}
	}
	// A node is in its flavor's view's groups, then in those of the view
	// of rules, if that admits it: none of a view dropped.
	for _, n := range w.nodes {
		for _, g := range n.Groups[n.Base:] {
			if g != w.rules.All && (g.Level == nil || w.rules.Levels[g.Level.Name] != g.Level) {
				t.Fatalf("node %d is in group %v of a view dropped", n.ID, g.Dom)
			}
		}
	}
	free, capacity, fit := map[*Group]GPUs{}, map[*Group]GPUs{}, map[*Group]int64{}
	gpp := GPUs(1 + r.IntN(8))
	for i, n := range w.nodes {
		for _, g := range n.Groups {
			capacity[g] += w.cap[i]
			if n.Listed {
				free[g] += w.free[i]
				fit[g] += int64(w.free[i] / gpp)
			}
		}
	}
	var groups []*Group
	for _, v := range []*View{&w.v, &w.rules} {
		groups = append(groups, v.All)
		for _, l := range v.Levels {
			for _, g := range l.Domains {
				groups = append(groups, g)
			}
		}
	}
	for _, g := range groups {
		if g.Free != free[g] || g.Capacity != capacity[g] || g.Usable(gpp, 1<<62) != fit[g] {
			t.Fatalf("%v: free %d capacity %d pods of %d %d, want %d %d %d", g.Dom, g.Free, g.Capacity, gpp, g.Usable(gpp, 1<<62), free[g], capacity[g], fit[g])
		}
	}
	pods := int64(1 + r.IntN(6))
	for _, l := range w.rules.Levels {
		for _, g := range l.Domains {
			if fit[g] < pods {
				continue
			}
			if got := l.BestFit(gpp, pods, nil); got == nil || !got.Fits(gpp, pods) {
				t.Fatalf("rules level %s: no best fit for %d pods of %d, and %s fits", l.Name, pods, gpp, g.Dom.Name)
			}
		}
	}
	for _, l := range w.v.Levels {
		var best, fullest, whole *Group
		var most GPUs
		for _, g := range l.Domains {
			most = max(most, g.Free)
			if fit[g] < pods {
				continue
			}
			if best == nil || g.Free < best.Free {
				best = g
			}
			switch {
			case g.Free == capacity[g]:
				if whole == nil || g.Free < whole.Free {
					whole = g
				}
			case fullest == nil || g.Free < fullest.Free:
				fullest = g
			}
		}
		if fullest == nil {
			fullest = whole
		}
		got := l.BestFit(gpp, pods, nil)
		if (got == nil) != (best == nil) || got != nil && (got.Free != best.Free || !got.Fits(gpp, pods)) {
			t.Fatalf("level %s: best fit for %d pods of %d is %v, want %v", l.Name, pods, gpp, got, best)
		}
		got = l.FullestFit(gpp, pods)
		if (got == nil) != (fullest == nil) || got != nil && (got.Free != fullest.Free || got.Whole() != fullest.Whole() || !got.Fits(gpp, pods)) {
			t.Fatalf("level %s: fullest fit for %d pods of %d is %v, want %v", l.Name, pods, gpp, got, fullest)
		}
		if l.LargestFree() != most {
			t.Fatalf("level %s: largest free %d, want %d", l.Name, l.LargestFree(), most)
		}
	}
}

// TestIndexAgainstItsDefinition: after every random step the index's groups,
// levels and answers are what a scan of the nodes makes them.
func TestIndexAgainstItsDefinition(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		w := newWorld(r)
		w.check(t, r)
		for range 100 {
			w.step(r, false)
			w.check(t, r)
		}
	}
}

// TestRollbackPutsBackTheOrder: a trial's changes rolled back to any mark
// leave the index as it was at the mark, down to the order of the nodes in
// each bucket and of the domains in each level; ended, a trial keeps them.
func TestRollbackPutsBackTheOrder(t *testing.T) {
	rolled := 0
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 2))
		w := newWorld(r)
		for range 20 {
			w.ix.Begin()
			type point struct {
				mark   int
				dump   string
				free   []GPUs
				listed []bool
			}
			var points []point
			for range 1 + r.IntN(12) {
				listed := make([]bool, len(w.nodes))
				for i, n := range w.nodes {
					listed[i] = n.Listed
				}
				points = append(points, point{w.ix.Mark(), w.dump(), append([]GPUs(nil), w.free...), listed})
				w.step(r, true)
			}
			// Back to a random mark, then the next earlier one, as a search
			// puts back its victims, the last evicted first.
			for i := len(points) - 1; i >= 0; i -= 1 + r.IntN(3) {
				p := points[i]
				w.ix.Rollback(p.mark)
				copy(w.free, p.free)
				for k, n := range w.nodes {
					if n.Listed != p.listed[k] {
						t.Fatalf("seed %d: node %d listed %v after the rollback", seed, k, n.Listed)
					}
				}
				if got := w.dump(); got != p.dump {
					t.Fatalf("seed %d: rolled back to %d:\n%s\nwant\n%s", seed, p.mark, got, p.dump)
				}
				rolled++
				w.check(t, r)
			}
			kept := w.dump()
			w.ix.End()
			if w.ix.Mark() != 0 || w.dump() != kept {
				t.Fatalf("seed %d: the trial's end changed the index", seed)
			}
		}
	}
	if rolled < 1000 {
		t.Fatalf("only %d rollbacks checked", rolled)
	}
}
