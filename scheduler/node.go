package scheduler

import "github.com/allot-dev/allot/scheduler/internal/index"

// The fleet as the core keeps it: a record per node (what runs there, what
// is held), per flavor its views, and the placement index over them
// (scheduler/internal/index), which buckets the listed nodes by free GPUs.

// fleet is the scheduler's fleet: each flavor's nodes and views, the nodes
// by number (as the index numbers them) and by name, and the placement index.
type fleet struct {
	flavors    map[Flavor]*flavorState
	flavorList []*flavorState
	nodes      []*node
	nodeByName map[NodeName]*node
	ix         index.Index
}

// node is the scheduler's record of a Node.
type node struct {
	// The fields a search reads of every node a victim runs on come first,
	// in one cache line: a busy fleet's nodes do not fit in the cache.
	used GPUs
	// capacity is what the scheduler may place on the node: its GPUs less
	// those held (see setHeld).
	capacity GPUs
	// freed is what the search numbered freedOf frees on the node: the sum
	// of podShort's or domainPodShort's candidates, or of a tally's victims
	// (tally.go).
	freed   GPUs
	freedOf uint64
	flavor  *flavorState
	// Node is the node's place in the index: its groups (and their domains'
	// numbers) in the line after the fields above.
	index.Node
	// removed: taken out of the fleet (RemoveNode); never listed again.
	removed bool
	// held are GPUs taken by work the scheduler does not place (see Hold).
	held        GPUs
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

// view is the index of the nodes of one flavor that some workloads may use:
// all of them, or those of the classes their placement rules admit.
type view struct {
	index.View
	// start is a copy of All's bucket lengths at the start of the cycle.
	start []int32
	// empty: no node of the flavor is of a class the view admits.
	empty bool
	// set says, per class of the flavor by number, whether the view admits it
	// ('1') or not ('0'); empty for the flavor's own view.
	set string
}

func newView() *view { return &view{View: index.NewView()} }

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
	// gen counts the changes of what a preemption search on the flavor
	// reads (memo.go); grown is gen at the last of them that could let any
	// search's bounds find more room; bounds what the bounds refused on it.
	gen, grown uint64
	bounds     bounds
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
	if s.ix.List(&n.Node, n.free()) {
		s.grew(n.flavor)
	}
}

func (s *Scheduler) unlist(n *node) {
	if s.ix.Unlist(&n.Node, n.free()) {
		s.changed(n.flavor)
	}
}

// setUsed changes n's used GPUs, keeping the index current.
func (s *Scheduler) setUsed(n *node, used GPUs) {
	s.changed(n.flavor)
	if s.searching {
		s.note(nodeOp{n: n, used: n.used, slot: -1})
	}
	if used == n.used {
		return
	}
	old := n.free()
	n.used = used
	s.ix.Move(&n.Node, old, n.free())
}
