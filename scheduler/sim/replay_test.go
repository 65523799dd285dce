package sim

import (
	"fmt"
	"testing"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/reference"
	"github.com/allot-dev/allot/scheduler/workload"
)

// replay runs jobs through the core and through the reference policy (greedy
// first-fit backfill, no quotas) on the same fleet and returns both reports.
func replayBoth(t *testing.T, q scheduler.Config, nodes []scheduler.Node, jobs []workload.Spec) (core, ref *Report) {
	t.Helper()
	AssignToConfig(jobs, q)
	core = runCore(t, Input{Nodes: nodes, Jobs: jobs, Quota: q}, scheduler.DefaultOptions())
	ref, err := Run(reference.New(nodes), Input{Nodes: nodes, Jobs: jobs}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-9s util %.3f  wait p50 %7.0fs p95 %8.0fs  makespan %8.0fs  completed %d/%d  preemptions %d",
		"allot", core.Summary.GPUUtilization, core.Summary.WaitP50S, core.Summary.WaitP95S, core.Summary.MakespanS, core.Summary.Completed, core.Summary.Jobs, core.Summary.Preemptions)
	t.Logf("%-9s util %.3f  wait p50 %7.0fs p95 %8.0fs  makespan %8.0fs  completed %d/%d",
		"reference", ref.Summary.GPUUtilization, ref.Summary.WaitP50S, ref.Summary.WaitP95S, ref.Summary.MakespanS, ref.Summary.Completed, ref.Summary.Jobs)
	return core, ref
}

// pods lays out n nodes of 8 GPUs, 4 hosts to a rack, 8 racks to a block.
func pods(flavor string, n int) []scheduler.Node {
	var out []scheduler.Node
	for i := range n {
		out = append(out, scheduler.Node{Name: scheduler.NodeName(fmt.Sprintf("%s-%d", flavor, i)), Flavor: scheduler.Flavor(flavor), GPUs: 8,
			Domains: []scheduler.Domain{{Level: "block", Name: fmt.Sprintf("b%d", i/32)}, {Level: "rack", Name: fmt.Sprintf("r%d", i/4)}, {Level: "host", Name: fmt.Sprintf("%s-%d", flavor, i)}}})
	}
	return out
}

func sharedCohort(teams int, flavor string, nominal int64) scheduler.Config {
	q := scheduler.Config{
		Tiers:   []scheduler.Tier{{Name: "production", Priority: 500}, {Name: "research", Priority: 100, Preemptible: true}},
		Cohorts: []scheduler.Cohort{{Name: "org"}},
	}
	for i := range teams {
		q.Teams = append(q.Teams, scheduler.Team{Name: scheduler.TeamName(fmt.Sprintf("team-%d", i)), Cohort: "org",
			Quota: map[scheduler.Flavor]scheduler.Quota{scheduler.Flavor(flavor): {Nominal: nominal}}})
	}
	return q
}

// TestReplayHelios replays the first 3,000 GPU jobs of Helios (the 1,000 of its
// slice in testdata/ without ../shared) (users dealt onto 4
// teams sharing one cohort) on 64 nodes of 8 GPUs (racks of 4, blocks of 8 racks).
func TestReplayHelios(t *testing.T) {
	f, _ := trace("helios/helios_15k_users.csv")
	jobs := readJobs(t, f, 3000)
	core, ref := replayBoth(t, sharedCohort(4, "h", 128), pods("h", 64), jobs)
	noViolations(t, core)
	noViolations(t, ref)
	if core.Summary.Completed != len(jobs) || ref.Summary.Completed != len(jobs) {
		t.Errorf("completed: allot %d, reference %d, want %d", core.Summary.Completed, ref.Summary.Completed, len(jobs))
	}
	// Quotas and gang reservations cost some packing against a policy with no
	// rules at all, but not much.
	if core.Summary.GPUUtilization < 0.9*ref.Summary.GPUUtilization {
		t.Errorf("utilization %.3f is more than 10%% below the reference's %.3f", core.Summary.GPUUtilization, ref.Summary.GPUUtilization)
	}
}

// TestReplayOpenB replays the GPU pods of openb on a hundredth of its
// heterogeneous node list (one flavor per GPU model), QoS classes as tiers. Without
// ../shared it replays the first 1,000 pods on the same sample (testdata/).
func TestReplayOpenB(t *testing.T) {
	nodes, q := openbFleet(t)
	f, _ := trace("openb/openb_pod_list_default.csv")
	jobs := readJobs(t, f, 0)
	core, ref := replayBoth(t, q, nodes, jobs)
	noViolations(t, core)
	noViolations(t, ref)
	if core.Summary.Completed != len(jobs) || ref.Summary.Completed != len(jobs) {
		t.Errorf("completed: allot %d, reference %d, want %d", core.Summary.Completed, ref.Summary.Completed, len(jobs))
	}
	if core.Summary.GPUUtilization < 0.9*ref.Summary.GPUUtilization {
		t.Errorf("utilization %.3f is more than 10%% below the reference's %.3f", core.Summary.GPUUtilization, ref.Summary.GPUUtilization)
	}
}
