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
	gpus := min(g.GPUs, 1<<40) // beyond any pool: no overflow below
	if g.PodGPUs > 0 && g.PodGPUs <= gpn {
		return ceilDiv(ceilDiv(gpus, g.PodGPUs), gpn/g.PodGPUs)
	}
	return ceilDiv(gpus, gpn)
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
// allows (schema.ElasticRoom, as the plan prices it) and, now, what
// replacements and kept nodes leave of it.
func (p Pool) burstRoom(st State, kept int64) int64 {
	_, room := schema.ElasticRoom(p.Max, p.Fixed, p.Repair, p.Burst)
	return max(0, min(room, p.most()-p.Fixed-st.Replacements-kept))
}

// most is the most nodes the pool may hold, its seats and the retired nodes
// kept beside them together: nodes.max, and the envelope its cost ceiling
// is priced at (the planned size and the replacement and burst rooms,
// planner.EnvelopeOf). Kept nodes are billed too: the seats give way to them.
func (p Pool) most() int64 {
	r, b := schema.ElasticRoom(p.Max, p.Fixed, p.Repair, p.Burst)
	return min(p.Max, p.Fixed+r+b)
}

// records indexes the node records of st by name.
func records(st State) map[string]*NodeState {
	rec := make(map[string]*NodeState, len(st.Nodes))
	for i := range st.Nodes {
		rec[st.Nodes[i].Name] = &st.Nodes[i]
	}
	return rec
}

// keptCount counts the retired nodes of a Named pool kept beside its seats
// (their records by name: records).
func keptCount(p Pool, rec map[string]*NodeState, nodes []Node) int64 {
	var kept int64
	for _, n := range nodes {
		if keptBeside(p, rec[n.Name], n) {
			kept++
		}
	}
	return kept
}

// keptBeside says whether a retired node (record ns) of a Named pool stays
// beside its seats: a gang runs on it, or it is kept for repair
// (Repair.Broken is keep; kept before repair was taken out of the pool).
func keptBeside(p Pool, ns *NodeState, n Node) bool {
	if !p.Named || ns == nil || !ns.Retired {
		return false
	}
	return n.Busy || !ns.Burst && (p.Repair != nil && p.Repair.Broken == schema.BrokenKeep || p.Repair == nil && ns.Kept)
}

// Decide runs one step of a pool's burst and then of its repair (Repair):
// the decision the Pool reconciler makes and the simulator replays. gangs
// are the pending gangs waiting for the pool's nodes, in the scheduler's
// order.
//
// Burst, then repair, again while a round acts or changes the counts or the
// retired nodes (at most four rounds): a node repair retires changes what
// burst sees, and the decision is the one that deciding again on the same
// view leaves as it is.
func Decide(p Pool, st State, gangs []Gang, nodes []Node, now time.Time) (State, Decision) {
	st = clone(st)
	var all []Action
	var d Decision
	// Repair's shortfall is said once, after the last round, if it stands.
	wasAtMax := st.AtMax
	var atMax *Action
	for range 4 {
		before := summary(st)
		var acts []Action
		st, acts = burst(p, st, gangs, nodes, now)
		st, d = Repair(p, st, nodes, now)
		acts = append(acts, d.Actions...)
		acts = slices.DeleteFunc(acts, func(a Action) bool {
			if a.Kind == ActionAtMax {
				atMax = &a
				return true
			}
			return false
		})
		all = append(all, acts...)
		if len(acts) == 0 && summary(st) == before {
			break
		}
	}
	if st.AtMax && !wasAtMax && atMax != nil {
		all = append(all, *atMax)
	}
	d.Actions = all
	if p.Burst != nil {
		// Repair may have kept a node beside the seats (a busy one retired
		// as flapping, or one kept for repair): burst gives way, so that
		// the seats and the kept nodes stay within the envelope and
		// nodes.max whatever reads the count.
		kept := keptCount(p, records(st), nodes)
		if b := max(0, min(st.Burst, p.most()-kept-p.Fixed-st.Replacements)); b < st.Burst {
			st.Burst = b
			st.BurstTeams = fitTeams(st.BurstTeams, b)
			d.Target = max(0, min(p.Fixed+st.Replacements+st.Burst, p.most()-kept))
		}
	}
	return st, d
}

// burst decides the pool's burst nodes (docs/elastic.md#burst):
//   - the pool grows, within its burst room, by the nodes the pending gangs
//     need (less idle usable nodes they can use), in the scheduler's order,
//     skipping a gang larger than the room left; a gang that needs a
//     topology domain gets nodes that make one: in a Named pool, the new
//     seats (the lowest free indices) and idle nodes of one domain, else a
//     whole domain of new nodes;
//   - nothing changes while the last change is under way (a seat waits for
//     its node, or a node leaves), a new node is joining, or a node that
//     joined is still settling: nodes under way are never asked for twice;
//   - a burst node is given back once a node has run no gang for
//     Burst.IdleAfter and no waiting gang could use it, the longest idle
//     first (an idle node has no gang: the emptiest there is): in a Named
//     pool that node is retired (it leaves its seat and is removed), else
//     the count shrinks (the shrink guard holds one that would remove
//     work); in a Named pool a gang the held burst nodes leave no room for
//     may take their room in the same decision (seats asked for are made,
//     and given back once idle, like any other);
//   - the burst nodes are attributed to the teams whose gangs caused them,
//     and given back from the team that holds the most.
func burst(p Pool, st State, gangs []Gang, nodes []Node, now time.Time) (State, []Action) {
	if p.Burst == nil {
		st.Burst, st.BurstTeams, st.Idle, st.BurstAtMax = 0, nil, nil, false
		return st, nil
	}
	var acts []Action
	rec := records(st)
	retired := func(name string) bool { return rec[name] != nil && rec[name].Retired }
	kept := keptCount(p, rec, nodes)
	room := p.burstRoom(st, kept)
	st.Burst = max(0, min(st.Burst, room))
	// Idle time, per node present and not retired.
	since := map[string]time.Time{}
	for _, in := range st.Idle {
		since[in.Name] = in.Since
	}
	st.Idle = st.Idle[:0:0]
	var seated, settling int64
	var free []Node // usable and whole, idle, not retired: what waiting gangs may use
	for _, n := range nodes {
		if retired(n.Name) && p.Named {
			continue
		}
		seated++
		joining := !n.Usable && n.NotReady && now.Sub(n.Created) < JoinGrace
		if n.Busy || retired(n.Name) {
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
		if n.Usable && n.HealthyGPUs >= p.GPUsPerNode {
			free = append(free, n)
		}
	}
	seats := max(0, min(p.Fixed+st.Replacements+st.Burst, p.most()-kept))
	lay := newLayout(p, nodes, free, seats-seated)
	sz := lay.sizeAll(gangs, room, room-st.Burst)
	grow := func(n int64, teams map[string]int64, why string) {
		st.Burst += n
		for _, t := range slices.Sorted(maps.Keys(teams)) {
			st.BurstTeams = addTeam(st.BurstTeams, t, teams[t])
		}
		acts = append(acts, Action{Kind: ActionBurstUp, Nodes: n,
			Reason: fmt.Sprintf("gangs wait for nodes (%s)%s: %d burst node(s) added, %d of %d held", teamList(teams), why, n, st.Burst, room)})
	}
	settled := seated == seats && settling == 0
	switch {
	case !settled:
		// A seat waits for its node, or a node leaves, joins or settles:
		// decide once it has.
	case sz.want > 0:
		grow(sz.want, sz.teams, "")
	case st.Burst > 0:
		// Give back idle nodes no waiting gang could use, the longest idle
		// first (the highest seat of those idle as long).
		var cands []IdleNode
		for _, in := range st.Idle {
			if now.Sub(in.Since) >= p.Burst.IdleAfter && lay.isFree(in.Name) && !lay.claimed[in.Name] {
				cands = append(cands, in)
			}
		}
		slices.SortFunc(cands, func(a, b IdleNode) int {
			return cmp.Or(a.Since.Compare(b.Since), strings.Compare(b.Name, a.Name))
		})
		back := min(st.Burst, int64(len(cands)))
		if back == 0 {
			break
		}
		var names []string
		for _, in := range cands[:back] {
			names = append(names, in.Name)
			if p.Named {
				why := fmt.Sprintf("burst node idle since %s", in.Since.UTC().Format(time.RFC3339))
				if ns := rec[in.Name]; ns != nil {
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
			Reason: fmt.Sprintf("%s idle for %s or more: %d burst node(s) given back (%s), %d held", nameList(names), p.Burst.IdleAfter, back, how, st.Burst)})
		// The room they held may serve a gang that waited for it: in a
		// Named pool, where the node that goes is the one chosen (in a pool
		// of a count, a shrink and a growth would only cancel out). The
		// gangs are sized again as the next decision will: without them.
		if !p.Named || sz.blocked == 0 {
			break
		}
		rest := slices.DeleteFunc(slices.Clone(free), func(n Node) bool { return slices.Contains(names, n.Name) })
		sz = newLayout(p, nodes, rest, 0).sizeAll(gangs, room, room-st.Burst)
		if sz.want > 0 {
			grow(sz.want, sz.teams, " in the room the idle nodes held")
		}
	}
	// Said once it starts, and judged only when nothing is under way.
	if settled {
		atMax := sz.never+sz.blocked > 0
		if atMax && !st.BurstAtMax {
			acts = append(acts, Action{Kind: ActionBurstAtMax,
				Reason: fmt.Sprintf("%d pending gang(s) need more nodes than the burst room allows (%d of %d held), or pods larger than a node", sz.never+sz.blocked, st.Burst, room)})
		}
		st.BurstAtMax = atMax
	}
	// Attribution follows the count (a clamp or a lost record).
	st.BurstTeams = fitTeams(st.BurstTeams, st.Burst)
	return st, acts
}

// layout sizes waiting gangs on a pool: the idle nodes they may use and the
// seats new nodes take. In a Named pool with an index (Pool.IndexOf) it
// knows where new seats go (the lowest free indices, as fleet.LayoutHeld
// lays them) and so which topology domain they join.
type layout struct {
	gpn int64
	// claimed are the free nodes given to a gang; added the new seats so far.
	claimed map[string]bool
	added   int64
	// taken are the indices of the nodes present; index their free nodes'
	// (and the seats under way's, and new seats a gang left unused).
	taken map[int64]bool
	index map[string]int64
	// the trial of the last size, until commit or undo: the free nodes it
	// takes, its new seats, and those of them it leaves unused.
	trial      []string
	trialAdded int64
	trialLeft  []int64
	// The unclaimed free nodes, kept as they are claimed, so that sizing
	// many gangs is not gangs x nodes: all of them, the seats under way,
	// and, per domain size asked, per domain.
	all, under freeSet
	byDomain   map[int64]map[int64]*freeSet
	isfree     map[string]bool
}

// freeSet holds free nodes in order and how many are unclaimed; those
// before cursor are all claimed.
type freeSet struct {
	names  []string
	cursor int
	n      int64
}

func (f *freeSet) add(name string) { f.names = append(f.names, name); f.n++ }

// take puts up to n unclaimed nodes of the set in the trial.
func (l *layout) take(f *freeSet, n int64) {
	for f.cursor < len(f.names) && l.claimed[f.names[f.cursor]] {
		f.cursor++
	}
	for _, name := range f.names[f.cursor:] {
		if n == 0 {
			return
		}
		if !l.claimed[name] {
			l.trial = append(l.trial, name)
			n--
		}
	}
}

// domains returns the unclaimed free nodes per domain of d nodes.
func (l *layout) domains(d int64) map[int64]*freeSet {
	if m, ok := l.byDomain[d]; ok {
		return m
	}
	m := map[int64]*freeSet{}
	for _, name := range l.all.names {
		if i, ok := l.index[name]; ok && !l.claimed[name] {
			if m[i/d] == nil {
				m[i/d] = &freeSet{}
			}
			m[i/d].add(name)
		}
	}
	if l.byDomain == nil {
		l.byDomain = map[int64]map[int64]*freeSet{}
	}
	l.byDomain[d] = m
	return m
}

// addFree adds a free node (or seat) to the sets.
func (l *layout) addFree(name string) {
	l.isfree[name] = true
	l.all.add(name)
	if strings.HasPrefix(name, seatPrefix) {
		l.under.add(name)
	}
	if i, ok := l.index[name]; ok {
		for d, m := range l.byDomain {
			if m[i/d] == nil {
				m[i/d] = &freeSet{}
			}
			m[i/d].add(name)
		}
	}
}

// claim claims a free node for good.
func (l *layout) claim(name string) {
	if l.claimed[name] {
		return
	}
	l.claimed[name] = true
	l.all.n--
	if strings.HasPrefix(name, seatPrefix) {
		l.under.n--
	}
	if i, ok := l.index[name]; ok {
		for d, m := range l.byDomain {
			if f := m[i/d]; f != nil {
				f.n--
			}
		}
	}
}

// seatPrefix names the free nodes that are seats under way, not nodes
// ("\x00left-" those new seats a gang leaves unused).
const seatPrefix = "\x00seat-"

// newLayout lays out the pool's nodes, its free ones, and the seats under
// way (asked for, no node yet): those count as free for waiting gangs, at
// the indices they will take.
func newLayout(p Pool, nodes []Node, free []Node, pending int64) *layout {
	l := &layout{gpn: p.GPUsPerNode, claimed: map[string]bool{}, isfree: map[string]bool{}}
	if p.Named && p.IndexOf != nil {
		l.taken, l.index = map[int64]bool{}, map[string]int64{}
		for _, n := range nodes {
			if i, ok := p.IndexOf(n.Name); ok {
				l.taken[i] = true
				l.index[n.Name] = i
			}
		}
	}
	for _, n := range free {
		l.addFree(n.Name)
	}
	next := l.seats()
	var under []int64
	for k := range max(0, pending) {
		name := fmt.Sprintf("%s%d", seatPrefix, k)
		if l.index != nil {
			i, ok := next()
			if !ok {
				break
			}
			l.index[name] = i
			under = append(under, i)
		}
		l.addFree(name)
	}
	for _, i := range under {
		l.taken[i] = true
	}
	return l
}

func (l *layout) isFree(name string) bool { return l.isfree[name] }

// sizing is what the waiting gangs need: the new nodes of those that fit
// the room left (by team), and how many wait for room the held burst nodes
// take (blocked) or never fit.
type sizing struct {
	want           int64
	teams          map[string]int64
	blocked, never int64
}

// sizeAll sizes gangs in order within avail new nodes, of a burst room of
// room. A gang that does not fit still claims the idle nodes it would use
// (they stay for it), not new seats.
func (l *layout) sizeAll(gangs []Gang, room, avail int64) sizing {
	sz := sizing{teams: map[string]int64{}}
	for _, g := range gangs[:min(len(gangs), MaxGangs)] {
		switch need, fits := l.size(g, avail-sz.want); {
		case fits:
			l.commit()
			sz.want += need
			if need > 0 {
				sz.teams[g.Team] += need
			}
		case l.feasible(g, room):
			l.commitClaims()
			sz.blocked++
		default:
			l.undo()
			sz.never++
		}
	}
	return sz
}

// feasible says whether the gang could ever run on the pool's nodes: its
// pods fit a node, it fits its domain, and its nodes the room.
func (l *layout) feasible(g Gang, room int64) bool {
	if g.GPUs <= 0 || l.gpn <= 0 || g.PodGPUs > l.gpn {
		return false
	}
	k := g.nodes(l.gpn)
	return (g.DomainNodes <= 0 || k <= g.DomainNodes) && k <= room+int64(len(l.all.names))
}

// size returns the new nodes gang g needs, within most, and holds what it
// would take as a trial (commit or undo); fits is false when it needs more
// than most, or never fits.
func (l *layout) size(g Gang, most int64) (need int64, fits bool) {
	l.trial, l.trialAdded, l.trialLeft = l.trial[:0], 0, l.trialLeft[:0]
	if g.GPUs <= 0 || l.gpn <= 0 || g.PodGPUs > l.gpn || most < 0 {
		return 0, false
	}
	k := g.nodes(l.gpn)
	switch {
	case g.DomainNodes <= 0:
		c := min(l.all.n, k)
		l.take(&l.all, c)
		need = k - c
	case k > g.DomainNodes:
		return 0, false
	case l.index == nil:
		// A whole domain of new nodes; the seats under way, asked for
		// together, count as one.
		c := min(l.under.n, g.DomainNodes)
		l.take(&l.under, c)
		need = g.DomainNodes - c
	default:
		// The fewest new seats after which one domain holds k nodes the
		// gang may use: free ones and new ones.
		d := g.DomainNodes
		doms := l.domains(d)
		count := func(dom int64) int64 {
			if f := doms[dom]; f != nil {
				return f.n
			}
			return 0
		}
		best := int64(-1)
		for dom, f := range doms {
			if f.n >= k && (best < 0 || dom < best) {
				best = dom
			}
		}
		seats := l.seats()
		var added []int64
		extra := map[int64]int64{}
		for best < 0 && int64(len(added)) < most {
			i, ok := seats()
			if !ok {
				break
			}
			added = append(added, i)
			if extra[i/d]++; count(i/d)+extra[i/d] >= k {
				best = i / d
			}
		}
		if best < 0 {
			return 0, false
		}
		// The free nodes of that domain first, then its new seats; the
		// new seats elsewhere (holes filled on the way) are left free.
		if f := doms[best]; f != nil {
			l.take(f, k)
		}
		inDomain := int64(len(l.trial))
		for _, i := range added {
			if i/d == best && inDomain < k {
				inDomain++
				continue
			}
			l.trialLeft = append(l.trialLeft, i)
		}
		need = int64(len(added))
	}
	if need > most {
		return 0, false
	}
	l.trialAdded = need
	return need, true
}

// seats returns the indices new seats take from now on, in order: the
// lowest no node takes, after those the committed gangs' new seats took.
func (l *layout) seats() func() (int64, bool) {
	i, skip := int64(-1), l.added
	return func() (int64, bool) {
		for i++; i < 1<<22; i++ {
			if l.taken[i] {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			return i, true
		}
		return 0, false
	}
}

func (l *layout) commit() {
	l.commitClaims()
	l.added += l.trialAdded
	for _, i := range l.trialLeft {
		name := fmt.Sprintf("\x00left-%d", i)
		l.index[name] = i
		l.addFree(name)
	}
	l.trialAdded, l.trialLeft = 0, l.trialLeft[:0]
}

// commitClaims keeps the free nodes of the trial for its gang.
func (l *layout) commitClaims() {
	for _, name := range l.trial {
		l.claim(name)
	}
	l.trial = l.trial[:0]
}

func (l *layout) undo() { l.trial, l.trialAdded, l.trialLeft = l.trial[:0], 0, l.trialLeft[:0] }

// summary is what of a state one rule reads of the other's decision.
func summary(st State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d", st.Replacements, st.Burst)
	for _, ns := range st.Nodes {
		if ns.Retired {
			fmt.Fprintf(&b, " %s", ns.Name)
		}
	}
	return b.String()
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
