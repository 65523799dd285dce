// Package index is the scheduling core's placement index. For every view of
// a flavor's nodes (all of them, or those some placement rules admit) it
// keeps the listed nodes (healthy, not reserved) bucketed by free GPUs, the
// view's whole and per topology domain, and per level the domains bucketed by
// their free GPUs. A change of one node's free GPUs costs O(levels); finding
// the best-fit domain or the best-fit nodes costs O(GPUs per node) plus the
// domains skipped, independent of the fleet's size.
//
// A trial (a preemption search evicting what-if) changes the index under a
// journal: Rollback puts it back exactly as it was, down to the order of the
// nodes in each bucket, which decides which of equally good nodes the next
// placement takes.
//
// The index knows nodes by number and free GPUs, not workloads: what runs
// where, and what a node's free GPUs are, are the scheduler's. It does no I/O.
package index

import "github.com/allot-dev/allot/api/contract"

// GPUs is a count of GPUs, as the scheduler counts them.
type GPUs = int64

// ClusterLevel is the level of the cluster domains: a node's cluster is its
// widest domain, and the domains below it are keyed within it.
const ClusterLevel = contract.LabelCluster

// Domain is a node's topology domain at one level.
type Domain struct {
	Level string
	Name  string
}

// Node is a node's place in the index.
type Node struct {
	// Groups are the view's whole then one per topology level, widest
	// first, of the flavor's own view (the first Base of them), then the
	// same for every view of rules that admits the node.
	Groups []*Group
	// gbuf and sbuf hold Groups and slots for a node of a few groups, and
	// Dnum the numbers of those groups on their levels (Group.Num), side by
	// side: a search reads a victim's node and its domain, and a slice of
	// their own would be one more miss each.
	gbuf [4]*Group
	sbuf [4]int32
	Dnum [4]int32

	ID, Base int32
	Listed   bool
	// slots are the node's positions in each group's bucket of its free GPUs.
	slots []int32
}

// Index holds the nodes by number and the journal of a trial.
type Index struct {
	nodes   []*Node
	journal []op
	trial   bool
}

// Add numbers n, the next node; it is in no group until attached to a view.
func (ix *Index) Add(n *Node) {
	n.ID = int32(len(ix.nodes))
	n.Groups, n.slots = n.gbuf[:0], n.sbuf[:0]
	ix.nodes = append(ix.nodes, n)
}

// MarkBase records that n's groups so far are those of its flavor's own view.
func (n *Node) MarkBase() { n.Base = int32(len(n.Groups)) }

// DropViews takes n out of every view of rules: it keeps its groups of the
// flavor's own view.
func (n *Node) DropViews() {
	if n.Base > 0 {
		n.Groups, n.slots = n.Groups[:n.Base], n.slots[:n.Base]
	}
}

// List puts n, with free GPUs free, into its groups; it says whether n was
// not listed before. Only listed nodes receive pods.
func (ix *Index) List(n *Node, free GPUs) bool {
	if n.Listed {
		return false
	}
	ix.setListed(n, true)
	for i, g := range n.Groups {
		ix.join(g, n, i, free)
	}
	return true
}

// Unlist takes n, with free GPUs free, out of its groups; it says whether n
// was listed.
func (ix *Index) Unlist(n *Node, free GPUs) bool {
	if !n.Listed {
		return false
	}
	ix.setListed(n, false)
	for i, g := range n.Groups {
		ix.leave(g, n, i, free)
	}
	return true
}

// Move takes a listed node out of its groups' buckets of old free GPUs and
// appends it to those of free.
func (ix *Index) Move(n *Node, old, free GPUs) {
	if !n.Listed {
		return
	}
	for i, g := range n.Groups {
		ix.leave(g, n, i, old)
	}
	for i, g := range n.Groups {
		ix.join(g, n, i, free)
	}
}

// Attach adds n to view v: to its whole and to one domain per level of
// doms (widest first; the cluster's first when the node names one, in
// cluster). capacity is what n adds to its groups' capacity (0 when it is
// unhealthy), cost its cost per GPU-hour and free its free GPUs, by which it
// is bucketed when listed.
func (ix *Index) Attach(v *View, n *Node, doms []Domain, cluster string, cost int64, capacity, free GPUs) {
	start := len(n.Groups)
	n.Groups = append(n.Groups, v.All)
	var parent, clusterGroup *Group
	for depth, d := range doms {
		li := v.Levels[d.Level]
		if li == nil {
			li = v.newLevel(d.Level, depth)
		}
		v.DepthsVary = v.DepthsVary || li.Depth != depth
		key := Key(cluster, d)
		g := li.Domains[key]
		isNew := g == nil
		if isNew {
			g = li.newDomain(d, clusterGroup)
			li.Domains[key] = g
			if parent != nil {
				parent.Children = append(parent.Children, g)
			}
			if d.Level == ClusterLevel {
				g.Cluster, g.Cost = g, cost
				v.Clusters = append(v.Clusters, g)
			}
		}
		if d.Level == ClusterLevel {
			clusterGroup = g
			if isNew || cost < g.Cost {
				g.Cost = min(g.Cost, cost)
				v.sortClusters()
			}
		}
		if i := len(n.Groups); i < len(n.Dnum) {
			n.Dnum[i] = g.Num
		}
		n.Groups = append(n.Groups, g)
		parent = g
	}
	n.slots = append(n.slots, make([]int32, len(n.Groups)-start)...)
	for i := start; i < len(n.Groups); i++ {
		g := n.Groups[i]
		g.grow(capacity)
		if n.Listed {
			ix.join(g, n, i, free)
		}
	}
}

// Key is the key of domain d of a node of the cluster (empty: none) in its
// level's Domains: its name, qualified by the cluster below the cluster
// level (rack r0 of one cluster is not rack r0 of another).
func Key(cluster string, d Domain) string {
	if cluster == "" || d.Level == ClusterLevel {
		return d.Name
	}
	return cluster + "\x00" + d.Name
}

// Grow changes the capacity of each of n's groups by d: n turned healthy
// or unhealthy, or its GPUs held changed.
func (n *Node) Grow(d GPUs) {
	for _, g := range n.Groups {
		g.grow(d)
	}
}

// Forget takes a removed node's part out of its levels' largest capacity.
func (n *Node) Forget() {
	for _, g := range n.Groups {
		if l := g.Level; l != nil {
			l.MaxCap = l.largestCap()
		}
	}
}

func (ix *Index) setListed(n *Node, listed bool) {
	if ix.trial {
		key := 0
		if n.Listed {
			key = 1
		}
		ix.note(op{kind: opListed, n: n, key: key})
	}
	n.Listed = listed
}

// join puts node n (its group i) into g's bucket of free GPUs, and g into its
// new bucket of its level.
func (ix *Index) join(g *Group, n *Node, i int, free GPUs) {
	before := freeKey(g.Free)
	if ix.trial {
		ix.note(op{kind: opAdd, g: g, key: int(free)})
	}
	for int(free) >= len(g.buckets) {
		g.buckets = append(g.buckets, nil)
	}
	n.slots[i] = int32(len(g.buckets[free]))
	g.buckets[free] = append(g.buckets[free], Member{n.ID, int32(i)})
	g.Free += free
	ix.relevel(g, before)
}

// leave takes node n (its group i) out of g's bucket of free GPUs free.
func (ix *Index) leave(g *Group, n *Node, i int, free GPUs) {
	before := freeKey(g.Free)
	if ix.trial {
		ix.note(op{kind: opRemove, g: g, key: int(free), slot: n.slots[i], n: n, k: int32(i)})
	}
	b := g.buckets[free]
	at := n.slots[i]
	last := b[len(b)-1]
	b[at] = last
	ix.nodes[last.ID].slots[last.k] = at
	g.buckets[free] = b[:len(b)-1]
	g.Free -= free
	ix.relevel(g, before)
}

// relevel moves domain g to its bucket of its level, when its free GPUs
// (bucketed as before) moved it out of the one it is in.
func (ix *Index) relevel(g *Group, before int) {
	l := g.Level
	if l == nil {
		return
	}
	if freeKey(g.Free) == before && g.inLevel {
		return
	}
	if g.inLevel {
		if ix.trial {
			ix.note(op{kind: opDelete, g: g, key: g.lvlKey, slot: g.lvlSlot})
		}
		l.delete(g)
	}
	l.insert(g)
	if ix.trial {
		ix.note(op{kind: opInsert, g: g, key: g.lvlKey})
	}
}
