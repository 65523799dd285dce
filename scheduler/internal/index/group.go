package index

import (
	"cmp"
	"math/bits"
	"slices"
)

// Member is a node in a group's bucket: its number, and the index of the
// group among the node's groups.
type Member struct {
	ID int32
	k  int32
}

// Group is a set of listed nodes by free GPUs: a view's whole, or one
// domain of it.
type Group struct {
	Dom     Domain
	buckets [][]Member
	// Free is the GPUs free on the group's listed nodes.
	Free GPUs
	// Capacity is the GPUs of the group's healthy nodes.
	Capacity GPUs
	// Level is the domain's level; nil for a view's whole.
	Level *Level
	// Children are the domains of the next narrower level inside this one.
	Children []*Group
	lvlSlot  int32
	lvlKey   int
	inLevel  bool
	// Cluster is the domain's cluster (the cluster's own group for a
	// cluster), nil when the nodes name no cluster.
	Cluster *Group
	// Cost, of a cluster, is its cheapest node's cost per GPU-hour.
	Cost int64
	// Num is the domain's number on its level (Level.Doms).
	Num int32
}

// Buckets is one more than the most free GPUs a node of the group has had.
func (g *Group) Buckets() int { return len(g.buckets) }

// Bucket is the group's nodes with k free GPUs, in the order placement
// takes them.
func (g *Group) Bucket(k int) []Member { return g.buckets[k] }

// Fits says whether pods pods of gpp GPUs fit on the group's listed nodes.
func (g *Group) Fits(gpp GPUs, pods int64) bool {
	return g.Usable(gpp, pods) >= pods
}

// Usable counts the pods of gpp GPUs the group's nodes can take, stopping
// at enough.
func (g *Group) Usable(gpp GPUs, enough int64) int64 {
	var n int64
	for k := gpp; k < GPUs(len(g.buckets)); k++ {
		n += int64(len(g.buckets[k])) * (k / gpp)
		if n >= enough {
			return n
		}
	}
	return n
}

// Whole says whether nothing runs on the group's listed nodes.
func (g *Group) Whole() bool { return g.Free == g.Capacity }

// Fuller says whether domain a is fuller than b: a domain already in use
// before a whole one (so whole domains stay whole, whatever their size), then
// the one with the least free GPUs.
func Fuller(a, b *Group) bool {
	if wa, wb := a.Whole(), b.Whole(); wa != wb {
		return wb
	}
	return a.Free < b.Free
}

// Descend goes from domain g down the levels, each time into the fullest
// narrower domain that still fits the pods (see Fuller), and returns the
// narrowest one reached.
func Descend(g *Group, gpp GPUs, pods int64) *Group {
	need := gpp * pods
	for {
		var best *Group
		for _, c := range g.Children {
			if c.Free >= need && (best == nil || Fuller(c, best)) && c.Fits(gpp, pods) {
				best = c
			}
		}
		if best == nil {
			return g
		}
		g = best
	}
}

// grow changes g's capacity by d.
func (g *Group) grow(d GPUs) {
	if d == 0 {
		return
	}
	l := g.Level
	if l == nil {
		g.Capacity += d
		return
	}
	if g.Capacity > 0 {
		if l.caps[g.Capacity]--; l.caps[g.Capacity] == 0 {
			delete(l.caps, g.Capacity)
		}
	}
	g.Capacity += d
	if g.Capacity > 0 {
		if l.caps == nil {
			l.caps = map[GPUs]int{}
		}
		l.caps[g.Capacity]++
	}
	l.MaxCap = max(l.MaxCap, g.Capacity)
}

// DomSlot is what a preemption search reads and counts of one domain of a
// level, in a dense array per level (Level.Doms): a search's sums over its
// candidates touch the domains of thousands of nodes, and the groups
// themselves are spread over the heap. The counts are the search's, stamped
// with the number of the search that made them.
type DomSlot struct {
	G *Group
	// Room is a search's sum of GPUs its candidates hold in the domain, for
	// the search numbered RoomOf.
	Room   GPUs
	RoomOf uint64
	// Tallied is a tally's (or a bound's) count of the pods the domain
	// would take, for the one numbered TalliedOf.
	Tallied   int64
	TalliedOf uint64
}

// Level holds the domains of one topology level of a view.
type Level struct {
	Name    string
	Depth   int
	Domains map[string]*Group
	byFree  [][]*Group
	nonzero []uint64
	// MaxCap is the largest capacity a domain of the level has had since
	// the last node removal (Node.Forget sets it to the largest now).
	MaxCap GPUs
	// caps counts the level's domains by capacity (none of 0).
	caps map[GPUs]int
	// Doms are the level's domains by number (Group.Num).
	Doms []DomSlot
}

// newDomain adds a domain to the level.
func (l *Level) newDomain(d Domain, cluster *Group) *Group {
	g := &Group{Dom: d, Level: l, Cluster: cluster, Num: int32(len(l.Doms))}
	l.Doms = append(l.Doms, DomSlot{G: g})
	return g
}

// largestCap is the capacity of the level's largest domain now.
func (l *Level) largestCap() GPUs {
	var m GPUs
	for c := range l.caps {
		m = max(m, c)
	}
	return m
}

const exactBuckets = 2048

// freeKey buckets a domain's free GPUs: exact below exactBuckets, by power of two above.
func freeKey(f GPUs) int {
	if f < exactBuckets {
		return int(f)
	}
	return exactBuckets + bits.Len64(uint64(f)) - bits.Len64(exactBuckets)
}

func (l *Level) insert(g *Group) {
	k := freeKey(g.Free)
	for k >= len(l.byFree) {
		l.byFree = append(l.byFree, nil)
		if len(l.byFree) > len(l.nonzero)*64 {
			l.nonzero = append(l.nonzero, 0)
		}
	}
	g.lvlKey, g.lvlSlot, g.inLevel = k, int32(len(l.byFree[k])), true
	l.byFree[k] = append(l.byFree[k], g)
	l.nonzero[k/64] |= 1 << (k % 64)
}

func (l *Level) delete(g *Group) {
	b := l.byFree[g.lvlKey]
	last := b[len(b)-1]
	b[g.lvlSlot] = last
	last.lvlSlot = g.lvlSlot
	l.byFree[g.lvlKey] = b[:len(b)-1]
	if len(b) == 1 {
		l.nonzero[g.lvlKey/64] &^= 1 << (g.lvlKey % 64)
	}
	g.inLevel = false
}

// next returns the first non-empty bucket key at or above k, or -1.
func (l *Level) next(k int) int {
	for w := k / 64; w < len(l.nonzero); w++ {
		word := l.nonzero[w]
		if w == k/64 {
			word &^= (1 << (k % 64)) - 1
		}
		if word != 0 {
			return w*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// BestFit returns the domain with the least free GPUs that still fits the
// pods, inside cluster within when that is not nil.
func (l *Level) BestFit(gpp GPUs, pods int64, within *Group) *Group {
	need := gpp * pods
	for k := l.next(freeKey(need)); k >= 0; k = l.next(k + 1) {
		var best *Group
		for _, g := range l.byFree[k] {
			if g.Free >= need && (best == nil || g.Free < best.Free) && (within == nil || g.Cluster == within) && g.Fits(gpp, pods) {
				best = g
				if k < exactBuckets {
					return best
				}
			}
		}
		if best != nil {
			return best
		}
	}
	return nil
}

// FullestFit returns the fullest domain that fits the pods (see Fuller):
// the one in use with the least free GPUs, else the whole one with the least.
func (l *Level) FullestFit(gpp GPUs, pods int64) *Group {
	need := gpp * pods
	var whole *Group
	for k := l.next(freeKey(need)); k >= 0; k = l.next(k + 1) {
		var best *Group
		for _, g := range l.byFree[k] {
			if g.Free >= need && (best == nil || Fuller(g, best)) && g.Fits(gpp, pods) {
				best = g
			}
		}
		switch {
		case best == nil:
		case !best.Whole():
			return best
		case whole == nil:
			whole = best
		}
	}
	return whole
}

// LargestFree returns the most free GPUs of one domain of the level.
func (l *Level) LargestFree() GPUs {
	var best GPUs
	if k := l.last(); k >= 0 {
		for _, g := range l.byFree[k] {
			best = max(best, g.Free)
		}
	}
	return best
}

// MostFreeFirst calls fn on the level's domains, those with the most free
// GPUs first (by bucket), until fn returns false.
func (l *Level) MostFreeFirst(fn func(*Group) bool) {
	for k := len(l.byFree) - 1; k >= 0; k-- {
		for _, g := range l.byFree[k] {
			if !fn(g) {
				return
			}
		}
	}
}

// last returns the highest non-empty bucket key, or -1.
func (l *Level) last() int {
	for w := len(l.nonzero) - 1; w >= 0; w-- {
		if word := l.nonzero[w]; word != 0 {
			return w*64 + 63 - bits.LeadingZeros64(word)
		}
	}
	return -1
}

// View is the index of the nodes of one flavor that some workloads may use:
// all of them, or those of the classes their placement rules admit.
type View struct {
	All    *Group
	Levels map[string]*Level
	// Order lists the level names widest first.
	Order []string
	// Clusters are the view's clusters, cheapest first (then by name);
	// empty when its nodes name no cluster.
	Clusters []*Group
	// DepthsVary: two of its levels are at one depth, or some node names a
	// level at a depth other than the level's: a node's group at a depth is
	// then not known to be of the level of that depth.
	DepthsVary bool
}

// NewView returns a view of no nodes.
func NewView() View { return View{All: &Group{}, Levels: map[string]*Level{}} }

func (v *View) newLevel(name string, depth int) *Level {
	li := &Level{Name: name, Depth: depth, Domains: map[string]*Group{}}
	for _, o := range v.Levels {
		v.DepthsVary = v.DepthsVary || o.Depth == depth
	}
	v.Levels[name] = li
	v.Order = append(v.Order, name)
	slices.SortStableFunc(v.Order, func(a, b string) int { return cmp.Compare(v.Levels[a].Depth, v.Levels[b].Depth) })
	return li
}

func (v *View) sortClusters() {
	slices.SortStableFunc(v.Clusters, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(a.Dom.Name, b.Dom.Name))
	})
}
