package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
)

// Pods of several Jobs (a JobSet's) that name one gang and its size form one
// gang: none runs until all of them exist and fit, then all are bound at once.
func TestGangAcrossJobs(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 4, 8, 4)
	cl.start(schedOptions{})
	labels := map[string]string{contract.LabelTeam: "alpha", contract.LabelGang: "trainer", contract.LabelGangSize: "4"}
	var pods []string
	add := func(job *batchv1.Job, i int) {
		pods = append(pods, cl.jobPod(job, fmt.Sprintf("%s-%d", job.Name, i), 8, labels))
	}
	jobs := []*batchv1.Job{cl.job("leader", 2, 2), cl.job("workers", 2, 2)}
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
	job := cl.job("train", 2, 3)
	var pods []string
	add := func(i int) {
		pods = append(pods, cl.jobPod(job, fmt.Sprintf("train-%d", i), 8, map[string]string{contract.LabelTeam: "alpha"}))
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

// TestHubFence: the pods of a Job a hub copied here whose fence has passed
// (the hub lost this cluster and may have moved the job elsewhere) are not
// bound, and say why; once the hub renews the fence they are (issue 17: a
// copy never runs twice).
func TestHubFence(t *testing.T) {
	cl := newCluster(t)
	cl.tiers()
	cl.team("alpha", "", "h100", 64)
	cl.pool("a", "h100", 2, 8, 2)
	job := cl.job("copy", 2, 2)
	job.Annotations = map[string]string{contract.AnnotationHubFence: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}
	if err := cl.c.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	cl.start(schedOptions{})
	var pods []string
	for i := range 2 {
		pods = append(pods, cl.jobPod(job, fmt.Sprintf("copy-%d", i), 8, map[string]string{contract.LabelTeam: "alpha"}))
	}
	cl.waitPending(pods[0], "fence passed")
	if nodes := cl.nodesOf(pods); bound(nodes) != 0 {
		t.Fatalf("a copy past its fence was bound: %v", nodes)
	}
	if err := cl.c.Get(context.Background(), client.ObjectKeyFromObject(job), job); err != nil {
		t.Fatal(err)
	}
	job.Annotations[contract.AnnotationHubFence] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if err := cl.c.Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	cl.waitBound(pods)
}
