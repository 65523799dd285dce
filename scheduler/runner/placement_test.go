package runner_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// rulePods creates the pods of a workload (a gang when pods > 1) of team
// alpha with 8 GPUs each, their spec changed by rules (pod i's by rules(i, spec)).
func (cl *cluster) rulePods(name string, pods int, rules func(i int, s *corev1.PodSpec)) []string {
	cl.t.Helper()
	return cl.podsWith(name, pods, func(i int, p *corev1.Pod) { rules(i, &p.Spec) })
}

// podsWith is rulePods with the whole pod changed by change.
func (cl *cluster) podsWith(name string, pods int, change func(i int, p *corev1.Pod)) []string {
	cl.t.Helper()
	var names []string
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	for i := range pods {
		labels := map[string]string{contract.LabelTeam: "alpha", contract.LabelTier: "production"}
		pn := name
		if pods > 1 {
			labels[contract.LabelGang], labels[contract.LabelGangSize] = name, strconv.Itoa(pods)
			pn = fmt.Sprintf("%s-%d", name, i)
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: pn, Labels: labels},
			Spec: corev1.PodSpec{
				SchedulerName: contract.SchedulerName,
				Containers: []corev1.Container{{Name: "train", Image: "trainer:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{nodestate.ResourceGPU: gpus}, Limits: corev1.ResourceList{nodestate.ResourceGPU: gpus},
				}}},
			},
		}
		change(i, p)
		cl.create(p)
		names = append(names, pn)
	}
	return names
}

// TestPlacementRules: against the real API server, pods go only where
// Kubernetes' own rules let them: not on a node tainted NoSchedule or
// NoExecute they do not tolerate, only on nodes their nodeSelector and
// required node affinity match (issue 15, finding 1). A gang whose pods
// disagree on their rules, and a pod whose rules name single nodes, wait with
// the reason.
func TestPlacementRules(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 6, 8, 6)
	cl.updateNode("a-0", false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Value: "disk", Effect: corev1.TaintEffectNoSchedule})
	})
	cl.updateNode("a-1", false, func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoExecute})
	})
	cl.updateNode("a-5", false, func(n *corev1.Node) { n.Labels["example.com/fabric"] = "infiniband" })
	cl.start(schedOptions{})

	none := func(int, *corev1.PodSpec) {}
	selector := cl.rulePods("selector", 1, func(_ int, s *corev1.PodSpec) {
		s.NodeSelector = map[string]string{"example.com/fabric": "infiniband"}
	})
	if n := cl.waitBound(selector)[0]; n != "a-5" {
		t.Errorf("pod with nodeSelector example.com/fabric=infiniband bound to %s, want a-5", n)
	}
	affinity := cl.rulePods("affinity", 1, func(_ int, s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"infiniband"}}}}},
		}}}
	})
	cl.waitPending(affinity[0], "not enough healthy nodes")
	cl.finish(selector)
	if n := cl.waitBound(affinity)[0]; n != "a-5" {
		t.Errorf("pod with node affinity example.com/fabric In [infiniband] bound to %s, want a-5", n)
	}
	// Three free nodes take pods without rules: a-2, a-3, a-4; the tainted
	// a-0 and a-1 do not.
	var plain []string
	for i := range 4 {
		plain = append(plain, cl.rulePods(fmt.Sprintf("plain-%d", i), 1, none)...)
	}
	eventually(t, 20*time.Second, "three plain pods bound", func() error {
		if b := bound(cl.nodesOf(plain)); b != 3 {
			return fmt.Errorf("%d bound: %v", b, cl.nodesOf(plain))
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // many cycles: the fourth stays pending
	for _, n := range cl.nodesOf(plain) {
		if n == "a-0" || n == "a-1" {
			t.Errorf("a pod without tolerations bound to the tainted node %s (all: %v)", n, cl.nodesOf(plain))
		}
	}
	// A gang tolerating both taints takes the two tainted nodes.
	tolerant := cl.rulePods("tolerant", 2, func(_ int, s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}, {Key: "drain", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	})
	got := cl.waitBound(tolerant)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a-0", "a-1"}) {
		t.Errorf("tolerant gang bound to %v, want [a-0 a-1]", got)
	}
	// A gang whose pods disagree, and a pod selecting one node by hostname,
	// are refused with the reason.
	split := cl.rulePods("split", 2, func(i int, s *corev1.PodSpec) {
		if i == 1 {
			s.NodeSelector = map[string]string{"example.com/fabric": "infiniband"}
		}
	})
	cl.waitPending(split[0], "disagree on their placement rules")
	host := cl.rulePods("host", 1, func(_ int, s *corev1.PodSpec) {
		s.NodeSelector = map[string]string{corev1.LabelHostname: "a-2"}
	})
	cl.waitPending(host[0], "a label of single nodes")
	cl.checkNoOvercommit(8)
}

// TestClustersInOneAPIServer: nodes of two clusters behind one API server (as
// in the demo) are two clusters to the scheduler: a gang never spans them, a
// gang that fits one lands in one, and a pod labelled allot.dev/cluster runs
// in that cluster only (issue 17, finding 1).
func TestClustersInOneAPIServer(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	cluster := map[string]string{"a-0": "east", "a-1": "east", "a-2": "west", "a-3": "west"}
	for n, c := range cluster {
		cl.updateNode(n, false, func(n *corev1.Node) { n.Labels[contract.LabelCluster] = c })
	}
	cl.start(schedOptions{})

	none := func(int, *corev1.PodSpec) {}
	wide := cl.rulePods("wide", 3, none)
	cl.waitPending(wide[0], "in any one cluster")
	pair := cl.rulePods("pair", 2, none)
	got := cl.waitBound(pair)
	if cluster[got[0]] != cluster[got[1]] {
		t.Errorf("gang pair bound to %v, in two clusters", got)
	}
	other := "east"
	if cluster[got[0]] == "east" {
		other = "west"
	}
	pinned := cl.podsWith("pinned", 1, func(_ int, p *corev1.Pod) { p.Labels[contract.LabelCluster] = other })
	if n := cl.waitBound(pinned)[0]; cluster[n] != other {
		t.Errorf("pod pinned to %s bound to %s of %s", other, n, cluster[n])
	}
	lost := cl.podsWith("lost", 1, func(_ int, p *corev1.Pod) { p.Labels[contract.LabelCluster] = "mars" })
	cl.waitPending(lost[0], "in cluster mars")
	cl.checkNoOvercommit(8)
}
