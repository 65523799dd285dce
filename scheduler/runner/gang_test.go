package runner_test

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// A Job grown while its gang waits is submitted again at its new size: all
// its pods are bound together, none is left behind.
func TestJobResizedWhileWaiting(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 3, 8, 3)
	// Bare pods fill two nodes, so that the Job's gang waits.
	blockers := append(cl.submit("blocker-0", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8}),
		cl.submit("blocker-1", podSpec{team: "alpha", tier: "production", pods: 1, gpus: 8})...)
	cl.start(schedOptions{})
	cl.waitBound(blockers)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "train"}, Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](3), ManualSelector: ptr.To(true),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "train"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "train"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "trainer:1"}}}},
	}}
	cl.create(job)
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	var pods []string
	add := func(i int) {
		name := fmt.Sprintf("train-%d", i)
		cl.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: name, Labels: map[string]string{runner.LabelTeam: "alpha"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{SchedulerName: runner.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "trainer:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{runner.GPUResource: gpus}}}}},
		})
		pods = append(pods, name)
	}
	add(0)
	add(1)
	cl.waitPending(pods[0], "h100")
	// Grown to 3 while it waits (its controller makes the third pod), then
	// the blockers end: the gang of 3 is bound whole.
	if err := cl.c.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	job.Spec.Parallelism = ptr.To[int32](3)
	if err := cl.c.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	add(2)
	cl.waitPending(pods[2], "h100")
	cl.finish(blockers)
	if nodes := cl.waitBound(pods); distinct(nodes) != 3 {
		t.Errorf("the gang's 8-GPU pods share nodes: %v", nodes)
	}
	cl.checkNoOvercommit(8)
}
