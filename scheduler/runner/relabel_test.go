package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// relabel sets (value non-nil) or removes (nil) labels of a pod, as an
// administrator may whatever the admission policy says.
func (cl *cluster) relabel(name string, labels map[string]*string) {
	cl.t.Helper()
	var p corev1.Pod
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: name}, &p); err != nil {
		cl.t.Fatal(err)
	}
	for k, v := range labels {
		if v == nil {
			delete(p.Labels, k)
		} else {
			p.Labels[k] = *v
		}
	}
	if err := cl.c.Update(context.Background(), &p); err != nil {
		cl.t.Fatalf("relabelling pod %s: %v", name, err)
	}
}

// metered is the GPU-seconds Team team's status says it used.
func (cl *cluster) metered(team string) int64 {
	cl.t.Helper()
	var tm allotv1.Team
	if err := cl.c.Get(context.Background(), client.ObjectKey{Name: team}, &tm); err != nil {
		cl.t.Fatal(err)
	}
	var n int64
	for _, m := range tm.Status.Metered {
		n += m.GPUSeconds
	}
	return n
}

// deleteAll deletes the namespace's pods and waits until they are gone.
func (cl *cluster) deleteAll() {
	cl.t.Helper()
	ctx := context.Background()
	for name := range cl.pods() {
		p := &corev1.Pod{}
		p.Namespace, p.Name = cl.ns, name
		if err := cl.c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			cl.t.Fatal(err)
		}
	}
	eventually(cl.t, 20*time.Second, "pods of "+cl.ns+" gone", func() error {
		if n := len(cl.pods()); n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
}

// A running pod's team is its namespace's, and what it was bound as, whatever
// its labels say since: relabelled by someone the admission policy does not
// stop, and the scheduler restarted (a new runner on the same API server),
// the gang is still accounted in its team, whose next pod over quota waits,
// and its GPU time is charged to its team only. In a namespace of no team
// (--strict-tenancy=false), the team is the one the label named at the bind.
func TestRelabelledRunningPodKeepsItsTeam(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.tenancy()
	cl.pool("a", "h100", 2, 8, 2) // 16 GPUs: alpha's quota is 8, beta's 8
	s := cl.start(schedOptions{})
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		ns     string
		labels []map[string]*string // per pod of the gang
	}{
		{"team names another team", "alpha", []map[string]*string{{contract.LabelTeam: str("beta")}, {contract.LabelTeam: str("beta")}}},
		{"one pod's team changed", "alpha", []map[string]*string{{contract.LabelTeam: str("beta")}, {}}},
		{"tier changed and team removed", "alpha", []map[string]*string{{contract.LabelTier: str("research"), contract.LabelTeam: nil}, {contract.LabelTier: nil}}},
		{"gang size shrunk", "alpha", []map[string]*string{{contract.LabelGangSize: str("1")}, {contract.LabelGangSize: str("1")}}},
		{"gang split", "alpha", []map[string]*string{{contract.LabelGang: str("other")}, {contract.LabelGangSize: nil}}},
		{"placement labels", "alpha", []map[string]*string{{contract.LabelFlavor: str("a100"), contract.LabelCluster: str("mars")}, {contract.LabelRequire: str("rack")}}},
		{"namespace of no team", "jobs", []map[string]*string{{contract.LabelTeam: str("beta")}, {contract.LabelTeam: str("beta")}}},
	} {
		cl.in(tc.ns, func() {
			run := cl.submit("run", podSpec{team: "alpha", tier: "production", pods: 2, gpus: 4})
			nodes := cl.waitBound(run)
			for i, l := range tc.labels {
				cl.relabel(run[i], l)
			}
			time.Sleep(time.Second) // metered meanwhile, as the labels now say on main
			s.stop()
			s = cl.start(schedOptions{})
			cl.submit("next", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})
			cl.waitPending("next", "over quota on h100")
			if got := cl.nodesOf(run); got[0] != nodes[0] || got[1] != nodes[1] {
				t.Errorf("%s: the running gang moved from %v to %v", tc.name, nodes, got)
			}
			before := cl.metered("alpha")
			eventually(t, 10*time.Second, "alpha metered on", func() error {
				if n := cl.metered("alpha"); n <= before {
					return fmt.Errorf("alpha metered %d GPU-s, as before", n)
				}
				return nil
			})
			if n := cl.metered("beta"); n != 0 {
				t.Errorf("%s: team beta, which ran nothing, was charged %d GPU-s", tc.name, n)
			}
			cl.deleteAll()
		})
		if t.Failed() {
			t.Fatalf("%s: failed", tc.name)
		}
	}
}
