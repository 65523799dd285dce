package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// twoClusters is a fleet of flavor a in two clusters of n 8-GPU nodes each:
// "cheap" at cost 1 per GPU-hour, "dear" at 3.
func twoClusters(n int) []scheduler.Node {
	var out []scheduler.Node
	for _, c := range []struct {
		name string
		cost int64
	}{{"cheap", 1}, {"dear", 3}} {
		for i := range n {
			out = append(out, scheduler.Node{Name: scheduler.NodeName(fmt.Sprintf("%s-%d", c.name, i)), Flavor: "a", GPUs: 8, Cluster: c.name, Cost: c.cost,
				// The same rack names in both clusters.
				Domains: []scheduler.Domain{{Level: "rack", Name: fmt.Sprintf("r%d", i/2)}}})
		}
	}
	return out
}

// oneTeam is a quota tree of team t with 64 GPUs of flavor a and tier p.
func oneTeam() scheduler.Config {
	return scheduler.Config{Tiers: []scheduler.Tier{{Name: "p", Priority: 1}}, Teams: []scheduler.Team{{Name: "t", Quota: map[scheduler.Flavor]scheduler.Quota{"a": {Nominal: 64}}}}}
}

// runError is the error of replaying in with the default core.
func runError(t *testing.T, in Input) error {
	t.Helper()
	core, err := NewCore(in.Quota, in.Nodes, scheduler.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(core, in, Options{})
	return err
}

// TestSimRoutesAndFailsOver: jobs go to the cheap cluster while it has room,
// then to the dear one; no gang spans the two; when the cheap cluster is
// lost its gangs are requeued whole and run in the other; a job pinned to the
// lost cluster waits for it to come back.
func TestSimRoutesAndFailsOver(t *testing.T) {
	q := oneTeam()
	in := Input{Nodes: twoClusters(4), Quota: q,
		Jobs: []workload.Spec{
			{ID: "first", Submit: 0, Duration: 1000, Team: "t", Tier: "p", Pods: 2, GPUsPerPod: 8},
			{ID: "second", Submit: 1, Duration: 1000, Team: "t", Tier: "p", Pods: 2, GPUsPerPod: 8},
			// The cheap cluster is full: the dear one.
			{ID: "third", Submit: 2, Duration: 100, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 8},
			// 5 nodes: more than one cluster holds, though 5 are free at 200.
			{ID: "wide", Submit: 200, Duration: 100, Team: "t", Tier: "p", Pods: 5, GPUsPerPod: 8},
			// Pinned to the cheap cluster, which is lost at 500.
			{ID: "pinned", Submit: 600, Duration: 10, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1, Cluster: "cheap"},
		},
		Events: []Event{{Time: 500, Node: "cluster/cheap", Kind: Fail}, {Time: 5000, Node: "cluster/cheap", Kind: Recover}},
	}
	rep := runCore(t, in, scheduler.DefaultOptions())
	noViolations(t, rep)
	got := map[string]JobReport{}
	for _, j := range rep.Jobs {
		got[j.ID] = j
	}
	// first and second ran in cheap until 500, then both moved to dear (4
	// nodes: room for both); they end 1000 s after the restart.
	for _, id := range []string{"first", "second"} {
		j := got[id]
		if j.Cluster != "dear" || j.Preempted != 1 || j.End == nil || *j.End != 1500 {
			t.Errorf("%s = %+v, want moved to dear at 500 and ended at 1500", id, j)
		}
		for _, n := range j.Nodes {
			if !strings.HasPrefix(n, "dear-") {
				t.Errorf("%s on %s", id, n)
			}
		}
	}
	if j := got["third"]; j.Cluster != "dear" || *j.Start != 2 {
		t.Errorf("third = %+v, want started in dear at 2", j)
	}
	if j := got["wide"]; j.End != nil || j.ReasonCode != string(scheduler.ReasonInsufficientNodes) || !strings.Contains(j.Reason, "any one cluster") {
		t.Errorf("wide = %+v, want it never to run (no cluster holds 5 nodes)", j)
	}
	if j := got["pinned"]; j.Cluster != "cheap" || *j.Start != 5000 {
		t.Errorf("pinned = %+v, want it to wait for cheap to come back at 5000", j)
	}
	clusters := map[string]ClusterReport{}
	for _, c := range rep.Clusters {
		clusters[c.Cluster] = c
	}
	if c := clusters["dear"]; c.Jobs != 3 || c.MovedIn != 2 {
		t.Errorf("dear = %+v, want 3 jobs, 2 moved in", c)
	}
	// cheap ran first (16 GPUs) from 0 and second from 1 until 500, and
	// pinned (1 GPU) for 10 s.
	if c := clusters["cheap"]; c.Jobs != 1 || c.GPUSeconds != 16*500+16*499+10 {
		t.Errorf("cheap = %+v", c)
	}
}

// TestSimRejectsAnUnknownCluster: a job pinned to, or an event naming, a
// cluster without nodes is an error.
func TestSimRejectsAnUnknownCluster(t *testing.T) {
	q := oneTeam()
	for name, in := range map[string]Input{
		"job":   {Nodes: twoClusters(1), Quota: q, Jobs: []workload.Spec{{ID: "j", Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1, Cluster: "mars"}}},
		"event": {Nodes: twoClusters(1), Quota: q, Events: []Event{{Time: 1, Node: "cluster/mars", Kind: Fail}}},
	} {
		if err := runError(t, in); err == nil || !strings.Contains(err.Error(), "cluster mars has no nodes") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestSimJobPinnedToAnEmptyClusterWaits: a cluster the fleet declares but
// has no nodes in (a repository's cluster whose pools are planned at zero) is
// not a misspelt name: a job pinned to it never starts, and says why; an
// event of it fails nothing.
func TestSimJobPinnedToAnEmptyClusterWaits(t *testing.T) {
	q := oneTeam()
	in := Input{Nodes: twoClusters(1), Quota: q, Clusters: []string{"cheap", "dear", "spare"},
		Jobs: []workload.Spec{
			{ID: "pinned", Submit: 0, Duration: 10, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1, Cluster: "spare"},
			{ID: "free", Submit: 0, Duration: 10, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1},
		},
		Events: []Event{{Time: 1, Node: "cluster/spare", Kind: Fail}},
	}
	rep := runCore(t, in, scheduler.DefaultOptions())
	noViolations(t, rep)
	for _, j := range rep.Jobs {
		switch j.ID {
		case "pinned":
			if j.Start != nil || j.Reason == "" {
				t.Errorf("pinned = %+v, want it never to start, with a reason", j)
			}
		case "free":
			if j.Start == nil || *j.Start != 0 || j.Cluster != "cheap" {
				t.Errorf("free = %+v, want it started at 0 in cheap", j)
			}
		}
	}
	// A name neither the nodes nor Clusters know is still an error.
	in.Jobs[0].Cluster = "mars"
	if err := runError(t, in); err == nil || !strings.Contains(err.Error(), "cluster mars has no nodes") {
		t.Errorf("pinned to mars: err = %v", err)
	}
}

// TestSimEventOfANodeTheFleetMayLack: an event of a node the fleet may lack
// (a pool's node beyond its planned size: what a replay of fewer nodes than
// the history knew meets) fails nothing; one of a name nobody knows is an
// error.
func TestSimEventOfANodeTheFleetMayLack(t *testing.T) {
	q := oneTeam()
	in := Input{Nodes: twoClusters(1), Quota: q,
		Jobs:    []workload.Spec{{ID: "j", Submit: 0, Duration: 10, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1}},
		Events:  []Event{{Time: 1, Node: "cheap-7", Kind: Fail}, {Time: 2, Node: "cheap-7", Kind: Recover}},
		MayLack: func(n scheduler.NodeName) bool { return strings.HasPrefix(string(n), "cheap-") },
	}
	rep := runCore(t, in, scheduler.DefaultOptions())
	if j := rep.Jobs[0]; j.End == nil || *j.End != 10 || j.Preempted != 0 {
		t.Errorf("j = %+v, want it to run undisturbed", j)
	}
	in.Events[0].Node = "dear-7"
	if err := runError(t, in); err == nil || !strings.Contains(err.Error(), "node dear-7 does not exist") {
		t.Errorf("an event of dear-7: err = %v", err)
	}
}

// TestSimRejectsTimesPastItsClock: an arrival, a run or an event past
// workload.MaxSeconds (whatever the source: a trace whose intervals add up,
// a caller's jobs) is an error, not a wrapped clock and a job that "ended"
// before it began.
func TestSimRejectsTimesPastItsClock(t *testing.T) {
	q := oneTeam()
	job := func(submit, d float64) []workload.Spec {
		return []workload.Spec{{ID: "j", Submit: submit, Duration: d, Team: "t", Tier: "p", Pods: 1, GPUsPerPod: 1}}
	}
	for name, in := range map[string]Input{
		"run":     {Jobs: job(0, 1e10)},
		"arrival": {Jobs: job(2e9, 1)},
		"NaN":     {Jobs: job(math.NaN(), 1)},
		"event":   {Jobs: job(0, 1), Events: []Event{{Time: 1e12, Node: "cheap-0", Kind: Fail}}},
	} {
		in.Nodes, in.Quota = twoClusters(1), q
		if err := runError(t, in); err == nil || !strings.Contains(err.Error(), "1e9 s") {
			t.Errorf("%s: err = %v, want one naming the 1e9 s bound", name, err)
		}
	}
	rep := runCore(t, Input{Nodes: twoClusters(1), Quota: q, Jobs: job(workload.MaxSeconds, workload.MaxSeconds)}, scheduler.DefaultOptions())
	if j := rep.Jobs[0]; j.End == nil || *j.End != 2*workload.MaxSeconds {
		t.Errorf("at the bound: %+v, want it to end at 2e9 s", j)
	}
}

// TestSimOfTheExamplesStaysInOneCluster: on the example repository, whose
// flavors each span clusters, no job runs in two, and the jobs of a flavor go
// first to its cheapest cluster.
func TestSimOfTheExamplesStaysInOneCluster(t *testing.T) {
	cfg := loadRepo(t, "../../examples")
	nodes := FleetFromSchema(cfg, planner.Build(cfg).NodesTargets())
	clusterOf := map[string]string{}
	for _, n := range nodes {
		clusterOf[string(n.Name)] = n.Cluster
	}
	in := Input{Quota: QuotaFromSchema(cfg), Nodes: nodes, Jobs: readJobs(t, "../../examples/workloads/mixed.csv", 0)}
	AssignToConfig(in.Jobs, in.Quota)
	rep := runCore(t, in, scheduler.DefaultOptions())
	noViolations(t, rep)
	ran := 0
	for _, j := range rep.Jobs {
		for _, n := range j.Nodes {
			ran++
			if clusterOf[n] != j.Cluster {
				t.Fatalf("job %s runs on %s of %s, reported in %q", j.ID, n, clusterOf[n], j.Cluster)
			}
		}
	}
	if ran == 0 || len(rep.Clusters) < 2 {
		t.Fatalf("ran %d pods, clusters %+v", ran, rep.Clusters)
	}
}
