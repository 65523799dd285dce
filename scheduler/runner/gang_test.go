package runner_test

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/allot-dev/allot/scheduler/runner"
)

// Pods of several Jobs (a JobSet's) that name one gang and its size form one
// gang: none runs until all of them exist and fit, then all are bound at once.
func TestGangAcrossJobs(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	cl.start(schedOptions{})
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	var pods []string
	add := func(job *batchv1.Job, i int) {
		name := fmt.Sprintf("%s-%d", job.Name, i)
		cl.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name,
				Labels:          map[string]string{runner.LabelTeam: "alpha", runner.LabelGang: "trainer", runner.LabelGangSize: "4"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{SchedulerName: runner.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{runner.GPUResource: gpus}}}}},
		})
		pods = append(pods, name)
	}
	var jobs []*batchv1.Job
	for _, name := range []string{"leader", "workers"} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name}, Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), ManualSelector: ptr.To(true),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": name}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}},
		}}
		cl.create(job)
		jobs = append(jobs, job)
	}
	add(jobs[0], 0)
	add(jobs[0], 1)
	add(jobs[1], 0)
	// The leader Job's two pods alone are not the gang: nothing is bound.
	cl.waitPending(pods[0], "3 of 4 exist")
	if b := bound(cl.nodesOf(pods)); b != 0 {
		t.Fatalf("%d pods bound before the gang was whole", b)
	}
	add(jobs[1], 1)
	if nodes := cl.waitBound(pods); distinct(nodes) != 4 {
		t.Errorf("the gang's 8-GPU pods share nodes: %v", nodes)
	}
	cl.checkNoOvercommit(8)
}
