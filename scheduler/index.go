package scheduler

import "math/bits"

// The placement index keeps, for every flavor and for every topology domain of it,
// the listed nodes (healthy, not reserved) bucketed by free GPUs, and, per level,
// the domains bucketed by their free GPUs. A change of one node's free GPUs costs
// O(levels); finding the best-fit domain or the best-fit nodes costs O(GPUs per
// node) plus the domains skipped, independent of the fleet's size.

// node is the scheduler's record of a Node.
type node struct {
	// The fields a search reads of every node a victim runs on come first,
	// in one cache line: a busy fleet's nodes do not fit in the cache.
	used GPUs
	// capacity is what the scheduler may place on the node: its GPUs less
	// those held (see setHeld).
	capacity GPUs
	// freed is what the search numbered freedOf frees on the node: the sum
	// of roomInPods, or of a tally's victims (tally.go).
	freed   GPUs
	freedOf uint64
	flavor  *flavorState
	// groups are the flavor-wide group then one per topology level, widest first
	// (base of them), then the same for every view of the flavor that admits
	// the node's class (see class.go).
	groups []*group
	// gbuf and sbuf hold groups and slots for a node of a few groups, and
	// dnum the numbers of those groups on their levels (see domainNum), in
	// the line after the fields above: a search reads a victim's node and
	// its domain, and a slice of their own would be one more miss each.
	gbuf [4]*group
	sbuf [4]int32
	dnum [4]int32

	id, base int32
	listed   bool
	// removed: taken out of the fleet (RemoveNode); never listed again.
	removed bool
	// held are GPUs taken by work the scheduler does not place (see Hold).
	held GPUs
	// slots are the node's positions in each group's bucket of its free GPUs.
	slots       []int32
	reservedFor *workload
	pods        []podRef
	spec        Node
}

type podRef struct {
	w    *workload
	pods int64
}

// setHeld sets the GPUs held on the node, and its capacity with them.
func (n *node) setHeld(gpus GPUs) {
	n.held, n.capacity = gpus, max(0, n.spec.GPUs-gpus)
}

// free is the node's capacity not in use; never negative, even when more is
// held than the node had free.
func (n *node) free() GPUs { return max(0, n.capacity-n.used) }

// member is a node in a group's bucket, with the index of the group among the
// node's groups.
type member struct {
	id int32
	k  int32
}

// group is a set of nodes (a flavor, or one domain of it) by free GPUs.
type group struct {
	dom     Domain
	buckets [][]member
	free    GPUs
	// capacity is the GPUs of the group's healthy nodes.
	capacity GPUs
	level    *levelIndex
	// children are the domains of the next narrower level inside this one.
	children []*group
	lvlSlot  int32
	lvlKey   int
	inLevel  bool
	// cluster is the domain's cluster (the cluster's own group for a cluster),
	// nil when the nodes name no cluster.
	cluster *group
	// cost, of a cluster, is its cheapest node's cost per GPU-hour.
	cost int64
	// num is the domain's number on its level (levelIndex.doms).
	num int32
}

// domSlot is what a preemption search reads and counts of one domain of a
// level, in a dense array per level (levelIndex.doms): a search's sums over
// its candidates touch the domains of thousands of nodes, and the groups
// themselves are spread over the heap.
type domSlot struct {
	g *group
	// room is domainRoom's sum for the search numbered roomOf.
	room   GPUs
	roomOf uint64
	// tallied is a tally's count of the pods the domain would take, for
	// the tally numbered talliedOf (tally.go).
	tallied   int64
	talliedOf uint64
}

func (g *group) add(n *node, slot int) {
	f := n.free()
	for int(f) >= len(g.buckets) {
		g.buckets = append(g.buckets, nil)
	}
	n.slots[slot] = int32(len(g.buckets[f]))
	g.buckets[f] = append(g.buckets[f], member{n.id, int32(slot)})
	g.free += f
}

func (g *group) remove(s *Scheduler, n *node, slot int, f GPUs) {
	b := g.buckets[f]
	i := n.slots[slot]
	last := b[len(b)-1]
	b[i] = last
	s.nodes[last.id].slots[last.k] = i
	g.buckets[f] = b[:len(b)-1]
	g.free -= f
}

// fits says whether pods pods of gpp GPUs fit on the group's listed nodes.
func (g *group) fits(gpp GPUs, pods int64) bool {
	return usable(g.buckets, gpp, pods) >= pods
}

// usable counts the pods of gpp GPUs the buckets can take, stopping at enough.
func usable(buckets [][]member, gpp GPUs, enough int64) int64 {
	var n int64
	for k := gpp; k < GPUs(len(buckets)); k++ {
		n += int64(len(buckets[k])) * (k / gpp)
		if n >= enough {
			return n
		}
	}
	return n
}

// levelIndex holds the domains of one topology level of a flavor.
type levelIndex struct {
	name    string
	depth   int
	domains map[string]*group
	byFree  [][]*group
	nonzero []uint64
	// maxCap is the largest capacity a domain of the level has had since the
	// last node removal (which sets it to the largest now).
	maxCap GPUs
	// caps counts the level's domains by capacity (none of 0).
	caps map[GPUs]int
	// doms are the level's domains by number (group.num).
	doms []domSlot
}

// newDomain adds a domain to the level.
func (l *levelIndex) newDomain(d Domain, cluster *group) *group {
	g := &group{dom: d, level: l, cluster: cluster, num: int32(len(l.doms))}
	l.doms = append(l.doms, domSlot{g: g})
	return g
}

// grow changes g's capacity by d.
func (g *group) grow(d GPUs) {
	l := g.level
	if l == nil {
		g.capacity += d
		return
	}
	if g.capacity > 0 {
		if l.caps[g.capacity]--; l.caps[g.capacity] == 0 {
			delete(l.caps, g.capacity)
		}
	}
	g.capacity += d
	if g.capacity > 0 {
		if l.caps == nil {
			l.caps = map[GPUs]int{}
		}
		l.caps[g.capacity]++
	}
	l.maxCap = max(l.maxCap, g.capacity)
}

// largestCap is the capacity of the level's largest domain now.
func (l *levelIndex) largestCap() GPUs {
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

func (l *levelIndex) insert(g *group) {
	k := freeKey(g.free)
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

func (l *levelIndex) delete(g *group) {
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
func (l *levelIndex) next(k int) int {
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

// bestFit returns the domain with the least free GPUs that still fits the
// pods, inside cluster within when that is not nil.
func (l *levelIndex) bestFit(gpp GPUs, pods int64, within *group) *group {
	need := gpp * pods
	for k := l.next(freeKey(need)); k >= 0; k = l.next(k + 1) {
		var best *group
		for _, g := range l.byFree[k] {
			if g.free >= need && (best == nil || g.free < best.free) && (within == nil || g.cluster == within) && g.fits(gpp, pods) {
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

// fullestFit returns the fullest domain that fits the pods (see fuller): the
// one in use with the least free GPUs, else the whole one with the least.
func (l *levelIndex) fullestFit(gpp GPUs, pods int64) *group {
	need := gpp * pods
	var whole *group
	for k := l.next(freeKey(need)); k >= 0; k = l.next(k + 1) {
		var best *group
		for _, g := range l.byFree[k] {
			if g.free >= need && (best == nil || fuller(g, best)) && g.fits(gpp, pods) {
				best = g
			}
		}
		switch {
		case best == nil:
		case best.free != best.capacity:
			return best
		case whole == nil:
			whole = best
		}
	}
	return whole
}

// largestFree returns the most free GPUs of one domain of the level.
func (l *levelIndex) largestFree() GPUs {
	var best GPUs
	if k := l.last(); k >= 0 {
		for _, g := range l.byFree[k] {
			best = max(best, g.free)
		}
	}
	return best
}

// last returns the highest non-empty bucket key, or -1.
func (l *levelIndex) last() int {
	for w := len(l.nonzero) - 1; w >= 0; w-- {
		if word := l.nonzero[w]; word != 0 {
			return w*64 + 63 - bits.LeadingZeros64(word)
		}
	}
	return -1
}

// view is the index of the nodes of one flavor that some workloads may use:
// all of them, or those of the classes their placement rules admit.
type view struct {
	all    *group
	levels map[string]*levelIndex
	// order lists the level names widest first.
	order []string
	// start is a copy of all.buckets' lengths at the start of the cycle.
	start []int32
	// empty: no node of the flavor is of a class the view admits.
	empty bool
	// set says, per class of the flavor by number, whether the view admits it
	// ('1') or not ('0'); empty for the flavor's own view.
	set string
	// clusters are the view's clusters, cheapest first (then by name); empty
	// when its nodes name no cluster.
	clusters []*group
}

func newView() *view { return &view{all: &group{}, levels: map[string]*levelIndex{}} }

// flavorState is the index of one flavor's nodes.
type flavorState struct {
	name Flavor
	id   int
	// view holds every node of the flavor; it serves the workloads without
	// placement rules and those whose rules admit every class.
	*view
	res *workload // the gang nodes of this flavor are reserved for, if any
	// held sums what Hold keeps of the flavor's healthy nodes (at most each
	// node's GPUs).
	held GPUs
	// nodes are the flavor's nodes; classes its node classes, numbered.
	nodes   []*node
	classes map[string]int
	// byRules are the views of placement rules by their key; bySet the
	// views by the classes they admit, so that rules admitting the same
	// classes share one.
	byRules map[string]*view
	bySet   map[string]*view
	// victims are the running workloads of each team on each view, in
	// victim order, kept as they start and end (see victims.go).
	victims map[*team]map[*view]*teamVictims
	// gen counts the changes of what a preemption search on the flavor
	// reads (memo.go); bounds what the searches' bounds refused on it.
	gen    uint64
	bounds bounds
}

func (s *Scheduler) flavor(f Flavor) *flavorState {
	if fs, ok := s.flavors[f]; ok {
		return fs
	}
	fs := &flavorState{name: f, id: len(s.flavorList), view: newView(), classes: map[string]int{}}
	s.flavors[f] = fs
	s.flavorList = append(s.flavorList, fs)
	return fs
}

// list puts n into its groups; unlist takes it out. Only listed nodes receive pods.
func (s *Scheduler) list(n *node) {
	if n.listed {
		return
	}
	n.listed = true
	s.changed(n.flavor)
	for i, g := range n.groups {
		if s.searching {
			s.note(indexOp{kind: opAdd, g: g, key: int(n.free())})
		}
		s.regroup(g, func() { g.add(n, i) })
	}
}

func (s *Scheduler) unlist(n *node) {
	if !n.listed {
		return
	}
	n.listed = false
	s.changed(n.flavor)
	f := n.free()
	for i, g := range n.groups {
		if s.searching {
			s.noteRemove(g, n, i, f)
		}
		s.regroup(g, func() { g.remove(s, n, i, f) })
	}
}

// setUsed changes n's used GPUs, keeping the index current.
func (s *Scheduler) setUsed(n *node, used GPUs) {
	s.changed(n.flavor)
	if s.searching {
		s.note(indexOp{kind: opUsed, n: n, used: n.used})
	}
	if !n.listed || used == n.used {
		n.used = used
		return
	}
	old := n.free()
	for i, g := range n.groups {
		if s.searching {
			s.noteRemove(g, n, i, old)
		}
		s.regroup(g, func() { g.remove(s, n, i, old) })
	}
	n.used = used
	for i, g := range n.groups {
		if s.searching {
			s.note(indexOp{kind: opAdd, g: g, key: int(n.free())})
		}
		s.regroup(g, func() { g.add(n, i) })
	}
}

// regroup runs change on g and moves g to its new bucket of its level.
func (s *Scheduler) regroup(g *group, change func()) {
	if g.level == nil {
		change()
		return
	}
	before := freeKey(g.free)
	change()
	if after := freeKey(g.free); after != before || !g.inLevel {
		if g.inLevel {
			if s.searching {
				s.note(indexOp{kind: opDelete, g: g, key: g.lvlKey, slot: g.lvlSlot})
			}
			g.level.delete(g)
		}
		g.level.insert(g)
		if s.searching {
			s.note(indexOp{kind: opInsert, g: g, key: g.lvlKey})
		}
	}
}
