package capacity

import (
	"testing"
	"time"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/schema"
)

// What a Pool's status says it holds is clamped to the revision's envelope:
// a forged status grows no pool beyond what Git approved.
func TestHeldStaysWithinTheEnvelope(t *testing.T) {
	pool := func(repair, burst int64) *schema.Pool {
		p := &schema.Pool{Name: "a", MaxNodes: 10}
		if repair > 0 {
			p.Repair = &schema.Repair{MaxNodes: repair}
		}
		if burst > 0 {
			p.Burst = &schema.Burst{MaxNodes: burst, IdleAfter: time.Minute}
		}
		return p
	}
	for _, c := range []struct {
		name          string
		pool          *schema.Pool
		target        int64
		repl, bursted int64
		want          int64
	}{
		{"within both", pool(2, 3), 4, 1, 2, 3},
		{"forged counts", pool(2, 3), 4, 100, 100, 5},
		{"nodes.max leaves burst less", pool(2, 3), 7, 2, 3, 3},
		{"burst without a declaration", pool(2, 0), 4, 1, 3, 1},
		{"repair without a declaration", pool(0, 3), 4, 2, 1, 1},
		{"negative", pool(2, 3), 4, -5, -5, 0},
		{"at nodes.max", pool(2, 3), 10, 2, 3, 0},
	} {
		r := Revision{Config: &schema.Config{Pools: map[schema.PoolName]*schema.Pool{"a": c.pool}},
			Repair: map[schema.PoolName]*allotv1.PoolRepairStatus{"a": {ReplacementNodes: c.repl}},
			Burst:  map[schema.PoolName]*allotv1.PoolBurstStatus{"a": {BurstNodes: c.bursted}}}
		if got := r.held("a", c.target); got != c.want {
			t.Errorf("%s: held %d, want %d", c.name, got, c.want)
		}
	}
}

// A node the status retires before its mark is written keeps its seat (no
// other node is removed for it), a forged record makes no node, and the
// kept retired nodes count against nodes.max.
func TestSeatsHeldKeepsWhatIsThere(t *testing.T) {
	p := &schema.Pool{Name: "a", MaxNodes: 4}
	h := fleet.Held{Names: []string{"a-0", "a-1", "a-2"}, Retired: map[string]bool{}}
	retiring := &allotv1.PoolRepairStatus{Nodes: []allotv1.PoolNodeRecord{{Name: "a-2", Retired: true, Burst: true}}}
	if n := seatsHeld(2, p, h, retiring); n != 3 {
		t.Errorf("status first, mark not yet: %d seats, want 3 (nothing removed yet)", n)
	}
	forged := &allotv1.PoolRepairStatus{Nodes: []allotv1.PoolNodeRecord{{Name: "a-0", Retired: true}, {Name: "a-1", Retired: true}, {Name: "a-9", Retired: true}}}
	if n := seatsHeld(3, p, h, forged); n != 3 {
		t.Errorf("forged records: %d seats, want 3 (no node made)", n)
	}
	h.Retired["a-2"] = false // marked remove
	if n := seatsHeld(2, p, h, retiring); n != 2 {
		t.Errorf("marked: %d seats, want 2", n)
	}
	h.Retired["a-2"] = true // kept for repair
	if n := seatsHeld(4, p, h, nil); n != 3 {
		t.Errorf("a kept node beside 4 seats: %d seats, want 3 (nodes.max 4)", n)
	}
}
