package pool

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/allot-dev/allot/fleet/elastic"
)

// A team's burst gauge goes when its nodes are given back, and every gauge
// of a pool goes with the pool.
func TestMetricsFollowThePool(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.observe("a", elastic.State{Burst: 3, BurstTeams: []elastic.TeamNodes{{Team: "nlp", Nodes: 2}, {Team: "vision", Nodes: 1}}}, elastic.Decision{})
	m.observe("b", elastic.State{Replacements: 1}, elastic.Decision{})
	if n := testutil.CollectAndCount(m.burst); n != 4 {
		t.Fatalf("%d burst series, want 4 (a: \"\", nlp, vision; b: \"\")", n)
	}
	m.observe("a", elastic.State{Burst: 2, BurstTeams: []elastic.TeamNodes{{Team: "nlp", Nodes: 2}}}, elastic.Decision{})
	if n := testutil.CollectAndCount(m.burst); n != 3 {
		t.Fatalf("%d burst series after vision's node went, want 3", n)
	}
	m.forget("a")
	for name, c := range map[string]prometheus.Collector{"burst": m.burst, "replacements": m.replacements, "retired": m.retired} {
		if n := testutil.CollectAndCount(c); n != map[string]int{"burst": 1, "replacements": 1, "retired": 2}[name] {
			t.Errorf("%s: %d series left after pool a went, want only pool b's", name, n)
		}
	}
}
