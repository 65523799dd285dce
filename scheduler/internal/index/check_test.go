package index

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The index's self-checks: Check holds the index against its definition,
// Dump prints what a trial touches, in order, so that a test compares a
// rolled-back index with the one before.

// check says where the index departs from its definition: a listed node with
// free GPUs (free says how many) not at the slot it records in the bucket of
// its free GPUs of each of its groups; a level whose count of domains by
// capacity, largest capacity or numbering is not its domains'.
func (ix *Index) check(free func(*Node) GPUs) error {
	for _, n := range ix.nodes {
		f := free(n)
		if !n.Listed || f == 0 {
			continue
		}
		for i, g := range n.Groups {
			if int(f) >= len(g.buckets) || int(n.slots[i]) >= len(g.buckets[f]) || g.buckets[f][n.slots[i]] != (Member{n.ID, int32(i)}) {
				return fmt.Errorf("node %d misplaced in the index (group %d of %d)", n.ID, i, len(n.Groups))
			}
		}
	}
	return nil
}

// check says where the view's levels depart from their definition.
func (v *View) check() error {
	for _, name := range slices.Sorted(maps.Keys(v.Levels)) {
		l := v.Levels[name]
		caps := map[GPUs]int{}
		for _, d := range l.Domains {
			if d.Capacity > 0 {
				caps[d.Capacity]++
			}
		}
		if !maps.Equal(caps, l.caps) || l.MaxCap < l.largestCap() {
			return fmt.Errorf("level %s: domains by capacity %v, counted %v, largest %d", l.Name, caps, l.caps, l.MaxCap)
		}
		if len(l.Doms) != len(l.Domains) {
			return fmt.Errorf("level %s: %d domains numbered, %d known", l.Name, len(l.Doms), len(l.Domains))
		}
		for k, d := range l.Doms {
			if d.G.Num != int32(k) || d.G.Level != l {
				return fmt.Errorf("level %s: domain %s numbered %d at %d", l.Name, d.G.Dom.Name, d.G.Num, k)
			}
		}
		for k, gs := range l.byFree {
			for i, g := range gs {
				if !g.inLevel || g.lvlKey != k || int(g.lvlSlot) != i || freeKey(g.Free) != k {
					return fmt.Errorf("level %s: domain %s (free %d) misplaced at %d/%d", l.Name, g.Dom.Name, g.Free, k, i)
				}
			}
		}
	}
	return nil
}

// dump writes what a trial changes of the view, in order: its groups' nodes
// by bucket, in bucket order, and each level's domains by bucket.
func (v *View) dump(b *strings.Builder) {
	group := func(g *Group) {
		fmt.Fprintf(b, "%s/%s free %d:", g.Dom.Level, g.Dom.Name, g.Free)
		for k, ms := range g.buckets {
			for _, m := range ms {
				fmt.Fprintf(b, " %d:%d/%d", k, m.ID, m.k)
			}
		}
		b.WriteString("\n")
	}
	group(v.All)
	for _, name := range slices.Sorted(maps.Keys(v.Levels)) {
		li := v.Levels[name]
		for k, gs := range li.byFree {
			for _, g := range gs {
				fmt.Fprintf(b, "level %s %d: %s@%d/%d\n", name, k, g.Dom.Name, g.lvlSlot, g.lvlKey)
			}
		}
		// Words of no bucket in use at the end mean nothing.
		nz := li.nonzero
		for len(nz) > 0 && nz[len(nz)-1] == 0 {
			nz = nz[:len(nz)-1]
		}
		fmt.Fprintf(b, "nonzero %v\n", nz)
		for _, key := range slices.Sorted(maps.Keys(li.Domains)) {
			group(li.Domains[key])
		}
	}
}
