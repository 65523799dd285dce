package capacity_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler/runner"
)

// Issue 46 burst end to end, with the real API server, the real terraform,
// the kwok module and allot's scheduler: the pool's two nodes are taken by
// another scheduler's pods, so a gang within its team's quota waits for
// nodes; with burst.maxNodes 1 the pool stays (BurstAtMax), then with 3
// merged it grows by the two nodes it needs, the
// scheduler binds the gang there; once it ends and the nodes stay idle past
// idleAfter they are retired and deleted, and the pool is back at its
// planned size. It never holds more than its planned size plus burst.
func TestBurstGrowsForAWaitingGangThenShrinks(t *testing.T) {
	ctx := context.Background()
	// The Pool reconciler's clock: advanced by hand past idleAfter.
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	c, reg, _ := startRepair(t, runner.New(runner.Options{CycleInterval: 5 * time.Millisecond, Resync: 100 * time.Millisecond}), now)
	most := watchMostNodes(t, c)

	repo := newGitRepo(t)
	repo.write("capacity.cue", kwokRepo(16)+`pools: a: burst: {maxNodes: 1, idleAfter: "1m"}`+"\n")
	head := repo.commit("pool a with a burst of one node")
	key := kwokSource(t, c, repo, head)

	// Another scheduler's pods hold both nodes.
	for _, node := range []string{"a-0", "a-1"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "other-" + node},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}}}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// A gang of 2 x 8 GPUs, within alpha's 16: it waits for nodes, more
	// than the burst of one node Git approved: the pool stays as it is, and
	// says so.
	gang := submitGang(t, c, "gitops", "train", 2, 8)
	waitPoolEvent(t, c, "a", string(elastic.ActionBurstAtMax), "need more nodes than the burst room allows")
	time.Sleep(2 * time.Second)
	waitNodes(t, c, "a-0", "a-1")
	// A burst of three merged: the pool grows by the two it needs.
	repo.write("capacity.cue", kwokRepo(16)+`pools: a: burst: {maxNodes: 3, idleAfter: "1m"}`+"\n")
	waitApplied(t, c, key, repo.commit("pool a with a burst of three"))
	waitPoolEvent(t, c, "a", string(elastic.ActionBurstUp), "alpha 2")
	waitNodes(t, c, "a-0", "a-1", "a-2", "a-3")
	eventually(t, 30*time.Second, "the gang bound on the burst nodes", func() error {
		for _, name := range gang {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: "gitops", Name: name}, &p); err != nil {
				return err
			}
			if p.Spec.NodeName != "a-2" && p.Spec.NodeName != "a-3" {
				return fmt.Errorf("pod %s on %q", name, p.Spec.NodeName)
			}
		}
		return nil
	})
	p := getPool(t, c, "a")
	if p.Status.Burst == nil || p.Status.Burst.BurstNodes != 2 || len(p.Status.Burst.Teams) != 1 || p.Status.Burst.Teams[0].Team != "alpha" ||
		!strings.Contains(p.Status.Burst.Message, "gangs wait for nodes (alpha 2)") {
		t.Fatalf("burst status %+v; want 2 nodes for alpha, and why", p.Status.Burst)
	}
	if p.Spec.NodesTarget != 2 {
		t.Errorf("the Pool's planned target changed: %d", p.Spec.NodesTarget)
	}
	// Busy, the burst nodes stay however long.
	ahead.Store(int64(time.Hour))
	time.Sleep(2 * time.Second)
	waitNodes(t, c, "a-0", "a-1", "a-2", "a-3")

	// The gang ends: idle past idleAfter, both go, and the pool is back at
	// its plan; the other scheduler's nodes are never touched.
	for _, name := range gang {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "gitops", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		if err := c.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the burst nodes seen idle", func() error {
		if b := getPool(t, c, "a").Status.Burst; b == nil || len(b.Idle) != 2 {
			return fmt.Errorf("burst status %+v", b)
		}
		return nil
	})
	ahead.Store(int64(time.Hour + 2*time.Minute))
	waitPoolEvent(t, c, "a", string(elastic.ActionBurstDown), "2 burst node(s) given back")
	waitNodes(t, c, "a-0", "a-1")
	eventually(t, 30*time.Second, "the burst and its records gone", func() error {
		p := getPool(t, c, "a")
		if p.Status.Burst == nil || p.Status.Burst.BurstNodes != 0 || len(p.Status.Burst.Teams) != 0 || p.Status.Repair != nil && len(p.Status.Repair.Nodes) != 0 {
			return fmt.Errorf("burst %+v repair %+v", p.Status.Burst, p.Status.Repair)
		}
		return nil
	})
	if m := most(); m != 4 {
		t.Errorf("the pool peaked at %d nodes; want 4: its 2 and the 2 the gang needed (burst.maxNodes 3)", m)
	}
	// The meter billed alpha for its two nodes over the hour and two
	// minutes the clock moved (and the seconds the test took), nobody else.
	if b := getPool(t, c, "a").Status.Burst; len(b.Metered) != 1 || b.Metered[0].Team != "alpha" ||
		b.Metered[0].NodeSeconds < 2*3720 || b.Metered[0].NodeSeconds > 2*(3720+300) || b.MeteredSince == nil || b.MeteredAt == nil {
		t.Errorf("burst metered %+v since %v; want alpha's 2 nodes over 62-67 minutes", b.Metered, b.MeteredSince)
	}
	const want = `
# HELP allot_pool_burst_nodes Burst nodes a pool holds beyond its planned size for pending gangs (spec.burst), by the team whose gangs caused them (team "": nobody's, always present); times the pool's GPUs per node and summed over time, the burst GPU-hours per team.
# TYPE allot_pool_burst_nodes gauge
allot_pool_burst_nodes{pool="a",team=""} 0
# HELP allot_pool_repair_actions_total Repair and burst actions taken, by pool and action (ReplacementAdded, ReplacementReturned, NodeRetired, NodeFlapping, ReplacementAtMax, BurstScaledUp, BurstScaledDown, BurstAtMax).
# TYPE allot_pool_repair_actions_total counter
allot_pool_repair_actions_total{action="BurstAtMax",pool="a"} 1
allot_pool_repair_actions_total{action="BurstScaledDown",pool="a"} 1
allot_pool_repair_actions_total{action="BurstScaledUp",pool="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "allot_pool_burst_nodes", "allot_pool_repair_actions_total"); err != nil {
		t.Error(err)
	}
}
