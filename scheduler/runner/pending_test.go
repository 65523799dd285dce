package runner

import (
	"fmt"
	"testing"

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
