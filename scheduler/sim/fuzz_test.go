package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/schematest"
)

// randomJobs returns up to 40 jobs the workload reader accepts (a GPU count
// within 63 bits), some of them gangs far beyond any fleet.
func randomJobs(r *rand.Rand, cfg *schema.Config) []workload.Spec {
	teams := cfg.TeamNames()
	var jobs []workload.Spec
	for i := range 1 + r.IntN(40) {
		j := workload.Spec{
			ID: fmt.Sprintf("j%d", i), Submit: float64(schematest.Pick(r, 0, 3600)), Duration: float64(schematest.Pick(r, 1, 3600)),
			Team: string(teams[r.IntN(len(teams))]), Tier: string(schematest.Tiers[r.IntN(len(schematest.Tiers))]),
			Pods: 1 + r.Int64N(4), GPUsPerPod: schematest.Pick(r, 1, 16),
		}
		switch r.IntN(8) {
		case 0: // the largest gang the reader accepts
			j.Pods = schematest.Pick(r, 1, math.MaxInt32)
			j.GPUsPerPod = schematest.Pick(r, 1, math.MaxInt64/j.Pods)
		case 1:
			j.Flavors = []string{fmt.Sprintf("f%d", r.IntN(3))}
		case 2:
			j.Require = schematest.Levels[r.IntN(len(schematest.Levels))]
		case 3:
			j.Prefer = schematest.Levels[r.IntN(len(schematest.Levels))]
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// FuzzSim replays random workloads, with node failures, on random valid
// configurations (every number up to the schema's bounds, pools of at most 12
// nodes so that a run takes milliseconds) with the real scheduler core (half
// of them with starving workloads): no
// panic, no error, no violation, no negative GPU count, wait or use.
func FuzzSim(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed, seed*104729)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) { simRandom(t, a, b) })
}

// TestSimRandomRunsWork: the random configurations and workloads of FuzzSim
// do run jobs (the fuzz target checks something).
func TestSimRandomRunsWork(t *testing.T) {
	completed := 0
	for seed := range uint64(16) {
		completed += simRandom(t, seed, seed*104729).Summary.Completed
	}
	if completed < 16 {
		t.Errorf("%d jobs completed over 16 seeds", completed)
	}
}

// simRandom replays the random workload of seeds a and b, checks the report
// and returns it.
func simRandom(t *testing.T, a, b uint64) *Report {
	t.Helper()
	r := rand.New(rand.NewPCG(a, b))
	cfg := schematest.RandomConfig(r, 12)
	in := Input{Quota: QuotaFromSchema(cfg), Nodes: FleetFromSchema(cfg, planner.Build(cfg).NodesTargets()), Jobs: randomJobs(r, cfg)}
	for range r.IntN(4) {
		if len(in.Nodes) == 0 {
			break
		}
		n := in.Nodes[r.IntN(len(in.Nodes))].Name
		at := float64(r.IntN(3600))
		in.Events = append(in.Events, Event{Time: at, Node: n, Kind: Fail}, Event{Time: at + float64(r.IntN(600)), Node: n, Kind: Recover})
	}
	var opts scheduler.Options
	if r.IntN(2) == 0 {
		// Starving workloads, within the workload's hour.
		opts.StarvationAfter = time.Duration(1+r.IntN(600)) * time.Second
	}
	core, err := NewCore(in.Quota, in.Nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(core, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	if s.GangViolations+s.QuotaViolations+s.TopologyViolations != 0 || s.Completed+s.Unschedulable > s.Jobs ||
		s.GPUUtilization < 0 || s.GPUUtilization > 1 || s.WaitP50S < 0 || s.WaitP95S < 0 || s.MakespanS < 0 {
		t.Errorf("summary %+v", s)
	}
	for _, j := range rep.Jobs {
		if j.GPUs < 0 || (j.WaitS != nil && *j.WaitS < 0) || j.Preempted < 0 {
			t.Errorf("job %+v", j)
		}
	}
	for _, tr := range rep.Teams {
		if tr.GPUSeconds < 0 || tr.Share < 0 {
			t.Errorf("team %+v", tr)
		}
	}
	return rep
}

// FuzzReadEvents: an events file either reads or fails with file:line:
// what, quoted fields spanning lines, huge records and field counts
// included; it never panics, and what it allocates is bounded by the file
// and one record (workload.MaxRecordBytes), not by the shape of a record.
func FuzzReadEvents(f *testing.F) {
	for _, seed := range []string{
		"time,node,event\n0,n1,fail\n60,n1,recover\n",
		"time,node,event\n0,cluster/c1,fail\n",
		"time,node,event\n0,\"n\n1\",fail\n\"6\n0\",n1,recover\n",
		"time,node,event\n0,\"n1" + strings.Repeat("\n,\"\"", 10000) + "\",fail\n",
		"time,node,event\n0,n1,fail" + strings.Repeat(",", workload.MaxFields) + "\n",
		"time,node,event\n\"" + strings.Repeat("x", workload.MaxFieldBytes+1),
		"time,node,event\n0,n1,\"fail",
	} {
		f.Add(seed)
	}
	fileLine := regexp.MustCompile(`^e\.csv:[0-9]+: `)
	f.Fuzz(func(t *testing.T, in string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ReadEvents(strings.NewReader(in), "e.csv")
		runtime.ReadMemStats(&after)
		if grew, bound := after.TotalAlloc-before.TotalAlloc, uint64(8*len(in)+4*workload.MaxRecordBytes+1<<20); grew > bound {
			t.Fatalf("allocated %d bytes reading %d", grew, len(in))
		}
		if err != nil && !fileLine.MatchString(err.Error()) {
			t.Fatalf("error without file:line: %v", err)
		}
	})
}

// TestReadEventsBoundsRecords: a quoted field spanning lines is bounded as
// a whole record: 32 MB of it is an error at the line it starts, read in a
// few MB.
func TestReadEventsBoundsRecords(t *testing.T) {
	in := io.MultiReader(strings.NewReader("time,node,event\n0,n1,fail\n1,\"n2"), strings.NewReader(strings.Repeat("abcdefg\n", 4<<20)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadEvents(in, "e.csv")
	runtime.ReadMemStats(&after)
	if want := "e.csv:3: field 2 is longer than 16384 bytes (MaxFieldBytes)"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("allocated %d KB reading a 32 MB record; want under 4 MB", grew>>10)
	}
}
