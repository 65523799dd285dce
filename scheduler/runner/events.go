package runner

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// The runner's events of pods are bounded across all workloads, as a
// workload's own are (eventsPerWorkload): thousands of single-pod workloads
// pending, bound or preempted at once sent an event each in one burst, and
// the event broadcaster drops what comes while its queue (1,000) is full,
// whoever's it is, then sends the rest at its client's pace: one team's burst
// held back or lost every other team's events. The events go through two
// token buckets, as the API server's EventRateLimit admission does (a server
// bucket and one per namespace): the runner's, eventBudget an eventWindow,
// and each team's (its namespace's team), eventsPerTeam an eventWindow, so
// that a team's flood spends its own share; what one emit holds is dealt a
// team at a time in turn, a namespace of it at a time in turn, as reasons
// are written. An event held back is counted (metricEventsSuppressed, by
// team and reason) and told in one summary event a team an eventWindow, on
// the Team. No status write waits on it: a pod's PodScheduled condition is
// written whatever becomes of its event.
const (
	eventBudget   = 128
	eventsPerTeam = 32
	eventWindow   = 10 * time.Second
)

// bucket holds the events that may be sent now; it fills up to its size
// an eventWindow.
type bucket struct {
	tokens float64
	at     time.Time
}

// fill adds what came in since it was last filled (a new bucket is full);
// a clock that went back adds nothing.
func (b *bucket) fill(now time.Time, size float64) {
	switch {
	case b.at.IsZero():
		b.tokens = size
	case now.After(b.at):
		b.tokens = min(size, b.tokens+size*float64(now.Sub(b.at))/float64(eventWindow))
	default:
		return
	}
	b.at = now
}

// eventGate decides which of the runner's events of pods are sent.
type eventGate struct {
	mu    sync.Mutex
	all   bucket
	teams map[string]*bucket
	// held counts, per team, the events of each reason held back since its
	// last summary; told is when that was.
	held map[string]map[string]int64
	told map[string]time.Time
}

// admit returns the events of evs that may be sent now, in their order, and
// counts the others as held back. It deals the runner's budget a team at a
// time in turn (team as podEvent.team), a namespace of it at a time in
// turn, each namespace's in order, while the team's own budget lasts.
func (g *eventGate) admit(now time.Time, evs []podEvent) []podEvent {
	if len(evs) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.teams == nil {
		g.teams, g.held, g.told = map[string]*bucket{}, map[string]map[string]int64{}, map[string]time.Time{}
	}
	g.all.fill(now, eventBudget)
	var line []string
	queued := map[string]*rota[string, int]{}
	for i, e := range evs {
		namespaces := queued[e.team]
		if namespaces == nil {
			namespaces = &rota[string, int]{}
			queued[e.team] = namespaces
			line = append(line, e.team)
			b := g.teams[e.team]
			if b == nil {
				b = &bucket{}
				g.teams[e.team] = b
			}
			b.fill(now, eventsPerTeam)
		}
		namespaces.push(e.pod.ns, i)
	}
	send := make([]bool, len(evs))
	n := 0
	for len(line) > 0 && g.all.tokens >= 1 {
		team := line[0]
		line = line[1:]
		b := g.teams[team]
		if b.tokens < 1 {
			continue // its share is spent: the rest of its events are held
		}
		send[queued[team].next()] = true
		b.tokens--
		g.all.tokens--
		n++
		if !queued[team].empty() {
			line = append(line, team)
		}
	}
	out := make([]podEvent, 0, n)
	for i, e := range evs {
		if send[i] {
			out = append(out, e)
			continue
		}
		metricEventsSuppressed.WithLabelValues(e.team, e.reason).Inc()
		if g.held[e.team] == nil {
			g.held[e.team] = map[string]int64{}
		}
		g.held[e.team][e.reason]++
	}
	return out
}

// heldEvents is what a summary tells of a team's events held back.
type heldEvents struct {
	team     string
	byReason map[string]int64
}

func (h heldEvents) total() int64 {
	var n int64
	for _, k := range h.byReason {
		n += k
	}
	return n
}

// note says how many events were held back, of which reasons.
func (h heldEvents) note() string {
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(h.byReason)) {
		parts = append(parts, fmt.Sprintf("%s %d", reason, h.byReason[reason]))
	}
	return fmt.Sprintf("%d events of the team's pods held back (%s): the scheduler sends %d events of a team's pods and %d of all teams' at once, %d and %d more every %s; each pod's PodScheduled condition still says why it waits or where it runs",
		h.total(), strings.Join(parts, ", "), eventsPerTeam, eventBudget, eventsPerTeam, eventBudget, eventWindow)
}

// summaries returns, for each team whose events were held back and whose
// last summary is an eventWindow old, what was held back since, and starts
// counting again. It forgets the buckets that filled up again.
func (g *eventGate) summaries(now time.Time) []heldEvents {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []heldEvents
	for _, team := range slices.Sorted(maps.Keys(g.held)) {
		if at, ok := g.told[team]; ok && now.Sub(at) < eventWindow {
			continue
		}
		out = append(out, heldEvents{team: team, byReason: g.held[team]})
		delete(g.held, team)
		g.told[team] = now
	}
	for team, b := range g.teams {
		if b.fill(now, eventsPerTeam); b.tokens >= eventsPerTeam && g.held[team] == nil {
			delete(g.teams, team)
		}
	}
	for team, at := range g.told {
		if now.Sub(at) >= eventWindow && g.held[team] == nil {
			delete(g.told, team)
		}
	}
	return out
}
