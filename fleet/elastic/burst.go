package elastic

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/allot-dev/allot/schema"
)

// Gang is a pending gang the pool's nodes could run: it fits its team's
// quota but not the free nodes (the scheduler's InsufficientNodes or
// NoTopologyDomain on the pool's flavor), in the scheduler's order.
type Gang struct {
	Team string
	GPUs int64
	// DomainNodes are the nodes of the topology domain all its pods must
	// share; 0: none required.
	DomainNodes int64
	// PodGPUs are the GPUs of each of its pods (a pod never spans nodes);
	// 0: packed by GPUs alone.
	PodGPUs int64
}

// nodes returns the nodes the gang takes of a pool of gpn GPUs per node.
func (g Gang) nodes(gpn int64) int64 {
	if g.PodGPUs > 0 && g.PodGPUs <= gpn {
		return ceilDiv(ceilDiv(g.GPUs, g.PodGPUs), gpn/g.PodGPUs)
	}
	return ceilDiv(g.GPUs, gpn)
}

// Settle is how long a node that joined stays idle before the pool grows
// again: the scheduler places pending gangs on it first.
const Settle = 2 * time.Minute

// MaxGangs bounds the pending gangs one burst decision weighs.
const MaxGangs = 10000

// Burst nodes' actions.
const (
	ActionBurstUp    ActionKind = "BurstScaledUp"
	ActionBurstDown  ActionKind = "BurstScaledDown"
	ActionBurstAtMax ActionKind = "BurstAtMax"
)

// TeamNodes are burst nodes held for a team's gangs.
type TeamNodes struct {
	Team  string
	Nodes int64
}

// IdleNode is when a node without a gang last ran one (or joined).
type IdleNode struct {
	Name  string
	Since time.Time
}

// burstRoom is the most burst nodes the pool may hold: what the envelope
// allows (planner.EnvelopeOf: burst gets what replacement leaves of
// nodes.max) and, now, what replacements and kept nodes leave.
func (p Pool) burstRoom(st State, kept int64) int64 {
	if p.Burst == nil {
		return 0
	}
	room := max(0, p.Max-p.Fixed)
	if p.Repair != nil {
		room -= min(max(0, p.Repair.MaxNodes), room)
	}
	return max(0, min(p.Burst.MaxNodes, room, p.Max-p.Fixed-st.Replacements-kept))
}

// Decide runs one step of a pool's burst and then of its repair (Repair):
// the decision the Pool reconciler makes and the simulator replays. gangs
// are the pending gangs waiting for the pool's nodes, in the scheduler's
// order.
func Decide(p Pool, st State, gangs []Gang, nodes []Node, now time.Time) (State, Decision) {
	st, acts := burst(p, clone(st), gangs, nodes, now)
	st, d := Repair(p, st, nodes, now)
	d.Actions = append(acts, d.Actions...)
	return st, d
}

// burst decides the pool's burst nodes (docs/elastic.md#burst):
//   - the pool grows, within its burst room, by the nodes the pending gangs
//     need in whole topology domains (less idle usable nodes, for gangs that
//     need no domain), in the scheduler's order, skipping a gang larger than
//     the room left; not while a seat is unfilled or a node that joined is
//     still settling, so that nodes under way are never asked for twice;
//   - a burst node is given back once a node has run no gang for
//     Burst.IdleAfter and no waiting gang could use it, the longest idle
//     first (an idle node has no gang: the emptiest there is): in a Named
//     pool that node is retired (it leaves its seat and is removed), else
//     the count shrinks (the shrink guard holds one that would remove work);
//   - the burst nodes are attributed to the teams whose gangs caused them,
//     and given back from the team that holds the most.
func burst(p Pool, st State, gangs []Gang, nodes []Node, now time.Time) (State, []Action) {
	if p.Burst == nil {
		st.Burst, st.BurstTeams, st.Idle, st.BurstAtMax = 0, nil, nil, false
		return st, nil
	}
	var acts []Action
	retired := map[string]bool{}
	var kept int64
	for _, ns := range st.Nodes {
		if ns.Retired {
			retired[ns.Name] = true
		}
	}
	for _, n := range nodes {
		if p.Named && retired[n.Name] && (n.Busy || p.Repair != nil && p.Repair.Broken == schema.BrokenKeep && !burstRecord(st, n.Name)) {
			kept++
		}
	}
	room := p.burstRoom(st, kept)
	if st.Burst > room {
		st.Burst = room
	}
	// Idle time, per node present and not retired.
	since := map[string]time.Time{}
	for _, in := range st.Idle {
		since[in.Name] = in.Since
	}
	st.Idle = st.Idle[:0:0]
	var seated, settling, idle int64
	for _, n := range nodes {
		if retired[n.Name] && p.Named {
			continue
		}
		seated++
		joining := !n.Usable && n.NotReady && now.Sub(n.Created) < JoinGrace
		if n.Busy || retired[n.Name] {
			continue
		}
		s, ok := since[n.Name]
		if !ok || s.After(now) {
			s = now
		}
		st.Idle = append(st.Idle, IdleNode{Name: n.Name, Since: s})
		if joining || n.Usable && now.Sub(s) < Settle && now.Sub(n.Created) < Settle+JoinGrace {
			settling++
		}
		if n.Usable || joining {
			idle++
		}
	}
	seats := max(0, min(p.Fixed+st.Replacements+st.Burst, p.Max-kept))
	unfilled := max(0, seats-seated)
	// Grow for the gangs that wait.
	var want int64
	teams := map[string]int64{}
	credit := idle + unfilled
	var skipped int
	var claimed int64
	for _, g := range gangs[:min(len(gangs), MaxGangs)] {
		if g.GPUs <= 0 || p.GPUsPerNode <= 0 {
			continue
		}
		need := g.nodes(p.GPUsPerNode)
		var c int64
		if g.DomainNodes > 0 {
			need = ceilDiv(need, g.DomainNodes) * g.DomainNodes
		} else {
			c = min(credit, need)
			need -= c
		}
		if need > 0 && st.Burst+want+need > room {
			// Beyond the room: it claims no idle node either.
			skipped++
			continue
		}
		credit, claimed = credit-c, claimed+c
		if need == 0 {
			continue
		}
		want += need
		teams[g.Team] += need
	}
	switch {
	case want > 0 && unfilled == 0 && settling == 0:
		st.Burst += want
		for _, t := range slices.Sorted(maps.Keys(teams)) {
			st.BurstTeams = addTeam(st.BurstTeams, t, teams[t])
		}
		acts = append(acts, Action{Kind: ActionBurstUp, Nodes: want,
			Reason: fmt.Sprintf("gangs wait for nodes (%s): %d burst node(s) added, %d of %d held", teamList(teams), want, st.Burst, room)})
	case want == 0 && st.Burst > 0 && unfilled == 0:
		// Give back idle nodes, the longest idle first.
		var cands []IdleNode
		busyOrGone := map[string]bool{}
		for _, n := range nodes {
			busyOrGone[n.Name] = n.Busy
		}
		for _, in := range st.Idle {
			if now.Sub(in.Since) >= p.Burst.IdleAfter && !busyOrGone[in.Name] {
				cands = append(cands, in)
			}
		}
		slices.SortFunc(cands, func(a, b IdleNode) int {
			return cmp.Or(a.Since.Compare(b.Since), strings.Compare(b.Name, a.Name))
		})
		// Idle nodes a waiting gang could use stay.
		back := min(st.Burst, int64(len(cands)), idle-claimed)
		if back == 0 {
			break
		}
		var names []string
		for _, in := range cands[:back] {
			names = append(names, in.Name)
			if p.Named {
				why := fmt.Sprintf("burst node idle since %s", in.Since.UTC().Format(time.RFC3339))
				if ns := find(st, in.Name); ns != nil {
					ns.Retired, ns.Burst, ns.Reason = true, true, why
				} else {
					st.Nodes = append(st.Nodes, NodeState{Name: in.Name, Retired: true, Burst: true, Reason: why})
				}
			}
		}
		st.Burst -= back
		st.BurstTeams = takeTeams(st.BurstTeams, back)
		st.Idle = slices.DeleteFunc(st.Idle, func(in IdleNode) bool { return slices.Contains(names, in.Name) })
		how := "the count shrinks"
		if p.Named {
			how = "retired and removed"
		}
		acts = append(acts, Action{Kind: ActionBurstDown, Nodes: back,
			Reason: fmt.Sprintf("%s idle for %s or more: %d burst node(s) given back (%s), %d held", names2(names), p.Burst.IdleAfter, back, how, st.Burst)})
	}
	if skipped > 0 && !st.BurstAtMax {
		acts = append(acts, Action{Kind: ActionBurstAtMax,
			Reason: fmt.Sprintf("%d pending gang(s) need more nodes than the burst room left (%d of %d held)", skipped, st.Burst, room)})
	}
	st.BurstAtMax = skipped > 0
	// Attribution follows the count (a clamp or a lost record).
	st.BurstTeams = fitTeams(st.BurstTeams, st.Burst)
	return st, acts
}

func burstRecord(st State, name string) bool {
	for _, ns := range st.Nodes {
		if ns.Name == name {
			return ns.Burst
		}
	}
	return false
}

func addTeam(ts []TeamNodes, team string, n int64) []TeamNodes {
	for i := range ts {
		if ts[i].Team == team {
			ts[i].Nodes += n
			return ts
		}
	}
	return append(ts, TeamNodes{Team: team, Nodes: n})
}

// takeTeams gives back n nodes, each from the team holding the most.
func takeTeams(ts []TeamNodes, n int64) []TeamNodes {
	ts = slices.Clone(ts)
	for ; n > 0 && len(ts) > 0; n-- {
		i := 0
		for j := range ts {
			if ts[j].Nodes > ts[i].Nodes || ts[j].Nodes == ts[i].Nodes && ts[j].Team < ts[i].Team {
				i = j
			}
		}
		if ts[i].Nodes--; ts[i].Nodes <= 0 {
			ts = slices.Delete(ts, i, i+1)
		}
	}
	return ts
}

// fitTeams makes the attribution add up to total: beyond it, taken back
// from the teams holding the most; short of it, the rest is nobody's ("").
func fitTeams(ts []TeamNodes, total int64) []TeamNodes {
	var sum int64
	ts = slices.DeleteFunc(slices.Clone(ts), func(t TeamNodes) bool { return t.Nodes <= 0 })
	for _, t := range ts {
		sum += t.Nodes
	}
	switch {
	case sum > total:
		ts = takeTeams(ts, sum-total)
	case sum < total:
		ts = addTeam(ts, "", total-sum)
	}
	slices.SortFunc(ts, func(a, b TeamNodes) int { return strings.Compare(a.Team, b.Team) })
	return ts
}

func teamList(teams map[string]int64) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(teams)) {
		parts = append(parts, fmt.Sprintf("%s %d", cmp.Or(t, "no team"), teams[t]))
	}
	return strings.Join(parts, ", ")
}

func names2(names []string) string {
	const most = 5
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	if len(names) == 0 {
		return "nodes"
	}
	return strings.Join(names, ", ")
}
