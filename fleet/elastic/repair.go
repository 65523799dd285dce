package elastic

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allot-dev/allot/schema"
)

// Pool is what the rules know of a pool's declaration and plan.
type Pool struct {
	// Fixed is the planned size (the plan's node target); Spare the spare
	// nodes in it; Max nodes.max.
	Fixed, Spare, Max int64
	GPUsPerNode       int64
	// Named: the pool's module names its nodes (onprem, kwok), so a retired
	// node leaves its seat and goes by name, and the highest seats go first
	// in a shrink; else (a cloud node group of a count) a retired node holds
	// its slot until it is gone, and a shrink removes nodes of the cloud's
	// choosing.
	Named  bool
	Repair *schema.Repair
	Burst  *schema.Burst
	// IndexOf reads a Named pool's node index from its name (fleet.NodeIndex):
	// burst then knows which topology domain a new seat joins. Nil: burst
	// asks for whole domains of new nodes.
	IndexOf func(name string) (int64, bool)
}

// need is the healthy GPUs the quotas need of the pool: the planned size
// less its spare nodes, as pool health counts it.
func (p Pool) need() int64 { return max(0, p.Fixed-p.Spare) * p.GPUsPerNode }

// Node is what the cluster shows of one of the pool's nodes now.
type Node struct {
	Name string
	// Usable: Ready, schedulable, without a fatal GPU fault
	// (nodestate.Read).
	Usable bool
	// HealthyGPUs are the GPUs it offers when usable.
	HealthyGPUs int64
	// Busy: a gang runs on it.
	Busy bool
	// NotReady: the node is not Ready (a GPU fault is another reason to be
	// unusable). Created is when it registered; zero: long ago.
	NotReady bool
	Created  time.Time
}

// JoinGrace is how long a new node may take to become Ready: until then it
// counts as healthy, and its not being Ready yet is no failure.
const JoinGrace = 10 * time.Minute

// State is what the manager remembers of a pool between decisions (on the
// Pool's status): the replacement and burst nodes it holds beyond the plan and
// each node's failures.
type State struct {
	Replacements int64
	Burst        int64
	// BurstTeams attribute the burst nodes to the teams whose gangs caused
	// them (team "": nobody's), by team; they add up to Burst.
	BurstTeams []TeamNodes
	// Idle are the pool's nodes without a gang and since when, while it
	// declares burst.
	Idle []IdleNode
	// Nodes are the nodes with a failure on record or retired, by name.
	Nodes []NodeState
	// AtMax: repair is short and may add no more; BurstAtMax: a waiting
	// gang needs more than the burst room. Each is said once, when it
	// starts (ReplacementAtMax, BurstAtMax), not at every decision.
	AtMax, BurstAtMax bool
}

// NodeState is the record of one node.
type NodeState struct {
	Name string
	// UnusableSince is when the node last became unusable; zero while usable.
	UnusableSince time.Time
	// Failures are when it became unusable, within the flap window, oldest
	// first, at most Repair.Flaps of them.
	Failures []time.Time
	// Retired: the node left the pool's seats for good (cordoned; removed or
	// kept for repair, as Repair.Broken says), once no gang runs on it.
	Retired bool
	// Kept: retired, and staying (Repair.Broken is keep, or a gang still
	// runs on it); else a retired node may be removed.
	Kept bool
	// Reason says why it was retired.
	Reason string
	// Burst: retired as an idle burst node, not for a fault (removed
	// whatever Repair.Broken says).
	Burst bool
}

// Action is one thing a decision does, with why.
type Action struct {
	Kind   ActionKind
	Node   string // the node it concerns, if one
	Nodes  int64  // how many nodes it adds or gives back
	Reason string
}

// ActionKind names an action; they are the reasons of the Pool's events.
type ActionKind string

const (
	ActionReplace  ActionKind = "ReplacementAdded"
	ActionGiveBack ActionKind = "ReplacementReturned"
	ActionRetire   ActionKind = "NodeRetired"
	ActionFlapping ActionKind = "NodeFlapping"
	ActionAtMax    ActionKind = "ReplacementAtMax"
)

// Decision is the outcome of one decision.
type Decision struct {
	// Target is the node count the pool should have: its planned size and
	// the replacement and burst nodes it holds, less, in a Named pool, what
	// kept retired nodes take of nodes.max.
	Target int64
	// Retired are the nodes outside the pool's seats, sorted: the module
	// leaves them out of its count, and deletes those not Kept.
	Retired []string
	// Kept are the retired nodes that stay: Repair.Broken is keep, or a gang
	// still runs on them.
	Kept []string
	// Cordon are the retired nodes still registered: no new gang may land
	// on them.
	Cordon  []string
	Actions []Action
}

// MaxRecords bounds State.Nodes (a Pool's status stays small): beyond it the
// retired records that failed longest ago are forgotten first.
const MaxRecords = 1000

// MassFailure: when more than this share of a pool's nodes (and more than
// one) are unusable at once, no failure is counted: an outage of the pool or
// its control plane, not a node's fault, must not retire nodes as flapping.
const MassFailure = 0.2

// Repair decides one step of a pool's repair at now, from what the manager
// remembers and what the cluster shows (nodes in index order); it returns
// the new state. It is pure.
//
// The rules (docs/elastic.md):
//   - a new node not Ready yet is joining for JoinGrace: healthy, no failure;
//   - a node is impaired while unusable or offering fewer GPUs than it has;
//     within Repair.After it counts as whole (it may come back), after that
//     with what it offers; an unusable one is then lost;
//   - a node impaired Repair.Flaps times within FlapWindow is retired, usable
//     or not, and failures are not counted while more than MassFailure of
//     the pool is unusable;
//   - while the healthy GPUs (counting seats whose node is being made) are
//     below the need, replacement nodes are added, at most Repair.MaxNodes
//     held at once, never beyond nodes.max nor the envelope the cost
//     ceiling is priced at (kept retired nodes included: Pool.most);
//   - a lost node no gang runs on is retired once the usable nodes cover the
//     need: in a Named pool its replacement takes its seat; in a pool of a
//     count the replacement is held until the retired node is gone;
//   - a replacement no longer needed is given back once the last change took
//     effect and the node that would go has no gang.
func Repair(p Pool, st State, nodes []Node, now time.Time) (State, Decision) {
	st = clone(st)
	var d Decision
	r := p.Repair
	if r == nil {
		// Only burst's retirements: forgotten once gone, cordoned till then.
		st.Replacements, st.AtMax = 0, false
		present := map[string]bool{}
		for _, n := range nodes {
			present[n.Name] = true
		}
		st.Nodes = slices.DeleteFunc(st.Nodes, func(ns NodeState) bool { return ns.Retired && ns.Burst && !present[ns.Name] })
		var kept int64
		for _, n := range nodes {
			if ns := find(st, n.Name); ns != nil && ns.Retired {
				d.Cordon = append(d.Cordon, n.Name)
				ns.Kept = n.Busy || !ns.Burst && ns.Kept
				if keptBeside(p, ns, n) {
					kept++
				}
			}
		}
		slices.Sort(d.Cordon)
		d.Target = max(0, min(p.Fixed+st.Burst, p.most()-kept))
		d.Retired, d.Kept = retired(st)
		return st, d
	}
	rec := map[string]*NodeState{}
	index := func() {
		clear(rec)
		for i := range st.Nodes {
			rec[st.Nodes[i].Name] = &st.Nodes[i]
		}
	}
	index()
	record := func(name string) *NodeState {
		if n := rec[name]; n != nil {
			return n
		}
		st.Nodes = append(st.Nodes, NodeState{Name: name})
		index() // the slice may have moved
		return rec[name]
	}
	impaired := func(n Node) bool { return !n.Usable || n.HealthyGPUs < p.GPUsPerNode }
	var down int
	for _, n := range nodes {
		if !n.Usable {
			down++
		}
	}
	mass := down > 1 && float64(down) > MassFailure*float64(len(nodes))
	// Failures and flaps.
	for _, n := range nodes {
		ns := rec[n.Name]
		if !n.Usable && n.NotReady && ns == nil && now.Sub(n.Created) < JoinGrace {
			continue // joining
		}
		if ns != nil {
			ns.Failures = slices.DeleteFunc(ns.Failures, func(t time.Time) bool { return now.Sub(t) >= r.FlapWindow })
		}
		switch {
		case !impaired(n) && ns != nil:
			ns.UnusableSince = time.Time{}
		case impaired(n) && (ns == nil || ns.UnusableSince.IsZero()):
			ns = record(n.Name)
			ns.UnusableSince = now
			if !mass {
				ns.Failures = append(ns.Failures, now)
				if len(ns.Failures) > r.Flaps {
					ns.Failures = ns.Failures[len(ns.Failures)-r.Flaps:]
				}
			}
		}
		if ns != nil && !ns.Retired && len(ns.Failures) >= r.Flaps {
			ns.Retired = true
			ns.Reason = fmt.Sprintf("became unusable %d times within %s", len(ns.Failures), r.FlapWindow)
			d.Actions = append(d.Actions, Action{Kind: ActionFlapping, Node: n.Name, Reason: "node " + n.Name + " " + ns.Reason + ": retired"})
		}
	}
	past := func(n Node) bool {
		ns := rec[n.Name]
		return ns != nil && !ns.UnusableSince.IsZero() && now.Sub(ns.UnusableSince) >= r.After
	}
	lost := func(n Node) bool {
		ns := rec[n.Name]
		return ns != nil && (ns.Retired || !n.Usable && past(n))
	}
	retiredNode := func(n Node) bool { ns := rec[n.Name]; return ns != nil && ns.Retired }
	// healthy counts the GPUs the pool offers: with expected, impaired nodes
	// within their grace count whole and seats no node fills yet count too
	// (a replacement is added only for what is lost); else only what usable
	// nodes offer (a lost node is retired only once they cover the need).
	// seated counts the nodes in the pool's seats: a retired node leaves its
	// seat in a Named pool, and holds its slot of a count until it is gone.
	seatedNodes := func() int64 {
		var seated int64
		for _, n := range nodes {
			if !retiredNode(n) || !p.Named {
				seated++
			}
		}
		return seated
	}
	// Kept retired nodes of a Named pool stand beside its seats: they count
	// against nodes.max and, billed too, against the envelope its cost
	// ceiling is priced at (Pool.most); the seats give way to them there.
	keptHere := func() int64 { return keptCount(p, rec, nodes) }
	seats := func() int64 { return max(0, min(p.Fixed+st.Replacements+st.Burst, p.most()-keptHere())) }
	healthy := func(expected bool) int64 {
		var gpus int64
		for _, n := range nodes {
			switch {
			case lost(n):
			case expected && impaired(n) && !past(n):
				gpus += p.GPUsPerNode
			case n.Usable:
				gpus += min(n.HealthyGPUs, p.GPUsPerNode)
			}
		}
		if !expected {
			return gpus
		}
		return gpus + max(0, seats()-seatedNodes())*p.GPUsPerNode
	}
	// A retired node that is gone is forgotten; in a pool of a count its
	// replacement has taken its place.
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.Name] = true
	}
	st.Nodes = slices.DeleteFunc(st.Nodes, func(ns NodeState) bool {
		if !ns.Retired || present[ns.Name] {
			return false
		}
		if !p.Named && !ns.Burst && st.Replacements > 0 {
			st.Replacements--
		}
		return true
	})
	index()
	// Retire lost nodes that no gang runs on once the usable nodes cover
	// the need.
	for _, n := range nodes {
		ns := rec[n.Name]
		if n.Busy || !lost(n) || ns.Retired || healthy(false) < p.need() {
			continue
		}
		ns.Retired = true
		ns.Reason = fmt.Sprintf("unusable since %s", ns.UnusableSince.UTC().Format(time.RFC3339))
		why := "its replacement took its seat"
		if p.Named && st.Replacements > 0 {
			st.Replacements--
		} else if !p.Named {
			why = "cordoned; its replacement stays until it is gone"
		}
		d.Actions = append(d.Actions, Action{Kind: ActionRetire, Node: n.Name, Reason: fmt.Sprintf("node %s %s; %s", n.Name, ns.Reason, why)})
	}
	room := max(0, min(r.MaxNodes, p.most()-p.Fixed-st.Burst-keptHere()))
	st.Replacements = min(st.Replacements, room)
	switch short := p.need() - healthy(true); {
	case short > 0:
		want := min(st.Replacements+ceilDiv(short, p.GPUsPerNode), room)
		if add := want - st.Replacements; add > 0 {
			st.Replacements = want
			d.Actions = append(d.Actions, Action{Kind: ActionReplace, Nodes: add,
				Reason: fmt.Sprintf("%d GPUs short of the %d the quotas need: %s; %d replacement node(s) added", short, p.need(), lostNames(nodes, lost), add)})
		}
		if left := p.need() - healthy(true); left > 0 && !st.AtMax {
			d.Actions = append(d.Actions, Action{Kind: ActionAtMax,
				Reason: fmt.Sprintf("%d GPUs short with %d replacement node(s), the most repair.maxNodes and nodes.max (%d) allow", left, st.Replacements, p.Max)})
		}
	case short <= -p.GPUsPerNode && st.Replacements > 0 && seatedNodes() == seats():
		// Give back only once the last change took effect (every seat
		// filled, no node leaving), and only nodes
		// that may go: in a Named pool the last seats (the module removes the
		// highest indices), else any node without a gang.
		back := min(-short/p.GPUsPerNode, st.Replacements)
		var free int64
		if p.Named {
			for i := len(nodes) - 1; i >= 0 && free < back; i-- {
				n := nodes[i]
				if retiredNode(n) {
					continue
				}
				if n.Busy || !n.Usable {
					break
				}
				free++
			}
		} else {
			for _, n := range nodes {
				if n.Usable && !n.Busy && !retiredNode(n) {
					free++
				}
			}
		}
		if back = min(back, free); back > 0 {
			st.Replacements -= back
			d.Actions = append(d.Actions, Action{Kind: ActionGiveBack, Nodes: back,
				Reason: fmt.Sprintf("%d healthy GPUs beyond the %d the quotas need: %d replacement node(s) given back", -short, p.need(), back)})
		}
	}
	st.AtMax = p.need()-healthy(true) > 0
	d.Target = seats()
	busy := map[string]bool{}
	for _, n := range nodes {
		busy[n.Name] = n.Busy
		if retiredNode(n) {
			d.Cordon = append(d.Cordon, n.Name)
		}
	}
	slices.Sort(d.Cordon)
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		ns.Kept = ns.Retired && (r.Broken == schema.BrokenKeep && !ns.Burst || busy[ns.Name])
	}
	// Forget what is no longer worth remembering: a node without failures in
	// the window that is not impaired, and retired nodes beyond MaxRecords.
	st.Nodes = slices.DeleteFunc(st.Nodes, func(ns NodeState) bool {
		return !ns.Retired && ns.UnusableSince.IsZero() && len(ns.Failures) == 0
	})
	if len(st.Nodes) > MaxRecords {
		// Retired records first, oldest failure first: those go.
		slices.SortStableFunc(st.Nodes, func(a, b NodeState) int {
			if a.Retired != b.Retired {
				if a.Retired {
					return -1
				}
				return 1
			}
			return a.UnusableSince.Compare(b.UnusableSince)
		})
		st.Nodes = st.Nodes[len(st.Nodes)-MaxRecords:]
	}
	slices.SortFunc(st.Nodes, func(a, b NodeState) int { return strings.Compare(a.Name, b.Name) })
	d.Retired, d.Kept = retired(st)
	return st, d
}

func retired(st State) (all, kept []string) {
	for _, ns := range st.Nodes {
		if ns.Retired {
			all = append(all, ns.Name)
			if ns.Kept {
				kept = append(kept, ns.Name)
			}
		}
	}
	slices.Sort(all)
	slices.Sort(kept)
	return all, kept
}

func lostNames(nodes []Node, lost func(Node) bool) string {
	var names []string
	for _, n := range nodes {
		if lost(n) {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return "no node lost (nodes not registered yet)"
	}
	return nameList(names) + " lost"
}

// nameList names nodes in a reason: the first five, and how many more.
func nameList(names []string) string {
	const most = 5
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func find(st State, name string) *NodeState {
	for i := range st.Nodes {
		if st.Nodes[i].Name == name {
			return &st.Nodes[i]
		}
	}
	return nil
}

func clone(st State) State {
	st.BurstTeams = slices.Clone(st.BurstTeams)
	st.Idle = slices.Clone(st.Idle)
	st.Nodes = slices.Clone(st.Nodes)
	for i := range st.Nodes {
		st.Nodes[i].Failures = slices.Clone(st.Nodes[i].Failures)
	}
	return st
}
