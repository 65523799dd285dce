package hub_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jscontrollers "sigs.k8s.io/jobset/pkg/controllers"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// gpuJobSet is a hub JobSet of ml: for each replicated job, replicas Jobs
// of pods pods of gpus GPUs each.
func gpuJobSet(name string, gpus int64, rjobs ...jobsetv1.ReplicatedJob) *jobsetv1.JobSet {
	js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: jobsetv1.JobSetSpec{ManagedBy: ptr.To(hub.ManagedBy)}}
	for _, rj := range rjobs {
		rj.Template.Spec.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			SchedulerName: contract.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "train", Image: "trainer", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}},
		}}
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
	}
	return js
}

func replicated(name string, replicas, pods int32) jobsetv1.ReplicatedJob {
	return jobsetv1.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: ptr.To(pods), Completions: ptr.To(pods)}}}
}

// TestJobSetRoutedAsOneGang: a JobSet on the hub is routed whole, all its
// replicated jobs' pods one gang in one worker, counted whole in its team's
// quota, its copy's pods one gang there (allot.dev/gang, gang-size: all its
// pods), pinned, fenced (on the JobSet and on the Jobs it makes there),
// its status mirrored back; a lost worker's JobSet moves no sooner than its
// fence, as a Job does. A JobSet whose pods are not alike waits, saying why.
func TestJobSetRoutedAsOneGang(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const failoverAfter = 4 * time.Second
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 3}, "west": {price: "30", nodes: 4}}, 32, failoverAfter)
	for _, e := range []*testenv.Env{hubEnv, workers["east"].env, workers["west"].env} {
		testenv.InstallJobSetCRD(t, e)
	}
	c := hubEnv.Client
	r, probe := probedRouter(t, ctx, hubEnv, c)
	probe("east", "west")
	pass := func() {
		t.Helper()
		if err := r.Pass(ctx); err != nil {
			t.Logf("pass: %v", err)
		}
	}
	get := func(name string) *jobsetv1.JobSet {
		t.Helper()
		var js jobsetv1.JobSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &js); err != nil {
			t.Fatal(err)
		}
		return &js
	}
	copyOf := func(w, name string) *jobsetv1.JobSet {
		t.Helper()
		var js jobsetv1.JobSet
		err := workers[w].env.Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &js)
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if err != nil || js.DeletionTimestamp != nil {
			return nil
		}
		return &js
	}

	// 1 leader and 2 Jobs of 1 worker, 8 GPUs each: 24 GPUs, one gang.
	if err := c.Create(ctx, gpuJobSet("train", 8, replicated("leader", 1, 1), replicated("workers", 2, 1))); err != nil {
		t.Fatal(err)
	}
	pass()
	js := get("train")
	if js.Annotations[hub.AnnotationCluster] != "east" || js.Annotations[hub.AnnotationAttempt] != "1" {
		t.Fatalf("ml/train routed to %q attempt %q (pending %q), want east 1", js.Annotations[hub.AnnotationCluster], js.Annotations[hub.AnnotationAttempt], js.Annotations[hub.AnnotationPending])
	}
	pods := 0
	for _, p := range strings.Split(js.Annotations[hub.AnnotationPlacement], ",") {
		node, n, _ := strings.Cut(p, "=")
		if !strings.HasPrefix(node, "east-") {
			t.Errorf("ml/train counted on node %s, not east's", node)
		}
		k, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("placement %q: %v", js.Annotations[hub.AnnotationPlacement], err)
		}
		pods += k
	}
	if pods != 3 {
		t.Errorf("ml/train counted as %q: want its 3 pods", js.Annotations[hub.AnnotationPlacement])
	}
	cp := copyOf("east", "train")
	if cp == nil || copyOf("west", "train") != nil {
		t.Fatalf("ml/train's copies: east %v, west %v; want east's only", cp != nil, copyOf("west", "train") != nil)
	}
	if cp.Spec.ManagedBy != nil || cp.Labels[hub.LabelHubJob] != string(js.UID) || cp.Labels[contract.LabelCluster] != "east" {
		t.Errorf("east's copy: managedBy %v, labels %v", cp.Spec.ManagedBy, cp.Labels)
	}
	fence := cp.Annotations[contract.AnnotationHubFence]
	for _, rj := range cp.Spec.ReplicatedJobs {
		l, a := rj.Template.Spec.Template.Labels, rj.Template.Annotations
		if l[contract.LabelGang] != string(js.UID) || l[contract.LabelGangSize] != "3" || l[contract.LabelCluster] != "east" {
			t.Errorf("replicated job %s's pods are labelled %v: want gang train of 3, pinned to east", rj.Name, l)
		}
		if rj.Template.Labels[hub.LabelHubJob] != string(js.UID) || a[hub.AnnotationAttempt] != "1" || a[contract.AnnotationHubFence] != fence {
			t.Errorf("replicated job %s's Jobs are labelled %v, annotated %v: want the hub JobSet's UID, attempt 1 and the fence", rj.Name, rj.Template.Labels, a)
		}
	}

	// Counted whole: 24 of ml's 32 GPUs; a second JobSet of 16 waits.
	if err := c.Create(ctx, gpuJobSet("more", 8, replicated("w", 1, 2))); err != nil {
		t.Fatal(err)
	}
	// And one whose pods are not alike waits, saying why.
	odd := gpuJobSet("odd", 8, replicated("a", 1, 1), replicated("b", 1, 1))
	odd.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = *resource.NewQuantity(4, resource.DecimalSI)
	if err := c.Create(ctx, odd); err != nil {
		t.Fatal(err)
	}
	pass()
	if p := get("more").Annotations[hub.AnnotationPending]; !strings.HasPrefix(p, "OverQuota") {
		t.Errorf("ml/more (16 GPUs beside ml/train's 24 in a quota of 32): pending %q, want OverQuota", p)
	}
	if p := get("odd").Annotations[hub.AnnotationPending]; !strings.Contains(p, "InvalidWorkload") || !strings.Contains(p, "different GPUs") {
		t.Errorf("ml/odd: pending %q, want InvalidWorkload naming the different GPUs", p)
	}

	// The Jobs the JobSet controller makes in east from the copy (made here
	// as it does: their template's labels and annotations, owned by the
	// JobSet) have their fence renewed with the copy's.
	member := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-leader-0",
		Labels: cp.Spec.ReplicatedJobs[0].Template.Labels, Annotations: cp.Spec.ReplicatedJobs[0].Template.Annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: jobsetv1.SchemeGroupVersion.String(), Kind: "JobSet", Name: "train", UID: cp.UID, Controller: ptr.To(true)}}},
		Spec: cp.Spec.ReplicatedJobs[0].Template.Spec}
	member.Spec.Template.Labels = map[string]string{contract.LabelCluster: "east"}
	if err := workers["east"].env.Client.Create(ctx, member); err != nil {
		t.Fatal(err)
	}
	time.Sleep(failoverAfter/2 + 200*time.Millisecond)
	probe("east", "west")
	pass()
	if err := workers["east"].env.Client.Get(ctx, client.ObjectKeyFromObject(member), member); err != nil {
		t.Fatal(err)
	}
	if got := member.Annotations[contract.AnnotationHubFence]; got == fence || got != copyOf("east", "train").Annotations[contract.AnnotationHubFence] {
		t.Errorf("the fence of ml/train's Job in east is %q (was %q; the copy's %q): not renewed with the copy's", got, fence, copyOf("east", "train").Annotations[contract.AnnotationHubFence])
	}
	// Not taken for a stale copy of its own: it stays.
	if member.DeletionTimestamp != nil || get("train").Annotations[hub.AnnotationCluster] != "east" {
		t.Errorf("the JobSet's Job in east is being deleted (%v), or ml/train moved (%q)", member.DeletionTimestamp, get("train").Annotations[hub.AnnotationCluster])
	}

	// The copy's status comes back to the hub.
	cp = copyOf("east", "train")
	cp.Status.ReplicatedJobsStatus = []jobsetv1.ReplicatedJobStatus{{Name: "leader", Active: 1}, {Name: "workers", Active: 2}}
	if err := workers["east"].env.Client.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	pass()
	if st := get("train").Status.ReplicatedJobsStatus; len(st) != 2 || st[1].Active != 2 {
		t.Errorf("ml/train's status on the hub: %+v, want east's copy's", st)
	}

	// east is deregistered: the JobSet moves to west, once its fence passed.
	if err := c.Delete(ctx, &allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}); err != nil {
		t.Fatal(err)
	}
	probe("east")
	end, err := time.Parse(time.RFC3339, copyOf("east", "train").Annotations[contract.AnnotationHubFence])
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for time.Until(end) > 500*time.Millisecond {
		pass()
		if get("train").Annotations[hub.AnnotationCluster] != "east" || copyOf("west", "train") != nil {
			t.Fatalf("ml/train moved %s before the fence of its copy in east", time.Until(end).Round(time.Millisecond))
		}
		checked++
		time.Sleep(200 * time.Millisecond)
	}
	if checked == 0 {
		t.Fatal("no pass before the fence: the test checked nothing")
	}
	time.Sleep(time.Until(end) + 100*time.Millisecond)
	pass()
	js = get("train")
	if js.Annotations[hub.AnnotationCluster] != "west" || js.Annotations[hub.AnnotationAttempt] != "2" {
		t.Fatalf("after the fence, ml/train is routed to %q attempt %q: want west 2", js.Annotations[hub.AnnotationCluster], js.Annotations[hub.AnnotationAttempt])
	}
	if cp := copyOf("west", "train"); cp == nil || cp.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels[contract.LabelCluster] != "west" {
		t.Error("no copy of ml/train in west pinned there")
	}

	// Completed there: it counts no more, and ml/more is routed.
	cp = copyOf("west", "train")
	cp.Status.TerminalState = string(jobsetv1.JobSetCompleted)
	cp.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1.JobSetCompleted), Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", LastTransitionTime: metav1.Now()}}
	if err := workers["west"].env.Client.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	pass()
	pass()
	if get("train").Status.TerminalState != string(jobsetv1.JobSetCompleted) {
		t.Error("ml/train's completion was not mirrored to the hub")
	}
	if cl := get("more").Annotations[hub.AnnotationCluster]; cl != "west" {
		t.Errorf("ml/more, with ml/train done, is routed to %q (pending %q): want west", cl, get("more").Annotations[hub.AnnotationPending])
	}
}

// TestJobSetRunsAsOneGangInItsWorker: the copy of a hub JobSet runs in its
// worker as one gang. The worker runs JobSet's own controller (in the test's
// process, as the worker's scheduler is) and allot's scheduler: the JobSet
// controller makes the copy's 3 Jobs, carrying the hub's fence; their pods
// (made as the Job controller would: none runs here) wait while some of the
// gang's are missing, and the hub Job says so in the worker's words; once
// all exist, all 3 bind in the worker.
func TestJobSetRunsAsOneGangInItsWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"west": {price: "10", nodes: 4}}, 32, time.Minute)
	west := workers["west"].env
	for _, e := range []*testenv.Env{hubEnv, west} {
		testenv.InstallJobSetCRD(t, e)
	}
	startWorkerScheduler(t, ctx, west, "west")
	mgr := newManager(t, west)
	if err := jscontrollers.SetupJobSetIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 JobSet's controller takes the core events recorder.
	if err := jscontrollers.NewJobSetReconciler(mgr.GetClient(), mgr.GetScheme(), mgr.GetEventRecorderFor("jobset")).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	startManager(t, ctx, mgr)

	// What JobSet's defaulting webhook sets (none runs on the hub here).
	js := gpuJobSet("train", 8, replicated("leader", 1, 1), replicated("workers", 2, 1))
	js.Spec.SuccessPolicy = &jobsetv1.SuccessPolicy{Operator: jobsetv1.OperatorAll}
	js.Spec.StartupPolicy = &jobsetv1.StartupPolicy{StartupPolicyOrder: jobsetv1.AnyOrder}
	js.Spec.Network = &jobsetv1.Network{EnableDNSHostnames: ptr.To(false)}
	c := hubEnv.Client
	if err := c.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	r := directRouter(t, ctx, hubEnv, c, "west")
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
		t.Fatal(err)
	}
	if cl := js.Annotations[hub.AnnotationCluster]; cl != "west" {
		t.Fatalf("ml/train routed to %q (pending %q), want west", cl, js.Annotations[hub.AnnotationPending])
	}

	var jobs batchv1.JobList
	testenv.Eventually(t, 30*time.Second, "the JobSet controller's 3 Jobs in west", func() error {
		if err := west.Client.List(ctx, &jobs, client.InNamespace("ml")); err != nil {
			return err
		}
		if len(jobs.Items) != 3 {
			return fmt.Errorf("%d Jobs", len(jobs.Items))
		}
		return nil
	})
	for _, j := range jobs.Items {
		if j.Labels[hub.LabelHubJob] != string(js.UID) || j.Annotations[contract.AnnotationHubFence] == "" || j.Spec.Template.Labels[contract.LabelGang] != string(js.UID) {
			t.Errorf("Job %s: labels %v, annotations %v, pod labels %v: want the hub's UID, fence and gang", j.Name, j.Labels, j.Annotations, j.Spec.Template.Labels)
		}
	}
	var pods []string
	for _, j := range jobs.Items[:2] {
		names, err := testenv.CreateJobPods(ctx, west.Client, "ml", j.Name)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, names...)
	}
	testenv.Eventually(t, 30*time.Second, "the hub saying the gang waits for its third pod", func() error {
		if err := r.Pass(ctx); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(js), js); err != nil {
			return err
		}
		if w := js.Annotations[hub.AnnotationWorkerPending]; !strings.Contains(w, "2 of 3 exist") {
			return fmt.Errorf("worker-pending %q", w)
		}
		return nil
	})
	for _, name := range pods {
		var p corev1.Pod
		if err := west.Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s before its gang's third pod exists", name, p.Spec.NodeName)
		}
	}
	names, err := testenv.CreateJobPods(ctx, west.Client, "ml", jobs.Items[2].Name)
	if err != nil {
		t.Fatal(err)
	}
	pods = append(pods, names...)
	testenv.Eventually(t, 30*time.Second, "the gang's 3 pods bound in west", func() error {
		for _, name := range pods {
			var p corev1.Pod
			if err := west.Client.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &p); err != nil {
				return err
			}
			if !strings.HasPrefix(p.Spec.NodeName, "west-") {
				return fmt.Errorf("pod %s on %q: %+v", name, p.Spec.NodeName, p.Status.Conditions)
			}
		}
		return nil
	})
}

// TestJobSetNotRoutedWhereUnserved: a worker without JobSet's CRD takes
// Jobs as before (it is not unreachable), and no JobSet: one that fits best
// there waits, saying why; pinned to a worker that serves JobSets, it goes
// there.
func TestJobSetNotRoutedWhereUnserved(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hubEnv, workers := startFleet(t, ctx, map[string]fleetSpec{"east": {price: "10", nodes: 2}, "west": {price: "30", nodes: 2}}, 32, time.Minute)
	testenv.InstallJobSetCRD(t, hubEnv)
	testenv.InstallJobSetCRD(t, workers["west"].env)
	c := hubEnv.Client
	r := directRouter(t, ctx, hubEnv, c, "east", "west")
	if err := c.Create(ctx, gpuJob("plain", 1, 8, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, gpuJobSet("set", 8, replicated("w", 1, 1))); err != nil {
		t.Fatal(err)
	}
	pinned := gpuJobSet("pinned", 8, replicated("w", 1, 1))
	pinned.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels = map[string]string{contract.LabelCluster: "west"}
	if err := c.Create(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Pass(ctx); err != nil {
			t.Logf("pass: %v", err)
		}
	}
	var j batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: "plain"}, &j); err != nil {
		t.Fatal(err)
	}
	if cl := j.Annotations[hub.AnnotationCluster]; cl != "east" {
		t.Errorf("ml/plain, a Job, routed to %q (pending %q): want east, which serves Jobs", cl, j.Annotations[hub.AnnotationPending])
	}
	for name, want := range map[string]string{"set": "", "pinned": "west"} {
		var js jobsetv1.JobSet
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ml", Name: name}, &js); err != nil {
			t.Fatal(err)
		}
		if cl := js.Annotations[hub.AnnotationCluster]; cl != want {
			t.Errorf("ml/%s routed to %q (pending %q), want %q", name, cl, js.Annotations[hub.AnnotationPending], want)
		}
		if p := js.Annotations[hub.AnnotationPending]; want == "" && !strings.Contains(p, "cluster east, where it fits, does not serve JobSets") {
			t.Errorf("ml/%s: pending %q, want it to say east does not serve JobSets", name, p)
		}
	}
}
