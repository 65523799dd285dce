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
	Repair            *schema.Repair
	Burst             *schema.Burst
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
	// Nodes are the nodes with a failure on record or retired, by name.
	Nodes []NodeState
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
	// the replacement and burst nodes it holds.
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

// Repair decides one step of a pool's repair at now, from what the manager
// remembers and what the cluster shows; it returns the new state. It is
// pure.
//
// The rules (docs/elastic.md):
//   - a new node not Ready yet is joining for JoinGrace: healthy, no failure;
//   - a node becomes lost when it has been unusable longer than Repair.After,
//     or is retired; within After it counts as healthy (it may come back);
//   - a node that became unusable Repair.Flaps times within FlapWindow is
//     retired, usable or not;
//   - while the healthy GPUs (counting nodes not registered yet as healthy)
//     are below the need, replacement nodes are added, at most
//     Repair.MaxNodes held at once and never beyond nodes.max;
//   - a lost node no gang runs on is retired once the others cover the need:
//     its replacement takes its seat;
//   - a replacement no longer needed (a node recovered) is given back when a
//     node without a gang can go.
func Repair(p Pool, st State, nodes []Node, now time.Time) (State, Decision) {
	st = clone(st)
	var d Decision
	r := p.Repair
	if r == nil {
		st.Replacements = 0
		d.Target = p.Fixed + st.Burst
		d.Retired, d.Kept = retired(st)
		return st, d
	}
	rec := map[string]*NodeState{}
	for i := range st.Nodes {
		rec[st.Nodes[i].Name] = &st.Nodes[i]
	}
	record := func(name string) *NodeState {
		if n := rec[name]; n != nil {
			return n
		}
		st.Nodes = append(st.Nodes, NodeState{Name: name})
		// The slice may have moved: index again.
		for i := range st.Nodes {
			rec[st.Nodes[i].Name] = &st.Nodes[i]
		}
		return rec[name]
	}
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
		case n.Usable && ns != nil:
			ns.UnusableSince = time.Time{}
		case !n.Usable && (ns == nil || ns.UnusableSince.IsZero()):
			ns = record(n.Name)
			ns.UnusableSince = now
			ns.Failures = append(ns.Failures, now)
			if len(ns.Failures) > r.Flaps {
				ns.Failures = ns.Failures[len(ns.Failures)-r.Flaps:]
			}
		}
		if ns != nil && !ns.Retired && len(ns.Failures) >= r.Flaps {
			ns.Retired = true
			ns.Reason = fmt.Sprintf("became unusable %d times within %s", len(ns.Failures), r.FlapWindow)
			d.Actions = append(d.Actions, Action{Kind: ActionFlapping, Node: n.Name, Reason: "node " + n.Name + " " + ns.Reason + ": retired"})
		}
	}
	lost := func(n Node) bool {
		ns := rec[n.Name]
		return ns != nil && (ns.Retired || !n.Usable && now.Sub(ns.UnusableSince) >= r.After)
	}
	// healthy counts the GPUs the pool offers: with expected, also those of
	// nodes within their grace and of seats no node fills yet (they may come;
	// a replacement is added only for what is lost), else only usable nodes'
	// (a lost node is retired only once the nodes there cover the need).
	healthy := func(expected bool) int64 {
		var gpus, seated int64
		for _, n := range nodes {
			if ns := rec[n.Name]; ns != nil && ns.Retired {
				continue
			}
			seated++
			switch {
			case lost(n):
			case n.Usable:
				gpus += min(n.HealthyGPUs, p.GPUsPerNode)
			case expected:
				gpus += p.GPUsPerNode
			}
		}
		if !expected {
			return gpus
		}
		seats := p.Fixed + st.Replacements + st.Burst
		return gpus + max(0, seats-seated)*p.GPUsPerNode
	}
	// Retire lost nodes that no gang runs on once the nodes there cover the
	// need; each gives its seat to its replacement.
	for _, n := range nodes {
		ns := rec[n.Name]
		if n.Busy || !lost(n) || ns.Retired || healthy(false) < p.need() {
			continue
		}
		ns.Retired = true
		ns.Reason = fmt.Sprintf("unusable since %s", ns.UnusableSince.UTC().Format(time.RFC3339))
		if st.Replacements > 0 {
			st.Replacements--
		}
		d.Actions = append(d.Actions, Action{Kind: ActionRetire, Node: n.Name, Reason: fmt.Sprintf("node %s %s; its replacement took its seat", n.Name, ns.Reason)})
	}
	room := max(0, min(r.MaxNodes, p.Max-p.Fixed-st.Burst))
	switch short := p.need() - healthy(true); {
	case short > 0:
		want := min(st.Replacements+ceilDiv(short, p.GPUsPerNode), room)
		if add := want - st.Replacements; add > 0 {
			st.Replacements = want
			d.Actions = append(d.Actions, Action{Kind: ActionReplace, Nodes: add,
				Reason: fmt.Sprintf("%d GPUs short of the %d the quotas need: %s; %d replacement node(s) added", short, p.need(), lostNames(nodes, lost), add)})
		}
		if left := p.need() - healthy(true); left > 0 {
			d.Actions = append(d.Actions, Action{Kind: ActionAtMax,
				Reason: fmt.Sprintf("%d GPUs short with %d replacement node(s), the most repair.maxNodes and nodes.max (%d) allow", left, st.Replacements, p.Max)})
		}
	case short <= -p.GPUsPerNode && st.Replacements > 0:
		// Give back only once the last change took effect (no seat more than
		// the nodes there), and only as many as nodes without a gang could go.
		var idle, seated int64
		for _, n := range nodes {
			if ns := rec[n.Name]; ns == nil || !ns.Retired {
				seated++
				if n.Usable && !n.Busy {
					idle++
				}
			}
		}
		if seated > p.Fixed+st.Replacements+st.Burst {
			idle = 0
		}
		if back := min(-short/p.GPUsPerNode, st.Replacements, idle); back > 0 {
			st.Replacements -= back
			d.Actions = append(d.Actions, Action{Kind: ActionGiveBack, Nodes: back,
				Reason: fmt.Sprintf("%d healthy GPUs beyond the %d the quotas need: %d replacement node(s) given back", -short, p.need(), back)})
		}
	}
	st.Replacements = min(st.Replacements, room)
	d.Target = p.Fixed + st.Replacements + st.Burst
	busy := map[string]bool{}
	for _, n := range nodes {
		busy[n.Name] = n.Busy
		if ns := rec[n.Name]; ns != nil && ns.Retired {
			d.Cordon = append(d.Cordon, n.Name)
		}
	}
	slices.Sort(d.Cordon)
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		ns.Kept = ns.Retired && (r.Broken == schema.BrokenKeep || busy[ns.Name])
	}
	// Forget what is no longer worth remembering: a usable node without
	// failures in the window, and retired nodes beyond MaxRecords.
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
	const most = 5
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more lost", len(names)-most)
	}
	if len(names) == 0 {
		return "no node lost (nodes not registered yet)"
	}
	return strings.Join(names, ", ") + " lost"
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func clone(st State) State {
	st.Nodes = slices.Clone(st.Nodes)
	for i := range st.Nodes {
		st.Nodes[i].Failures = slices.Clone(st.Nodes[i].Failures)
	}
	return st
}
