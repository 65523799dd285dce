package runner

import (
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
