package runner

import (
	"strings"
	"testing"

	"github.com/allot-dev/allot/api/contract"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRulesAdmit: a pod's rules decide on a node's class as Kubernetes
// decides on the node: NoSchedule and NoExecute taints need a toleration
// (PreferNoSchedule and allot's health taints do not), nodeSelector and
// required node affinity must match; rules on single nodes are refused.
func TestPodRulesAdmit(t *testing.T) {
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	tolerateGPU := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}
	inIB := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fabric", Operator: corev1.NodeSelectorOpIn, Values: []string{"ib"}}}}}}}}
	for name, tc := range map[string]struct {
		pod     corev1.PodSpec
		node    *corev1.Node
		want    bool
		wantErr string
	}{
		"no rules, no taints":             {node: node(nil), want: true},
		"untolerated NoSchedule":          {node: node(nil, gpuTaint), want: false},
		"tolerated NoSchedule":            {pod: corev1.PodSpec{Tolerations: []corev1.Toleration{tolerateGPU}}, node: node(nil, gpuTaint), want: true},
		"untolerated NoExecute":           {node: node(nil, corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoExecute}), want: false},
		"PreferNoSchedule is soft":        {node: node(nil, corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}), want: true},
		"not-ready is health, not a rule": {node: node(nil, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}), want: true},
		"toleration of another value":     {pod: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "absent"}}}, node: node(nil, gpuTaint), want: false},
		"nodeSelector matches":            {pod: corev1.PodSpec{NodeSelector: map[string]string{"fabric": "ib"}}, node: node(map[string]string{"fabric": "ib"}), want: true},
		"nodeSelector does not match":     {pod: corev1.PodSpec{NodeSelector: map[string]string{"fabric": "ib"}}, node: node(map[string]string{"fabric": "roce"}), want: false},
		"affinity matches":                {pod: corev1.PodSpec{Affinity: inIB}, node: node(map[string]string{"fabric": "ib"}), want: true},
		"affinity does not match":         {pod: corev1.PodSpec{Affinity: inIB}, node: node(nil), want: false},
		"hostname selector refused":       {pod: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "n1"}}, wantErr: "a label of single nodes"},
		"topology affinity refused": {pod: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: contract.TopologyLabelPrefix + "rack", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"r1"}}}}}}}}}, wantErr: "a label of single nodes"},
		"match fields refused": {pod: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}}}, wantErr: "node fields"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := rulesOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.pod})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Admits(nodeClass(tc.node)); got != tc.want {
				t.Errorf("Admits = %v, want %v (class %s)", got, tc.want, nodeClass(tc.node))
			}
		})
	}
	// The class leaves out what names one node: two nodes of two racks, of
	// one pool and taints, are one class.
	a := node(map[string]string{corev1.LabelHostname: "a", contract.TopologyLabelPrefix + "rack": "r1", "pool": "p"}, gpuTaint)
	b := node(map[string]string{corev1.LabelHostname: "b", contract.TopologyLabelPrefix + "rack": "r2", "pool": "p"}, gpuTaint)
	if nodeClass(a) != nodeClass(b) {
		t.Errorf("classes differ: %s and %s", nodeClass(a), nodeClass(b))
	}
}
