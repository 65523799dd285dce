package scheduler

import (
	"cmp"
	"slices"
	"strings"
)

// Node classes. Kubernetes' placement rules (taints and tolerations,
// nodeSelector, required node affinity) depend on a node's taints and labels,
// which the runner folds into the node's Class: nodes of one class are alike to
// every rule. A workload's Rules are asked once per class, and the nodes of the
// classes they admit form a view of the flavor, an index like the flavor's own
// (by free GPUs, per topology domain). Rules that admit the same classes share
// a view, so a fleet of any size with a handful of classes keeps a handful of
// views, and a placement costs what it costs without rules. A new class (rare:
// a node relabelled or tainted anew) drops the views; they are rebuilt on use.

// maxViews bounds the views of one flavor: rules beyond that many distinct
// admitted class sets wait with NoMatchingNodes rather than make every change
// of a node cost more.
const maxViews = 64

// maxRules bounds the rules remembered per flavor.
const maxRules = 4096

// addToFlavor puts a new node into its flavor's view and into every view of
// rules that admit its class; a class not seen before drops the views, and
// those of the pending workloads are built again at once.
func (s *Scheduler) addToFlavor(n *node) {
	f := n.flavor
	f.nodes = append(f.nodes, n)
	dropped := false
	if _, ok := f.classes[n.spec.Class]; !ok {
		f.classes[n.spec.Class] = len(f.classes)
		dropped = s.dropViews(f)
	}
	s.attach(f.view, n)
	n.MarkBase()
	for _, v := range f.bySet {
		if v.admitsClass(f, n.spec.Class) {
			s.attach(v, n)
		}
	}
	if dropped {
		s.viewsOfPending(f)
	}
}

// viewsOfPending builds the views of f that the pending workloads' rules
// ask for, in submission order. A view's order of nodes (by which ties are
// broken) is the flavor's order when it is built, then moves with every
// change: built when a workload's consideration first asked for it, it
// would depend on which workloads a walk considered, and a walk that
// passes over a run (skip.go) would decide otherwise than one that does
// not. So views are built when a workload is submitted, and here.
func (s *Scheduler) viewsOfPending(f *flavorState) {
	var ws []*workload
	for _, w := range s.workloads {
		if w.state == statePending && w.spec.Rules != nil && slices.Contains(w.cands, f) {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b *workload) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range ws {
		s.viewOf(w, f)
	}
}

// dropViews forgets the flavor's views of rules; its nodes keep only their
// groups of the flavor's own view. It says whether there were any.
func (s *Scheduler) dropViews(f *flavorState) bool {
	if len(f.bySet) == 0 && len(f.byRules) == 0 {
		return false
	}
	for _, n := range f.nodes {
		n.DropViews()
	}
	f.byRules, f.bySet = nil, nil
	return true
}

// attach adds n to the groups of v: the view's whole and one domain per level.
func (s *Scheduler) attach(v *view, n *node) {
	capacity := n.capacity
	if n.spec.Unhealthy {
		capacity = 0
	}
	s.ix.Attach(&v.View, &n.Node, n.domains(), n.spec.Cluster, n.spec.Cost, capacity, n.free())
	v.empty = false
}

// viewOf returns the view of f that w's pods may use.
func (s *Scheduler) viewOf(w *workload, f *flavorState) *view {
	r := w.spec.Rules
	if r == nil {
		return f.view
	}
	key := r.Key()
	if v, ok := f.byRules[key]; ok {
		return v
	}
	classes := make([]string, 0, len(f.classes))
	for c := range f.classes {
		classes = append(classes, c)
	}
	slices.SortFunc(classes, func(a, b string) int { return cmp.Compare(f.classes[a], f.classes[b]) })
	var set strings.Builder
	all := true
	for _, c := range classes {
		if r.Admits(c) {
			set.WriteByte('1')
		} else {
			set.WriteByte('0')
			all = false
		}
	}
	if f.byRules == nil || len(f.byRules) >= maxRules {
		// Rules of workloads long gone are forgotten; the views stay.
		f.byRules = map[string]*view{}
	}
	if f.bySet == nil {
		f.bySet = map[string]*view{}
	}
	var v *view
	switch {
	case all:
		v = f.view
	case f.bySet[set.String()] != nil:
		v = f.bySet[set.String()]
	case len(f.bySet) >= maxViews:
		v = newView()
		v.empty = true
	default:
		v = newView()
		v.empty = true
		v.set = set.String()
		f.bySet[v.set] = v
		for _, n := range f.nodes {
			if v.admitsClass(f, n.spec.Class) {
				s.attach(v, n)
			}
		}
	}
	f.byRules[key] = v
	return v
}

// lists says whether n is a listed node of f that counts for view v.
func (v *view) lists(f *flavorState, n *node) bool {
	return n.Listed && n.flavor == f && (v == f.view || v.admitsClass(f, n.spec.Class))
}

// admitsClass says whether the class is among those v admits.
func (v *view) admitsClass(f *flavorState, class string) bool {
	i, ok := f.classes[class]
	return ok && i < len(v.set) && v.set[i] == '1'
}

// eachView calls fn on the flavor's own view and on each view of rules.
func (f *flavorState) eachView(fn func(*view)) {
	fn(f.view)
	for _, v := range f.bySet {
		fn(v)
	}
}
