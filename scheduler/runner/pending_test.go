package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons are written a namespace at a time in turn, each namespace's in the
// order they came, a pod's latest only, in its first place.
func TestPendingQueueTakesNamespacesInTurn(t *testing.T) {
	w := func(ns, name, msg string) pendingWrite {
		return pendingWrite{pod: podRef{ns: ns, name: name, uid: types.UID(ns + "/" + name)}, msg: msg}
	}
	q := pendingQueue{kick: make(chan struct{}, 1)}
	q.add([]pendingWrite{w("flood", "a", "1"), w("flood", "b", "1"), w("flood", "c", "1")}, nil)
	q.add([]pendingWrite{w("other", "x", "1"), w("flood", "a", "2")}, []podEvent{{reason: "Scheduled"}})
	got := func(n int) (names []string, events int, more bool) {
		writes, evs, more := q.take(n)
		for _, w := range writes {
			names = append(names, w.pod.name+"="+w.msg)
		}
		return names, len(evs), more
	}
	for i, want := range []struct {
		n      int
		names  []string
		events int
		more   bool
	}{
		{2, []string{"a=2", "x=1"}, 1, true},
		{1, []string{"b=1"}, 0, true},
		{5, []string{"c=1"}, 0, false},
		{5, nil, 0, false},
	} {
		names, events, more := got(want.n)
		if diff := cmp.Diff(want.names, names); diff != "" || events != want.events || more != want.more {
			t.Errorf("take %d: names (-want +got) %s, %d events (want %d), more %v (want %v)", i, diff, events, want.events, more, want.more)
		}
	}
}

// A team takes its turn whatever its number of namespaces: team alpha's
// thousand namespaces of one pod each (a namespace per experiment) and a
// namespace of a thousand hold up team beta's reason, queued after them all,
// for one of theirs; it waited behind 1,001 when each namespace took a turn. Within alpha, its namespaces take turns. Once all is taken, nothing
// of the namespaces and pods it held is kept.
func TestPendingQueueTakesTeamsInTurn(t *testing.T) {
	w := func(team, ns, name string) pendingWrite {
		return pendingWrite{pod: podRef{ns: ns, name: name, uid: types.UID(ns + "/" + name)}, team: team, msg: "m"}
	}
	q := pendingQueue{kick: make(chan struct{}, 1)}
	var flood []pendingWrite
	for i := range 1000 {
		flood = append(flood, w("alpha", "big", fmt.Sprintf("p%d", i)), w("alpha", fmt.Sprintf("exp-%d", i), "p"))
	}
	q.add(flood, nil)
	q.add([]pendingWrite{w("beta", "beta", "x"), w("", "teamless", "y")}, nil)
	writes, _, more := q.take(4)
	var got []string
	for _, w := range writes {
		got = append(got, w.pod.ns+"/"+w.pod.name)
	}
	if diff := cmp.Diff([]string{"big/p0", "beta/x", "teamless/y", "exp-0/p"}, got); diff != "" || !more {
		t.Errorf("first 4 taken (-want +got):\n%s, more %v", diff, more)
	}
	n := len(writes)
	for more {
		writes, _, more = q.take(pendingBatch)
		n += len(writes)
	}
	if n != 2002 || len(q.writes) != 0 || len(q.queued) != 0 || len(q.teams) != 0 {
		t.Errorf("%d of 2002 taken; left: %d reasons, %d teams queued, %d in turn", n, len(q.writes), len(q.queued), len(q.teams))
	}
}

// A gang of 2,000 pods bound at once emits 17 events, not 2,000 (the event
// broadcaster drops what comes while its queue of 1,000 is full, another
// team's events among them): one a pod for its first 16, then one for the
// other 1,984 that says so. Another gang's few events of the same step are
// all kept, a pod's own each.
func TestEventsBoundedPerWorkload(t *testing.T) {
	ev := func(gang, name, reason string) podEvent {
		return podEvent{pod: podRef{ns: "jobs", name: name, uid: types.UID(name)}, gang: gang, reason: reason, note: "bound to n with gang " + gang}
	}
	var evs []podEvent
	for i := range 2000 {
		evs = append(evs, ev("jobs/big", fmt.Sprintf("big-%d", i), "Scheduled"))
		if i%500 == 0 {
			evs = append(evs, ev("beta/small", fmt.Sprintf("small-%d", i/500), "Scheduled"))
		}
	}
	evs = append(evs, ev("jobs/big", "big-0", "BindFailed"), ev("jobs/big", "big-1", "BindFailed"))
	var big, small []string
	for _, e := range boundEvents(evs) {
		if e.gang == "beta/small" {
			small = append(small, e.pod.name)
			continue
		}
		big = append(big, e.pod.name+" "+e.reason)
		if e.pod.name == "big-16" && e.note != "this pod and 1983 more of gang jobs/big, told in this event only: bound to n with gang jobs/big" {
			t.Errorf("the event for the rest of gang big: %q", e.note)
		}
	}
	var want []string
	for i := range 17 {
		want = append(want, fmt.Sprintf("big-%d Scheduled", i))
	}
	want = append(want, "big-0 BindFailed")
	if diff := cmp.Diff(want, big); diff != "" {
		t.Errorf("gang big's events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"small-0", "small-1", "small-2", "small-3"}, small); diff != "" {
		t.Errorf("gang small's events (-want +got):\n%s", diff)
	}
}

// The runner's events of pods are bounded across workloads: a step's events
// are dealt a team at a time in turn (a namespace of it at a time in turn),
// at most eventsPerTeam of a team's and eventBudget of all an eventWindow;
// the rest are counted as held back, by team and reason.
func TestEventGateDealsTeamsInTurn(t *testing.T) {
	evs := func(team, ns string, n int) []podEvent {
		var out []podEvent
		for i := range n {
			out = append(out, podEvent{pod: podRef{ns: ns, name: fmt.Sprintf("%s-%d", ns, i)}, team: team, reason: "Unschedulable"})
		}
		return out
	}
	var teams5 []podEvent
	for i := range 5 {
		teams5 = append(teams5, evs(fmt.Sprintf("t%d", i), fmt.Sprintf("t%d", i), 100)...)
	}
	for name, tc := range map[string]struct {
		evs      []podEvent
		wantSent map[string]int // by namespace
		wantHeld map[string]int64
	}{
		"one team's flood": {
			evs:      evs("alpha", "alpha", 1000),
			wantSent: map[string]int{"alpha": eventsPerTeam},
			wantHeld: map[string]int64{"alpha": 1000 - eventsPerTeam},
		},
		"a flood and a few of another team, after it": {
			evs:      append(evs("alpha", "alpha", 1000), evs("beta", "shared", 3)...),
			wantSent: map[string]int{"alpha": eventsPerTeam, "shared": 3},
			wantHeld: map[string]int64{"alpha": 1000 - eventsPerTeam},
		},
		"five teams' floods share the runner's budget": {
			evs:      teams5,
			wantSent: map[string]int{"t0": 26, "t1": 26, "t2": 26, "t3": 25, "t4": 25},
			wantHeld: map[string]int64{"t0": 74, "t1": 74, "t2": 74, "t3": 75, "t4": 75},
		},
		"a team's namespaces in turn": {
			evs:      append(evs("alpha", "big", 1000), append(evs("alpha", "exp-1", 1), evs("alpha", "exp-2", 1)...)...),
			wantSent: map[string]int{"big": eventsPerTeam - 2, "exp-1": 1, "exp-2": 1},
			wantHeld: map[string]int64{"alpha": 1000 - eventsPerTeam + 2},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var g eventGate
			now := time.Unix(1e9, 0)
			sent := map[string]int{}
			for _, e := range g.admit(now, tc.evs) {
				sent[e.pod.ns]++
			}
			if diff := cmp.Diff(tc.wantSent, sent); diff != "" {
				t.Errorf("sent by namespace (-want +got):\n%s", diff)
			}
			held := map[string]int64{}
			for _, h := range g.summaries(now) {
				held[h.team] = h.byReason["Unschedulable"]
			}
			if diff := cmp.Diff(tc.wantHeld, held); diff != "" {
				t.Errorf("held back by team (-want +got):\n%s", diff)
			}
		})
	}
}

// A team's share comes back with time, an eventWindow for the whole of it (a
// clock that goes back gives none); its summary is told at most once an
// eventWindow, and counts what was held back since the last one.
func TestEventGateRefillsAndSummarizes(t *testing.T) {
	var g eventGate
	now := time.Unix(1e9, 0)
	flood := func(at time.Time, n int) int {
		var evs []podEvent
		for i := range n {
			evs = append(evs, podEvent{pod: podRef{ns: "alpha", name: fmt.Sprint(i)}, team: "alpha", reason: "Scheduled"})
		}
		return len(g.admit(at, evs))
	}
	held := func(at time.Time) []int64 {
		var out []int64
		for _, h := range g.summaries(at) {
			out = append(out, h.total())
		}
		return out
	}
	steps := []struct {
		at         time.Duration
		events     int
		wantSent   int
		wantTotals []int64
	}{
		{0, 100, eventsPerTeam, []int64{100 - eventsPerTeam}},
		{eventWindow / 4, 100, eventsPerTeam / 4, nil}, // told a quarter window ago
		{eventWindow / 8, 100, 0, nil},                 // the clock went back
		{eventWindow, 10, 10, []int64{100 - eventsPerTeam/4 + 100}},
		{2 * eventWindow, 10, 10, nil},
	}
	for i, s := range steps {
		if got := flood(now.Add(s.at), s.events); got != s.wantSent {
			t.Errorf("step %d: %d sent, want %d", i, got, s.wantSent)
		}
		if diff := cmp.Diff(s.wantTotals, held(now.Add(s.at))); diff != "" {
			t.Errorf("step %d: summaries (-want +got):\n%s", i, diff)
		}
	}
	if held(now.Add(3 * eventWindow)); len(g.teams) != 0 || len(g.held) != 0 || len(g.told) != 0 {
		t.Errorf("kept a window after the flood: %d buckets, %d counts, %d summaries", len(g.teams), len(g.held), len(g.told))
	}
}
