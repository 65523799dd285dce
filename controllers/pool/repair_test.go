package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/fleet/elastic"
)

// The status is trusted only as far as the Nodes' marks bear it out.
func TestTrustRecords(t *testing.T) {
	st := elastic.State{Burst: 1, Nodes: []elastic.NodeState{
		{Name: "given-back", Retired: true, Burst: true},         // status written, mark not
		{Name: "forged", Retired: true},                          // no mark: seated again
		{Name: "marked", Retired: true, Burst: true},             // marked remove: stands
		{Name: "repair", Retired: true, Burst: true, Kept: true}, // marked keep: stays kept
		{Name: "gone", Retired: true},                            // not there: stands
	}}
	marks := map[string]string{"given-back": "", "forged": "", "marked": "remove", "repair": "keep"}
	got, recorded := trustRecords(st, marks)
	want := elastic.State{Burst: 2, Nodes: []elastic.NodeState{
		{Name: "forged"},
		{Name: "marked", Retired: true, Burst: true},
		{Name: "repair", Retired: true, Kept: true},
		{Name: "gone", Retired: true},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trusted state (-want +got):\n%s", diff)
	}
	if recorded["given-back"] || !recorded["forged"] || len(recorded) != 4 {
		t.Errorf("recorded %v", recorded)
	}
}
