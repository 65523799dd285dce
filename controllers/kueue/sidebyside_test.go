package kueue

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
	simworkload "github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
)

// side is the side-by-side repository: team solo has the 16 GPUs of two
// 8-GPU L4 nodes.
const side = `package capacity

clusters: side: {provider: "kwok"}
pools: l4: {
	cluster:     "side"
	flavor:      "l4"
	gpusPerNode: 8
	nodes: {min: 2, max: 2}
	price: onDemandPerNodeHour: 1
}
tiers: {
	urgent: {priority: 1000}
	batch:  {priority: 10, preemptible: true}
}
cohorts: side: {}
teams: solo: {
	costCenter: "CC-3"
	owners: ["@solo"]
	cohort: "side"
	quota: l4: {nominal: 16}
}
`

// sideJobs are submitted one second apart, in this order: solo's two 6-GPU
// jobs take 12 of its 16 GPUs, 6 on each node; its 4-GPU job then fits the
// quota (16) but no node (2 free on each).
var sideJobs = []struct {
	name string
	gpus int64
}{{"s1", 6}, {"s2", 6}, {"s3", 4}}

// testSideBySide submits the same jobs to allot's core (as allot sim
// replays them) and to Kueue, and holds the difference docs/kueue.md
// explains: allot admits a job only where its pods fit on the nodes, Kueue
// by quota alone (kube-scheduler places the pods afterwards, and s3's would
// not fit on either node).
func testSideBySide(t *testing.T, env *testenv.Env) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(side), 0o644); err != nil {
		t.Fatal(err)
	}

	// allot: the repository's fleet and quotas, replayed.
	cfg, findings := schema.Load(os.DirFS(dir))
	if findings.HasErrors() {
		t.Fatal(findings)
	}
	plan := planner.Build(cfg)
	in := sim.Input{Quota: sim.QuotaFromSchema(cfg), Nodes: sim.FleetFromSchema(cfg, plan.NodesTargets())}
	for i, j := range sideJobs {
		in.Jobs = append(in.Jobs, simworkload.Spec{ID: j.name, Submit: float64(i), Duration: 3600, Team: "solo", Tier: "batch", Pods: 1, GPUsPerPod: j.gpus})
	}
	core, err := sim.NewCore(in.Quota, in.Nodes, scheduler.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sim.Run(core, in, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	allotAt := map[string]float64{}
	for _, j := range rep.Jobs {
		if j.Start != nil {
			allotAt[j.ID] = *j.Start
		}
	}
	// s1 and s2 start on arrival; s3 waits until one of them ends (at 3600 s).
	if allotAt["s1"] != 0 || allotAt["s2"] != 1 || allotAt["s3"] < 3600 {
		t.Errorf("allot starts %v: want s1 at 0, s2 at 1, s3 only once s1 ended (3600)", allotAt)
	}

	// Kueue: the same repository rendered and applied, the same Jobs.
	c := env.Client
	o := render(t, dir)[0]
	apply(t, c, o)
	active(t, c, o)
	for _, j := range sideJobs {
		job(t, c, "solo", j.name, "batch", j.gpus)
		time.Sleep(time.Second)
	}
	var admitted []string
	testenv.Eventually(t, 30*time.Second, "Kueue admits solo's jobs", func() error {
		admitted = admitted[:0]
		for _, j := range sideJobs {
			ok, err := running(c, "solo", j.name)
			if err != nil {
				return err
			}
			if ok {
				admitted = append(admitted, j.name)
			}
		}
		if len(admitted) < len(sideJobs) {
			return fmt.Errorf("admitted %v", admitted)
		}
		return nil
	})
	if !slices.Equal(admitted, []string{"s1", "s2", "s3"}) {
		t.Errorf("Kueue admitted %v, want all three: its admission counts quota, not nodes", admitted)
	}
	t.Logf("allot started %v; Kueue admitted %v at once (s3's pod would then wait in kube-scheduler: 2 GPUs free on each node)", allotAt, admitted)
	// Leave nothing for the other subtests.
	for _, j := range sideJobs {
		if wl, err := workload(c, "solo", j.name); err == nil {
			_ = c.Delete(t.Context(), wl)
		}
	}
}
