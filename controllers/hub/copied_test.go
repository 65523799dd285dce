package hub

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// TestRoutedJobReadAsCopied: a routed Job edited since (its template's team
// label to another team's, its parallelism from 2 to 1) is read as its copy
// in the worker, which runs as routed: 2 pods in ml. Where the worker
// listed no copy of that attempt, the Job is read as it says.
func TestRoutedJobReadAsCopied(t *testing.T) {
	ten := newTenancy([]allotv1.Team{{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, {ObjectMeta: metav1.ObjectMeta{Name: "other"}}},
		[]allotv1.Tier{{ObjectMeta: metav1.ObjectMeta{Name: "research"}}})
	routed := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "wide", UID: types.UID("u1")}, Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{contract.LabelTier: "research"}}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(8, resource.DecimalSI)}}}}}},
	}}
	cp := workerCopy(routed, "c0", 1, "c0-n0=2", time.Unix(1e6, 0))
	edited := routed.DeepCopy()
	edited.Spec.Parallelism = ptr.To[int32](1)
	edited.Spec.Template.Labels[contract.LabelTeam] = "other"
	for name, tc := range map[string]struct {
		listed   map[types.UID]client.Object
		wantPods int64
		wantErr  bool
	}{
		"copy listed":             {listed: map[types.UID]client.Object{"u1": cp}, wantPods: 2},
		"no copy listed":          {wantErr: true},
		"an older attempt's copy": {listed: map[types.UID]client.Object{"u1": workerCopy(routed, "c0", 2, "", time.Unix(1e6, 0))}, wantErr: true},
	} {
		h := &hubJob{job: edited, kind: jobKind{}, cluster: "c0", attempt: 1}
		h.spec, h.specErr = jobWorkload(edited, ten)
		asCopied([]*hubJob{h}, []snapshot{{name: "c0", state: Ready, byUID: tc.listed}}, ten)
		if (h.specErr != nil) != tc.wantErr || !tc.wantErr && (h.spec.Team != "ml" || h.spec.Pods != tc.wantPods || h.spec.GPUsPerPod != 8) {
			t.Errorf("%s: read as %+v, %v; want %d pods of ml (error %v)", name, h.spec, h.specErr, tc.wantPods, tc.wantErr)
		}
	}
}
