package hub

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// TestJobSetWorkload: a JobSet is one gang of all its pods, or a clear
// refusal: pods not alike, a start in order or a dependency (its pods would
// wait for each other), Jobs of no pods, and more Jobs or pods than the hub
// routes, however the counts are chosen to overflow.
func TestJobSetWorkload(t *testing.T) {
	ten := newTenancy([]allotv1.Team{{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}}, []allotv1.Tier{{ObjectMeta: metav1.ObjectMeta{Name: "research"}}})
	rj := func(name string, replicas, pods int32, gpus int64) jobsetv1.ReplicatedJob {
		return jobsetv1.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{contract.LabelTier: "research"}}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}}}}
	}
	set := func(rjs ...jobsetv1.ReplicatedJob) *jobsetv1.JobSet {
		return &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "s", UID: types.UID("u")}, Spec: jobsetv1.JobSetSpec{ReplicatedJobs: rjs}}
	}
	huge := []jobsetv1.ReplicatedJob{rj("a", 1, 1, 8)}
	for range 16 {
		huge = append(huge, rj("b", 1<<30, 1<<30, 8))
	}
	inOrder := set(rj("a", 1, 1, 8), rj("b", 1, 1, 8))
	inOrder.Spec.StartupPolicy = &jobsetv1.StartupPolicy{StartupPolicyOrder: jobsetv1.InOrder}
	depends := set(rj("a", 1, 1, 8), rj("b", 1, 1, 8))
	depends.Spec.ReplicatedJobs[1].DependsOn = []jobsetv1.DependsOn{{Name: "a", Status: jobsetv1.DependencyReady}}
	otherTier := set(rj("a", 1, 1, 8), rj("b", 1, 1, 8))
	otherTier.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels[contract.LabelTier] = "prod"
	for name, tc := range map[string]struct {
		js      *jobsetv1.JobSet
		pods    int64
		wantErr string
	}{
		"leader and workers": {js: set(rj("leader", 1, 1, 8), rj("workers", 3, 2, 8)), pods: 7},
		"GPUs not alike":     {js: set(rj("a", 1, 1, 8), rj("b", 1, 1, 4)), wantErr: "request different GPUs a pod (8 and 4)"},
		"labels not alike":   {js: otherTier, wantErr: "disagree on label allot.dev/tier"},
		"in order":           {js: inOrder, wantErr: "startupPolicy InOrder"},
		"depends on":         {js: depends, wantErr: "replicated job b depends on a"},
		"Jobs of no pods":    {js: set(rj("a", 1, 1, 8), rj("b", 1000, 0, 8)), wantErr: "1000 Jobs of no pods"},
		"too many Jobs":      {js: set(rj("a", 20_000, 1, 8)), wantErr: "at most 10000 Jobs"},
		"overflowing counts": {js: set(huge...), wantErr: "more than the hub routes"},
		"no replicated jobs": {js: set(), wantErr: "no replicated jobs"},
	} {
		w, err := jobSetKind{}.Workload(tc.js, ten)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.wantErr == "" && (w.Pods != tc.pods || w.GPUsPerPod != 8 || w.Team != "ml" || w.ID != "ml/jobset/s"):
			t.Errorf("%s: read as %+v, want %d pods of 8 GPUs of ml", name, w, tc.pods)
		}
	}

	// The copy: one gang of the hub JobSet's UID and all its pods; a Job
	// template managed by the hub is handed to the worker's Job controller.
	js := set(rj("leader", 1, 1, 8), rj("workers", 3, 2, 8))
	js.Spec.ReplicatedJobs[1].Template.Spec.ManagedBy = ptr.To(ManagedBy)
	cp := jobSetKind{}.Copy(js, "west", 2, "", metav1.Now().Time).(*jobsetv1.JobSet)
	for _, r := range cp.Spec.ReplicatedJobs {
		l := r.Template.Spec.Template.Labels
		if l[contract.LabelGang] != "u" || l[contract.LabelGangSize] != "7" || r.Template.Spec.ManagedBy != nil || r.Template.Annotations[AnnotationAttempt] != "2" {
			t.Errorf("copy's %s: pod labels %v, Job managedBy %v, annotations %v", r.Name, l, r.Template.Spec.ManagedBy, r.Template.Annotations)
		}
	}
}
