package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/allot-dev/allot/scheduler/internal/quota"
)

// Scheduler holds the fleet, the quota tree and the workloads, and decides in
// cycles. It is not safe for concurrent use: the runner serializes calls (the
// in-cluster cache guards it with a mutex and feeds it events).
//
// Its state is in parts, each declared beside the code that keeps it: the
// fleet and its placement index (node.go), the organisation and its quota
// trees (quota.go), the workloads (here), the cycle's clock and walk
// (cycle.go), a preemption search's scratch (preempt.go) and the bounds of
// the runs a walk passes over (skip.go).
type Scheduler struct {
	opts Options
	fleet
	org
	// workloads are the known workloads by ID, numbered as submitted (seq);
	// unstarted those admitted whose pods are not all running yet; shapes
	// the shapes of the known workloads and their classes (a shape without
	// its pod count and tier), with the failures of this cycle.
	workloads map[WorkloadID]*workload
	seq       int64
	unstarted map[*workload]struct{}
	shapes    map[shapeKey]*shapeInfo
	clock
	walk
	searchScratch
	runScratch
	// test is nil but in the package's own tests (testHooks).
	test *testHooks
}

// shapeKey is what decides whether a pending workload fits: two workloads of
// one shape fail alike in one cycle, so the second needs no search.
type shapeKey struct {
	team    *team
	tier    *tier
	pods    int64
	gpp     GPUs
	flavors string
	require string
	prefer  string
	cluster string
	rules   string
}

// shapeInfo is what the workloads of one shape (or class: a shape whatever
// its pod count and tier) share: how many there are, and the failures of the
// running cycle (a shape's; a class's, one per tier).
type shapeInfo struct {
	key   shapeKey
	refs  int
	fail  failure
	fails []failure
	// pass is Scheduler.passGen while the run the walk is in may pass
	// over its workloads of the shape (passRun).
	pass uint64
	// scan is Scheduler.scans while the run scanRun reads holds the shape
	// in its bound's shapes, at.
	scan uint64
	at   int
}

// failure is a workload that did not fit, in cycle and epoch.
type failure struct {
	cycle  uint64
	epoch  int
	tier   *tier
	gpp    GPUs
	reason PendingReason
	// pods: the fewest pods of the class that did not fit.
	pods int64
	// reserveTried: a reservation was sought for this shape and none found.
	reserveTried bool
	// starving: the workload that failed was starving (Options.StarvationAfter),
	// submitted then: a starving workload submitted no earlier fails alike.
	starving  bool
	submitted time.Time
	sub       int64 // submitted, unixNanos
}

// New returns a scheduler for the quota tree and tiers of cfg.
func New(cfg Config, opts Options) (*Scheduler, error) {
	s := &Scheduler{
		opts:      opts,
		fleet:     fleet{flavors: map[Flavor]*flavorState{}, nodeByName: map[NodeName]*node{}},
		org:       org{teams: map[TeamName]*team{}, tiers: map[TierName]*tier{}, cohorts: map[CohortName]*quota.Node{}, trees: map[*quota.Node][]*team{}},
		workloads: map[WorkloadID]*workload{},
		unstarted: map[*workload]struct{}{},
		shapes:    map[shapeKey]*shapeInfo{},
		walk:      walk{admittedNow: map[*workload]int{}, borrowFirst: map[*quota.Node]*workload{}},
	}
	s.setNow(time.Time{})
	for _, t := range cfg.Tiers {
		if _, dup := s.tiers[t.Name]; dup {
			return nil, fmt.Errorf("tier %s declared twice", t.Name)
		}
		s.tiers[t.Name] = &tier{spec: t, id: len(s.tiers)}
	}
	for _, c := range cfg.Cohorts {
		if _, dup := s.cohorts[c.Name]; dup {
			return nil, fmt.Errorf("cohort %s declared twice", c.Name)
		}
		s.cohorts[c.Name] = &quota.Node{Name: string(c.Name)}
	}
	for _, c := range cfg.Cohorts {
		if c.Parent == "" {
			continue
		}
		p, ok := s.cohorts[c.Parent]
		if !ok {
			return nil, fmt.Errorf("cohort %s: parent cohort %s does not exist", c.Name, c.Parent)
		}
		s.cohorts[c.Name].Attach(p)
	}
	for _, c := range cfg.Cohorts {
		seen := map[*quota.Node]bool{}
		for q := s.cohorts[c.Name]; q != nil; q = q.Parent {
			if seen[q] {
				return nil, fmt.Errorf("cohort %s: its parents form a cycle", c.Name)
			}
			seen[q] = true
		}
	}
	teams := slices.Clone(cfg.Teams)
	slices.SortFunc(teams, func(a, b Team) int { return cmp.Compare(a.Name, b.Name) })
	for _, spec := range teams {
		if _, dup := s.teams[spec.Name]; dup {
			return nil, fmt.Errorf("team %s declared twice", spec.Name)
		}
		t := &team{spec: spec, weight: spec.Weight, running: map[*workload]struct{}{}}
		switch w := spec.Weight; {
		case w == 0:
			t.weight = 1 // unset
		case !(w > 0) || math.IsInf(w, 0):
			// Every converter's quota tree comes through here: the CLI's
			// schema and the cluster's Team objects alike.
			return nil, fmt.Errorf("team %s: weight %v is not a positive number", spec.Name, w)
		}
		if len(spec.Tiers) > 0 {
			t.tiers = map[TierName]bool{}
			for _, n := range spec.Tiers {
				if _, ok := s.tiers[n]; !ok {
					return nil, fmt.Errorf("team %s: tier %s does not exist", spec.Name, n)
				}
				t.tiers[n] = true
			}
		}
		t.q = &quota.Node{Name: string(spec.Name), Leaf: true}
		if spec.Cohort != "" {
			p, ok := s.cohorts[spec.Cohort]
			if !ok {
				return nil, fmt.Errorf("team %s: cohort %s does not exist", spec.Name, spec.Cohort)
			}
			t.q.Attach(p)
		}
		flavors := make([]Flavor, 0, len(spec.Quota))
		for f, q := range spec.Quota {
			if q.Nominal < 0 || (q.BorrowingLimit != nil && *q.BorrowingLimit < 0) || (q.LendingLimit != nil && *q.LendingLimit < 0) {
				return nil, fmt.Errorf("team %s: negative quota for flavor %s", spec.Name, f)
			}
			flavors = append(flavors, f)
		}
		slices.SortFunc(flavors, func(a, b Flavor) int {
			na, nb := spec.Quota[a].Nominal > 0, spec.Quota[b].Nominal > 0
			if na != nb {
				if na {
					return -1
				}
				return 1
			}
			return cmp.Compare(a, b)
		})
		for _, f := range flavors {
			fs := s.flavor(f)
			t.flavors = append(t.flavors, fs)
			r := t.q.R(fs.id)
			q := spec.Quota[f]
			r.Nominal, r.Has = q.Nominal, true
			if q.BorrowingLimit != nil {
				r.Borrow = *q.BorrowingLimit
			}
			if q.LendingLimit != nil {
				r.Lend = min(*q.LendingLimit, q.Nominal)
			}
		}
		s.teams[spec.Name] = t
		s.teamList = append(s.teamList, t)
	}
	s.recomputeQuota()
	for _, t := range s.teamList {
		root := t.q.Root()
		s.trees[root] = append(s.trees[root], t)
	}
	return s, nil
}

// recomputeQuota refreshes the subtree quotas of every tree.
func (s *Scheduler) recomputeQuota() {
	for _, q := range s.roots() {
		q.ComputeSubtree(len(s.flavorList))
	}
}

func (s *Scheduler) roots() []*quota.Node {
	var out []*quota.Node
	for _, t := range s.teamList {
		if t.q.Parent == nil {
			out = append(out, t.q)
		}
	}
	names := make([]CohortName, 0, len(s.cohorts))
	for n, q := range s.cohorts {
		if q.Parent == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, s.cohorts[n])
	}
	return out
}

// AddNode adds a node to the fleet.
func (s *Scheduler) AddNode(spec Node) error {
	defer s.changedAll()
	if _, dup := s.nodeByName[spec.Name]; dup {
		return fmt.Errorf("node %s added twice", spec.Name)
	}
	if spec.GPUs < 0 {
		return fmt.Errorf("node %s: negative GPUs", spec.Name)
	}
	fs := s.flavor(spec.Flavor)
	if len(fs.nodes) > 0 && (fs.nodes[0].spec.Cluster == "") != (spec.Cluster == "") {
		return fmt.Errorf("node %s: the nodes of flavor %s either all name a cluster or none does (node %s names %q, this one %q)", spec.Name, spec.Flavor, fs.nodes[0].spec.Name, fs.nodes[0].spec.Cluster, spec.Cluster)
	}
	n := &node{spec: spec, flavor: fs}
	s.ix.Add(&n.Node)
	n.spec.Domains = slices.Clone(spec.Domains)
	n.setHeld(0)
	s.nodes = append(s.nodes, n)
	s.nodeByName[spec.Name] = n
	s.addToFlavor(n)
	if !spec.Unhealthy {
		s.list(n)
	}
	s.dirty = true
	return nil
}

func (s *Scheduler) addCapacity(n *node, sign GPUs) {
	n.flavor.held += sign * min(n.held, n.spec.GPUs)
	n.Grow(sign * n.capacity)
}

// Hold sets the GPUs of a node that are held by work the scheduler does not
// place: another scheduler's pods, or a running gang it cannot account for.
// They are not the scheduler's to give, so the node takes no more than its GPUs
// less those held; what runs there stays. It replaces what was held before;
// releasing GPUs lets waiting workloads be considered again.
func (s *Scheduler) Hold(name NodeName, gpus GPUs) error {
	defer s.changedAll()
	n, ok := s.nodeByName[name]
	if !ok {
		return fmt.Errorf("node %s: %w", name, ErrUnknown)
	}
	if gpus < 0 {
		return fmt.Errorf("node %s: cannot hold %d GPUs", name, gpus)
	}
	if gpus == n.held {
		return nil
	}
	listed := n.Listed
	s.unlist(n)
	if !n.spec.Unhealthy {
		s.addCapacity(n, -1)
	}
	if gpus < n.held {
		s.dirty = true
	}
	n.setHeld(gpus)
	if !n.spec.Unhealthy {
		s.addCapacity(n, 1)
	}
	if listed {
		s.list(n)
	}
	return nil
}

// SetNodeHealth marks a node healthy or not. An unhealthy node runs nothing: the
// workloads with a pod on it are evicted, requeued whole ahead of their tier, and
// their restarts counted; their IDs are returned for the runner to stop.
func (s *Scheduler) SetNodeHealth(name NodeName, healthy bool) ([]WorkloadID, error) {
	defer s.changedAll()
	n, ok := s.nodeByName[name]
	if !ok {
		return nil, fmt.Errorf("node %s does not exist", name)
	}
	if healthy == !n.spec.Unhealthy {
		return nil, nil
	}
	if healthy {
		n.spec.Unhealthy = false
		s.addCapacity(n, 1)
		if n.reservedFor == nil {
			s.list(n)
		}
		s.dirty = true
		return nil, nil
	}
	var out []WorkloadID
	for len(n.pods) > 0 {
		w := n.pods[0].w
		s.release(w)
		w.restarts++
		w.ahead = true
		s.requeue(w)
		out = append(out, w.spec.ID)
	}
	s.unlist(n)
	s.addCapacity(n, -1)
	n.spec.Unhealthy = true
	return out, nil
}

// NodeUsed returns the GPUs the scheduler's workloads use on a node.
func (s *Scheduler) NodeUsed(name NodeName) (GPUs, error) {
	n, ok := s.nodeByName[name]
	if !ok {
		return 0, fmt.Errorf("node %s: %w", name, ErrUnknown)
	}
	return n.used, nil
}

// RemoveNode takes a node out of the fleet in place (no rebuild): the
// workloads with a pod on it are evicted and requeued as SetNodeHealth does
// (their IDs are returned for the runner to stop), a reservation holding it is
// dropped, and the name is free for a node added again (say, relabelled).
// The node's record stays behind, empty, so that the index keeps its shape.
func (s *Scheduler) RemoveNode(name NodeName) ([]WorkloadID, error) {
	defer s.changedAll()
	n, ok := s.nodeByName[name]
	if !ok {
		return nil, fmt.Errorf("node %s: %w", name, ErrUnknown)
	}
	evicted, err := s.SetNodeHealth(name, false)
	if err != nil {
		return nil, err
	}
	if n.reservedFor != nil {
		s.unreserve(n.reservedFor)
	}
	n.removed = true
	delete(s.nodeByName, name)
	f := n.flavor
	f.nodes = slices.DeleteFunc(f.nodes, func(x *node) bool { return x == n })
	// The largest domain of each of its levels may have been its.
	n.Forget()
	s.dirty = true
	return evicted, nil
}

// ErrUnknown is returned for a workload or node the scheduler does not know.
var ErrUnknown = errors.New("unknown")

// The largest workload the core takes: a pod's GPUs are on one node (the
// schema bounds gpusPerNode at 128), and a million pods is beyond any fleet.
// With them a workload's GPUs, and every sum of them, stay far inside 63 bits,
// whatever a pod's request or a Job's size says.
const (
	MaxPods       = 1 << 20
	MaxGPUsPerPod = 1 << 10
)

// Submit queues a workload.
func (s *Scheduler) Submit(spec Workload) error {
	if _, dup := s.workloads[spec.ID]; dup {
		return fmt.Errorf("workload %s submitted twice", spec.ID)
	}
	t, ok := s.teams[spec.Team]
	if !ok {
		return fmt.Errorf("workload %s: team %s: %w", spec.ID, spec.Team, ErrUnknown)
	}
	tr, ok := s.tiers[spec.Tier]
	if !ok {
		return fmt.Errorf("workload %s: tier %s: %w", spec.ID, spec.Tier, ErrUnknown)
	}
	if t.tiers != nil && !t.tiers[spec.Tier] {
		return fmt.Errorf("workload %s: team %s may not use tier %s", spec.ID, spec.Team, spec.Tier)
	}
	if spec.Pods <= 0 || spec.GPUsPerPod <= 0 {
		return fmt.Errorf("workload %s: needs at least one pod of at least one GPU, got %d x %d", spec.ID, spec.Pods, spec.GPUsPerPod)
	}
	if spec.Pods > MaxPods || spec.GPUsPerPod > MaxGPUsPerPod {
		return fmt.Errorf("workload %s: %d pods of %d GPUs is more than any fleet holds (at most %d pods of at most %d GPUs)", spec.ID, spec.Pods, spec.GPUsPerPod, MaxPods, MaxGPUsPerPod)
	}
	w := &workload{spec: spec, gpp: spec.GPUsPerPod, team: t, tier: tr, seq: s.seq, since: unixNanos(spec.Submitted), restarts: spec.Restarts, ahead: spec.Restarts > 0}
	w.spec.Flavors = slices.Clone(spec.Flavors)
	s.seq++
	s.setShape(w)
	for _, f := range t.flavors {
		if len(spec.Flavors) == 0 || slices.Contains(spec.Flavors, f.name) {
			w.cands = append(w.cands, f)
		}
	}
	if spec.Rules != nil {
		for _, f := range w.cands {
			s.viewOf(w, f) // built now, not when first considered (viewsOfPending)
		}
	}
	w.reason = PendingReason{Code: ReasonQueued, Requested: w.GPUs()}
	s.workloads[spec.ID] = w
	t.queue.push(w)
	return nil
}

// Started tells the scheduler every pod of an admitted workload runs.
func (s *Scheduler) Started(id WorkloadID) error {
	w, ok := s.workloads[id]
	if !ok || w.state != stateAdmitted {
		return fmt.Errorf("workload %s is not admitted: %w", id, ErrUnknown)
	}
	w.started = true
	delete(s.unstarted, w)
	return nil
}

// Finish removes a workload, running or pending, and frees what it held.
func (s *Scheduler) Finish(id WorkloadID) error {
	w, ok := s.workloads[id]
	if !ok {
		return fmt.Errorf("workload %s: %w", id, ErrUnknown)
	}
	pending := w.state == statePending
	if !pending {
		s.release(w)
	}
	s.unreserve(w)
	if pending {
		w.team.queue.leave(w, nil)
	}
	w.state = stateGone
	s.unref(w.shape)
	s.unref(w.class)
	delete(s.workloads, id)
	return nil
}

// Reason returns why a pending workload waits; false when it is not pending.
// For one the last cycle did not consider (passed over in a run that could
// not start, or not walked), it is what a consideration would find first as
// things are now, not the numbers of when it was last considered; nothing
// is changed.
func (s *Scheduler) Reason(id WorkloadID) (PendingReason, bool) {
	w, ok := s.workloads[id]
	if !ok || w.state != statePending {
		return PendingReason{}, false
	}
	if w.seen != s.cycles {
		if r, ok := s.explain(w); ok {
			return r, true
		}
	}
	return w.reason, true
}

// Restarts returns how many times a workload was requeued after losing a node.
func (s *Scheduler) Restarts(id WorkloadID) int {
	if w, ok := s.workloads[id]; ok {
		return w.restarts
	}
	return 0
}

// bind places w's pods and charges its team.
func (s *Scheduler) bind(w *workload, f *flavorState, pl []placement) {
	if len(pl) == 1 && &pl[0] != &w.pbuf[0] {
		w.pbuf[0] = pl[0]
		pl = w.pbuf[:1]
	}
	w.flavor, w.placements, w.state = f, pl, stateAdmitted
	for _, p := range pl {
		s.setUsed(p.node, p.node.used+p.pods*w.spec.GPUsPerPod)
		p.node.pods = append(p.node.pods, podRef{w: w, pods: p.pods})
	}
	s.charge(w, f, 1)
	if !s.searching {
		s.binding(w)
	}
	w.team.running[w] = struct{}{}
	s.listVictim(w)
}

// release frees what an admitted w holds; it stays known, in no queue.
func (s *Scheduler) release(w *workload) {
	if !s.searching {
		s.releasing(w)
	}
	for _, p := range w.placements {
		n := p.node
		s.setUsed(n, n.used-p.pods*w.spec.GPUsPerPod)
		if !s.searching {
			n.pods = slices.DeleteFunc(n.pods, func(r podRef) bool { return r.w == w })
			continue
		}
		for i := len(n.pods) - 1; i >= 0; i-- {
			if n.pods[i].w == w {
				s.note(nodeOp{n: n, slot: int32(i), pod: n.pods[i]})
				n.pods = slices.Delete(n.pods, i, i+1)
			}
		}
	}
	s.charge(w, w.flavor, -1)
	s.unlistVictim(w)
	delete(w.team.running, w)
	delete(s.unstarted, w)
	w.state = statePending
	w.started = false
	s.dirty = true
}

// requeue returns a released workload to its queue.
func (s *Scheduler) requeue(w *workload) {
	w.placements, w.flavor, w.domain = nil, nil, nil
	w.since = unixNanos(s.now)
	w.reason = PendingReason{Code: ReasonQueued, Requested: w.GPUs()}
	w.team.queue.push(w)
}
