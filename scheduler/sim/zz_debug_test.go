package sim

import (
	"fmt"
	"testing"

	"github.com/allot-dev/allot/scheduler"
)

func TestZZBusyCounts(t *testing.T) {
	for _, nodes := range []int{625, 2500} {
		clear(scheduler.DebugCounts)
		q := sharedCohort(50, "h", int64(nodes*8/50))
		q.Tiers = append(q.Tiers, scheduler.Tier{Name: "opportunist", Priority: 0, Preemptible: true, BorrowOnly: true})
		core, _ := NewCore(q, pods("h", nodes), scheduler.DefaultOptions())
		Run(core, Input{Nodes: pods("h", nodes), Jobs: busyJobs(nodes), Quota: q}, Options{})
		fmt.Println(nodes, scheduler.DebugCounts)
	}
}
