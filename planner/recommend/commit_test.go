package recommend

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// TestCommittedCountMatchesBruteForce: on random use of a pool (jobs on random
// nodes at whole seconds, random prices, nodes.min and declared commitments),
// the committed count recommend picks is the one a brute-force search over
// every count finds, each priced from scratch: second by second, the nodes
// busy, raised to nodes.min, committed ones paid every second and the others
// while busy. Ties go to the declared count, else the smallest.
func TestCommittedCountMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		nodes := int64(1 + rng.IntN(12))
		minNodes := int64(rng.IntN(3))
		if minNodes > nodes {
			minNodes = nodes
		}
		var layout []fleet.Node
		for i := range nodes {
			layout = append(layout, fleet.Node{Name: fleet.NodeName("p", i), Pool: "p", Flavor: "h100", GPUs: 8})
		}
		rep := &sim.Report{}
		horizon := int64(3600 + rng.IntN(20000))
		rep.Jobs = append(rep.Jobs, sim.JobReport{ID: "first", Submit: 0, End: ptr(0)}) // the horizon starts at 0
		for j := range 1 + rng.IntN(30) {
			start := rng.Int64N(horizon)
			end := min(horizon, start+1+rng.Int64N(horizon/2))
			var ns []string
			for range 1 + rng.IntN(int(nodes)) {
				ns = append(ns, layout[rng.IntN(int(nodes))].Name)
			}
			slices.Sort(ns)
			ns = slices.Compact(ns)
			rep.Jobs = append(rep.Jobs, sim.JobReport{ID: fmt.Sprint(j), Submit: float64(start), Start: ptr(float64(start)), End: ptr(float64(end)), GPUs: 8, Nodes: ns})
		}
		rep.Jobs = append(rep.Jobs, sim.JobReport{ID: "last", Submit: 0, End: ptr(float64(horizon))})
		price := schema.Price{OnDemandPerNodeHour: quantity.FromCents(int64(100 + rng.IntN(9000))), HasCommittedPrice: true,
			CommittedNodes: rng.Int64N(nodes + 3)}
		price.CommittedPerNodeHour = quantity.FromCents(rng.Int64N(price.OnDemandPerNodeHour.Cents() + 50))
		if rng.IntN(8) == 0 {
			price.CommittedPerNodeHour = price.OnDemandPerNodeHour // every count may tie
		}

		// Brute force: the busy nodes of every second.
		busy := make([]int64, horizon)
		for i := range nodes {
			name := layout[i].Name
			on := make([]bool, horizon)
			for _, j := range rep.Jobs {
				if j.Start != nil && slices.Contains(j.Nodes, name) {
					for s := int64(*j.Start); s < int64(*j.End); s++ {
						on[s] = true
					}
				}
			}
			for s, b := range on {
				if b {
					busy[s]++
				}
			}
		}
		cost := func(c int64) quantity.Decimal {
			var onDemandSeconds int64
			for _, b := range busy {
				onDemandSeconds += max(0, max(b, minNodes)-c)
			}
			perSecond := price.CommittedPerNodeHour.MulInt(c * horizon).Add(price.OnDemandPerNodeHour.MulInt(onDemandSeconds))
			return perSecond.Quo(quantity.Int(horizon)).MulInt(730)
		}
		want, wantCost := int64(-1), quantity.Decimal{}
		for c := range nodes + 1 {
			k := cost(c)
			if want < 0 || k.Cmp(wantCost) < 0 {
				want, wantCost = c, k
			}
		}
		if price.CommittedNodes <= nodes && cost(price.CommittedNodes).Cmp(wantCost) == 0 {
			want = price.CommittedNodes
		}

		u := measure(layout, rep)
		prof := newProfile(u.levels["p"], minNodes)
		got := prof.best(price, nodes)
		if got != want {
			t.Fatalf("trial %d (%d nodes, min %d, %s/%s, declared %d): best %d, brute force %d (costs %s vs %s)",
				trial, nodes, minNodes, price.CommittedPerNodeHour, price.OnDemandPerNodeHour, price.CommittedNodes, got, want, prof.monthly(price, got), wantCost)
		}
		for c := range nodes + 1 {
			if g, w := prof.monthly(price, c), cost(c); g.Cmp(w) != 0 {
				t.Fatalf("trial %d: %d committed cost %s a month, brute force %s", trial, c, g, w)
			}
		}
	}
}

func ptr(v float64) *float64 { return &v }
