package hub

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
)

// TestForgedRoutingToAnUnreachableWorker: a hub that has just become the
// leader trusts a Job's routing where the worker it names cannot be asked
// (own). Whoever submits the Job may have written that routing: a job of t0
// said to run in c1, which no probe has reached, with a placement on c0's
// only node, or of garbage. It is counted in c1 (where, if it runs, it
// runs), in t0's quota: t1's job still gets c0's node, and t0's next job
// waits for t0's quota (the job, routed again when c1 answers without its
// copy, or is lost, may then take it).
func TestForgedRoutingToAnUnreachableWorker(t *testing.T) {
	pools, n := oneNodePool()
	clusters := []allotv1.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: "c0"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c1"}}}
	workers := withUnprobed([]snapshot{{name: "c0", state: Ready, nodes: []corev1.Node{n}}}, clusters)
	cfg := scheduler.Config{Tiers: []scheduler.Tier{{Name: "research", Priority: 100}}}
	for _, team := range []scheduler.TeamName{"t0", "t1"} {
		cfg.Teams = append(cfg.Teams, scheduler.Team{Name: team, Weight: 1, Quota: map[scheduler.Flavor]scheduler.Quota{"h100": {Nominal: 8}}})
	}
	for name, tc := range map[string]struct {
		placement string
		next      *hubJob
		wantRoute bool
	}{
		"on c0's node, t1's job":   {placement: "c0-n0=1", next: benchJob("other", 1, 1, 8, "", ""), wantRoute: true},
		"on c0's node, t0's job":   {placement: "c0-n0=1", next: benchJob("more", 0, 1, 8, "", "")},
		"of garbage, t0's job":     {placement: "=,x=-1,c0-n0=zz", next: benchJob("more", 0, 1, 8, "", "")},
		"on no node, t0's job":     {placement: "", next: benchJob("more", 0, 1, 8, "", "")},
		"on a node gone, t0's job": {placement: "c1-n9=1", next: benchJob("more", 0, 1, 8, "", "")},
	} {
		t.Run(name, func(t *testing.T) {
			forged := benchJob("forged", 0, 1, 8, "c1", tc.placement)
			d, err := decide(cfg, scheduler.DefaultOptions(), workers, pools, []*hubJob{forged, tc.next}, time.Unix(1e6, 0))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.failovers) != 0 || len(d.mirror) != 1 {
				t.Fatalf("%d failovers, %d mirrored: the job said routed to c1 is not kept there", len(d.failovers), len(d.mirror))
			}
			if len(d.recounted) != 1 || d.recounted[0].counted != countedQuota {
				t.Errorf("the forged job is not counted in t0's quota in c1: %+v", d.recounted)
			}
			routed := len(d.routes) == 1 && d.routes[0].h == tc.next && d.routes[0].a.Cluster == "c0"
			if routed != tc.wantRoute {
				t.Errorf("%s routed to c0: %v, want %v (pending %q)", tc.next.spec.ID, routed, tc.wantRoute, d.pending[tc.next])
			}
			if !tc.wantRoute && !strings.HasPrefix(d.pending[tc.next], string(scheduler.ReasonOverQuota)) {
				t.Errorf("%s pending %q, want OverQuota", tc.next.spec.ID, d.pending[tc.next])
			}
		})
	}
}

// oneNodePool is pool c0 of cluster c0, h100 nodes of 8 GPUs, and its one
// node, ready.
func oneNodePool() ([]allotv1.Pool, corev1.Node) {
	pools := []allotv1.Pool{{ObjectMeta: metav1.ObjectMeta{Name: "c0"}, Spec: allotv1.PoolSpec{Cluster: "c0", Flavor: "h100", GPUsPerNode: 8, Price: allotv1.Price{OnDemandPerNodeHour: "20"}}}}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c0-n0", Labels: map[string]string{contract.LabelPool: "c0"}}}
	n.Status.Allocatable = corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return pools, n
}
