package elastic

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Metered is what a pool's burst nodes were held for, per team, since
// Since: node-seconds, counted up to At. The finance report bills them at
// the pool's on-demand price (allot report --observed).
type Metered struct {
	Since, At time.Time
	Teams     []TeamSeconds
}

// TeamSeconds is one team's burst node-seconds (team "": nobody's, and the
// teams beyond MaxMeteredTeams, "" among them).
type TeamSeconds struct {
	Team        string
	NodeSeconds int64
}

// MaxMeteredTeams bounds Metered.Teams (a Pool's status stays small).
const MaxMeteredTeams = 1000

// MeterEvery is how often the meter counts while what is held stays the
// same (a Pool is reconciled on every change of its nodes; its status is
// not rewritten for each). Nothing is lost: the time left is counted with
// the next count.
const MeterEvery = time.Minute

// Meter counts the burst nodes held, per team, from m.At to now: held is
// what the pool held over that time (the state before the decision now),
// next what it holds from now on. At moves only while nodes are held, and
// then at most every MeterEvery while the holdings stand, so that a Pool's
// status is not rewritten for nothing; a first count starts the meter; a
// clock that went back counts nothing. It is pure.
func Meter(m Metered, held, next []TeamNodes, now time.Time) Metered {
	out := Metered{Since: m.Since, At: m.At, Teams: fold(m.Teams)}
	switch {
	case m.At.IsZero() || m.Since.IsZero():
		out.Since, out.At = now, now
		return out
	case heldNodes(held) == 0:
		if heldNodes(next) > 0 {
			out.At = now // counting starts now
		}
		return out
	case now.Before(m.At):
		out.At = now // the clock went back: count from now
		return out
	case now.Sub(m.At) < MeterEvery && slices.Equal(held, next):
		return out
	}
	// Whole seconds; the rest is counted with the next.
	secs := int64(now.Sub(m.At) / time.Second)
	out.At = m.At.Add(time.Duration(secs) * time.Second)
	for _, h := range held {
		if h.Nodes <= 0 || secs == 0 {
			continue
		}
		team := h.Team
		i := slices.IndexFunc(out.Teams, func(t TeamSeconds) bool { return t.Team == team })
		if i < 0 && team != "" && len(out.Teams) >= MaxMeteredTeams-1 {
			team = ""
			i = slices.IndexFunc(out.Teams, func(t TeamSeconds) bool { return t.Team == "" })
		}
		if i < 0 {
			out.Teams = append(out.Teams, TeamSeconds{Team: team})
			i = len(out.Teams) - 1
		}
		out.Teams[i].NodeSeconds = addSat(out.Teams[i].NodeSeconds, mulSat(h.Nodes, secs))
	}
	slices.SortFunc(out.Teams, func(a, b TeamSeconds) int { return cmp.Compare(a.Team, b.Team) })
	return out
}

func mulSat(a, b int64) int64 {
	if a > 0 && b > 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// heldNodes sums the nodes held.
func heldNodes(held []TeamNodes) int64 {
	var n int64
	for _, h := range held {
		n = addSat(n, max(0, h.Nodes))
	}
	return n
}

// fold bounds teams read back (a status anyone with access may edit): at
// most MaxMeteredTeams-1 named teams, the rest added to team "".
func fold(teams []TeamSeconds) []TeamSeconds {
	out := slices.Clone(teams)
	if len(out) <= MaxMeteredTeams-1 {
		return out
	}
	slices.SortFunc(out, func(a, b TeamSeconds) int { return cmp.Compare(a.Team, b.Team) })
	var rest int64
	named := out[:0]
	for _, t := range out {
		switch {
		case t.Team == "" || len(named) >= MaxMeteredTeams-1:
			rest = addSat(rest, max(0, t.NodeSeconds))
		default:
			named = append(named, t)
		}
	}
	return append(named, TeamSeconds{Team: "", NodeSeconds: rest})
}
