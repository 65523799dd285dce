package hub

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler"
)

// benchFleet is clusters workers of nodes 8-GPU nodes each (racks of 16, in
// pools at three prices), 50 teams of one cohort with the fleet's GPUs as
// quota, running routed jobs on half the GPUs and pending as many new jobs
// (single pods of 1-8 GPUs and gangs of 2-8 whole nodes).
func benchFleet(clusters, nodes, pending int) (scheduler.Config, []snapshot, []allotv1.Pool, []*hubJob) {
	rng := rand.New(rand.NewPCG(1, 2))
	var workers []snapshot
	var pools []allotv1.Pool
	var running []*hubJob
	for c := range clusters {
		name := fmt.Sprintf("c%d", c)
		pool := allotv1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: allotv1.PoolSpec{Cluster: name, Flavor: "h100", GPUsPerNode: 8,
			Price:    allotv1.Price{OnDemandPerNodeHour: allotv1.Decimal(fmt.Sprint(20 + 10*(c%3)))},
			Topology: &allotv1.Topology{Levels: []allotv1.TopologyLevel{{Name: "rack"}}}}}
		pools = append(pools, pool)
		w := snapshot{name: name, state: Ready}
		for i := range nodes {
			n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-n%d", name, i), Labels: map[string]string{
				contract.LabelPool: name, contract.TopologyLabelPrefix + "rack": fmt.Sprintf("r%d", i/16)}}}
			n.Status.Allocatable = corev1.ResourceList{nodestate.ResourceGPU: *resource.NewQuantity(8, resource.DecimalSI)}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			w.nodes = append(w.nodes, n)
			if i%2 == 0 {
				// Half the nodes run a routed job of one whole node.
				running = append(running, benchJob(fmt.Sprintf("run-%s-%d", name, i), rng.IntN(50), 1, 8, name, n.Name+"=1"))
			}
		}
		workers = append(workers, w)
	}
	cfg := scheduler.Config{Cohorts: []scheduler.Cohort{{Name: "all"}}, Tiers: []scheduler.Tier{{Name: "research", Priority: 100}}}
	for t := range 50 {
		cfg.Teams = append(cfg.Teams, scheduler.Team{Name: scheduler.TeamName(fmt.Sprintf("t%d", t)), Cohort: "all", Weight: 1,
			Quota: map[scheduler.Flavor]scheduler.Quota{"h100": {Nominal: scheduler.GPUs(clusters * nodes * 8 / 50)}}})
	}
	jobs := running
	for i := range pending {
		pods, gpp := int32(1), int64(1+rng.IntN(8))
		if rng.IntN(5) == 0 {
			pods, gpp = int32(2+rng.IntN(7)), 8
		}
		jobs = append(jobs, benchJob(fmt.Sprintf("new-%d", i), rng.IntN(50), pods, gpp, "", ""))
	}
	return cfg, workers, pools, jobs
}

func benchJob(name string, team int, pods int32, gpp int64, cluster, placement string) *hubJob {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("t%d", team), Name: name,
		Annotations: map[string]string{AnnotationCluster: cluster, AnnotationPlacement: placement}}}
	return &hubJob{job: j, kind: jobKind{}, cluster: cluster, attempt: 1, placement: placement, spec: scheduler.Workload{ID: scheduler.WorkloadID(j.Namespace + "/" + name),
		Team: scheduler.TeamName(j.Namespace), Tier: "research", Pods: int64(pods), GPUsPerPod: gpp, Submitted: time.Unix(int64(len(name)), 0)}}
}

// BenchmarkHubDecide is one routing pass of the hub (decide: the core built
// from the workers' nodes, the routed jobs counted, the waiting ones routed)
// at 10 clusters x 1,000 nodes, and the same fleet as one cluster: the cost
// the hub adds per decision is the first against the second.
func BenchmarkHubDecide(b *testing.B) {
	for _, c := range []struct{ clusters, nodes int }{{1, 10_000}, {10, 1_000}} {
		b.Run(fmt.Sprintf("clusters=%d/nodes=%d", c.clusters, c.nodes), func(b *testing.B) {
			cfg, workers, pools, jobs := benchFleet(c.clusters, c.nodes, 2_000)
			var routedN int
			for b.Loop() {
				for _, h := range jobs {
					if h.job.GetAnnotations()[AnnotationCluster] == "" {
						h.cluster = ""
					}
				}
				d, err := decide(cfg, scheduler.DefaultOptions(), workers, pools, jobs, time.Unix(1e6, 0))
				if err != nil {
					b.Fatal(err)
				}
				if len(d.recounted) > 0 {
					b.Fatalf("%d routed jobs not counted on their nodes", len(d.recounted))
				}
				routedN = len(d.routes)
			}
			if routedN == 0 {
				b.Fatal("nothing routed")
			}
			b.ReportMetric(float64(routedN), "routed/pass")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(routedN), "ns/decision")
		})
	}
}
