package hub

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/allot-dev/allot/scheduler"
)

// TestFailedOverJobKeepsItsPlace: a job the hub takes from a lost worker
// waits ahead of its team's jobs of its tier, however much earlier they
// were submitted, in the pass that fails it over and in the passes after
// (the router's count of its failovers); a job the router never failed over
// waits in submission order. One node of 8 GPUs in c0, t0's quota 8: one
// 8-GPU job of t0 is routed.
func TestFailedOverJobKeepsItsPlace(t *testing.T) {
	pools, n := oneNodePool()
	workers := []snapshot{{name: "c0", state: Ready, nodes: []corev1.Node{n}}}
	cfg := scheduler.Config{Tiers: []scheduler.Tier{{Name: "research", Priority: 100}},
		Teams: []scheduler.Team{{Name: "t0", Weight: 1, Quota: map[scheduler.Flavor]scheduler.Quota{"h100": {Nominal: 8}}}}}
	at := time.Unix(1e6, 0)
	for _, tc := range []struct {
		name string
		// cluster and failovers: the moved job's routing as the router
		// holds it.
		cluster   string
		failovers int
		wantMoved bool
	}{
		{name: "its worker lost in this pass", cluster: "c1", wantMoved: true},
		{name: "failed over in an earlier pass", failovers: 1, wantMoved: true},
		{name: "never failed over", wantMoved: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			early := benchJob("early", 0, 1, 8, "", "")
			early.spec.Submitted = at.Add(-time.Hour)
			moved := benchJob("moved", 0, 1, 8, tc.cluster, "")
			moved.spec.Submitted = at.Add(-time.Minute)
			moved.failovers = tc.failovers
			d, err := decide(cfg, scheduler.DefaultOptions(), workers, pools, []*hubJob{early, moved}, at)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.routes) != 1 {
				t.Fatalf("%d jobs routed, want 1 (pending: early %q, moved %q)", len(d.routes), d.pending[early], d.pending[moved])
			}
			want := early
			if tc.wantMoved {
				want = moved
			}
			if got := d.routes[0].h; got != want {
				t.Errorf("%s routed (failovers %d), want %s", got.spec.ID, moved.failovers, want.spec.ID)
			}
		})
	}
}
