package scheduler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot-dev/allot/scheduler/internal/index"
)

// indexState prints everything a search's what-if evictions touch, in order:
// each view's groups (their nodes by bucket, in bucket order), each level's
// domains in bucket order, the nodes' used GPUs and pods, and the teams'
// usage and shares.
func indexState(s *Scheduler) string {
	var b strings.Builder
	group := func(g *index.Group) {
		fmt.Fprintf(&b, "%s/%s free %d:", g.Dom.Level, g.Dom.Name, g.Free)
		for k := range g.Buckets() {
			for _, m := range g.Bucket(k) {
				fmt.Fprintf(&b, " %d:%d", k, m.ID)
			}
		}
		b.WriteString("\n")
	}
	for _, f := range s.flavorList {
		var views []*view
		f.eachView(func(v *view) { views = append(views, v) })
		slices.SortFunc(views, func(a, b *view) int { return strings.Compare(a.set, b.set) })
		for _, v := range views {
			fmt.Fprintf(&b, "flavor %s view %q\n", f.name, v.set)
			group(v.All)
			for _, name := range slices.Sorted(maps.Keys(v.Levels)) {
				li := v.Levels[name]
				fmt.Fprintf(&b, "level %s:", name)
				li.MostFreeFirst(func(g *index.Group) bool {
					fmt.Fprintf(&b, " %s", g.Dom.Name)
					return true
				})
				b.WriteString("\n")
				for _, key := range slices.Sorted(maps.Keys(li.Domains)) {
					group(li.Domains[key])
				}
			}
		}
	}
	for _, n := range s.nodes {
		fmt.Fprintf(&b, "%s used %d pods", n.spec.Name, n.used)
		for _, p := range n.pods {
			fmt.Fprintf(&b, " %s:%d", p.w.spec.ID, p.pods)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%+v\n", s.Usage())
	for _, t := range s.teamList {
		fmt.Fprintf(&b, "%s share %v running %d\n", t.spec.Name, t.share, len(t.running))
	}
	return b.String()
}

// TestFailedSearchLeavesNoTrace: a preemption search that finds no set of
// victims leaves the index exactly as it found it, down to the order of the
// nodes in each bucket and of the domains in each level, so that trying a
// workload that does not fit changes nothing a later placement reads.
// Random fleets with placement rules, half of them searching by what-if
// evictions (not tallies); a mutant that puts victims back by binding them
// again fails it.
func TestFailedSearchLeavesNoTrace(t *testing.T) {
	classes := []string{"x", "y", "z"}
	failed := 0
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 43))
		cfg, nodes := randomWorld(rng)
		if seed%2 == 1 {
			nodes = classed(nodes, func(int) string { return classes[rng.IntN(3)] })
		}
		f := newFx(t, cfg, nodes, Options{ReserveAfter: time.Duration(rng.IntN(3)-1) * time.Minute})
		f.s.hooks().noTally = seed%4 >= 2
		var before string
		f.s.hooks().searched = func(done bool) {
			if !done {
				before = indexState(f.s)
				return
			}
			failed++
			if after := indexState(f.s); after != before {
				t.Fatalf("seed %d: a failed search changed the index:\n%s", seed, firstDiff(before, after))
			}
		}
		next := 0
		for step := range 150 {
			sec := step * 30
			for range rng.IntN(5) {
				w := randomWorkload(rng, cfg, next, sec)
				if seed%2 == 1 && rng.IntN(3) > 0 {
					w.Rules = classRules(classes[rng.IntN(3)] + "," + classes[rng.IntN(3)])
				}
				f.submit(w)
				next++
			}
			if ids := f.running(); len(ids) > 0 && rng.IntN(2) == 0 {
				f.finish(ids[rng.IntN(len(ids))])
			}
			f.cycle(sec)
		}
	}
	if failed < 200 {
		t.Fatalf("only %d failed searches: the test does not exercise them", failed)
	}
	t.Logf("%d failed searches left no trace", failed)
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("before: %s\nafter:  %s", la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines before, %d after", len(la), len(lb))
}
