package elastic

import (
	"fmt"
	"testing"
	"time"

	"github.com/allot-dev/allot/schema"
)

// BenchmarkDecideBusyPool: one burst decision on a pool of 5,000 nodes,
// half of them idle, with 10,000 gangs waiting; indexed with domains of 8
// (sized by seat), and of a count without domains.
func BenchmarkDecideBusyPool(b *testing.B) {
	for _, c := range []struct {
		name   string
		named  bool
		domain int64
	}{{"named-domains", true, 8}, {"count", false, 0}} {
		b.Run(c.name, func(b *testing.B) {
			p := Pool{Fixed: 5000, Max: 6000, GPUsPerNode: 8, Named: c.named,
				Burst: &schema.Burst{MaxNodes: 500, IdleAfter: 30 * time.Minute}}
			if c.named {
				p.IndexOf = func(name string) (int64, bool) {
					var i int64
					_, err := fmt.Sscanf(name, "n-%d", &i)
					return i, err == nil
				}
			}
			nodes := make([]Node, 5000)
			for i := range nodes {
				nodes[i] = Node{Name: fmt.Sprintf("n-%d", i), Usable: true, HealthyGPUs: 8, Busy: i%2 == 0}
			}
			gangs := make([]Gang, 10000)
			for i := range gangs {
				gangs[i] = Gang{Team: fmt.Sprint("t", i%50), GPUs: 16 + int64(i%4)*8, DomainNodes: c.domain}
			}
			b.ResetTimer()
			for b.Loop() {
				Decide(p, State{}, gangs, nodes, t0)
			}
		})
	}
}
