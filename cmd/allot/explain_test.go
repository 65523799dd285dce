package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
)

// explain --sim says why a job of a simulation never ran, and where one ran.
func TestExplainSim(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"sim", "../../examples", "--workload", "../../examples/workloads/mixed.csv", "-o", "json"}, &out, &errb); code != 0 {
		t.Fatalf("sim exited %d: %s", code, errb.String())
	}
	report := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(report, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var rep sim.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var never, ran *sim.JobReport
	for i, j := range rep.Jobs {
		if j.Start == nil && j.ReasonCode == "OverQuota" && never == nil {
			never = &rep.Jobs[i]
		}
		if j.Start != nil && ran == nil {
			ran = &rep.Jobs[i]
		}
	}
	if never == nil || ran == nil {
		t.Fatal("the example workload has no over-quota job or no job that ran")
	}
	out.Reset()
	if code := run([]string{"explain", "--sim", report, never.ID}, &out, &errb); code != 0 {
		t.Fatalf("explain exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"job " + never.ID + ": team " + never.Team, "never ran", "why:   " + never.Reason, "what it means: The team's quota"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain of %s lacks %q:\n%s", never.ID, want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"explain", "--sim", report, ran.ID}, &out, &errb); code != 0 {
		t.Fatalf("explain exited %d", code)
	}
	if !strings.Contains(out.String(), "started at") || !strings.Contains(out.String(), ran.Nodes[0]) {
		t.Errorf("explain of %s does not say where it ran:\n%s", ran.ID, out.String())
	}
	errb.Reset()
	if code := run([]string{"explain", "--sim", report, "no-such-job"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "no-such-job is not in") {
		t.Errorf("unknown job: exit %d, %q", code, errb.String())
	}
}

// explain in the cluster reads the reason the scheduler wrote on a pending
// gang's pods (condition and event) and says where a Job's pods run.
func TestExplainCluster(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nlp"}}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		q := *resource.NewQuantity(8, resource.DecimalSI)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "nlp", Name: name, Labels: labels},
			Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: q}}}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gang := map[string]string{contract.LabelTeam: "nlp", contract.LabelTier: "research", contract.LabelGang: "pretrain", contract.LabelGangSize: "2"}
	const msg = "over quota on h100-80gb: requests 16 GPUs, 8 available to the team, limit 64 (nominal + borrowing limit)"
	for _, name := range []string{"pretrain-0", "pretrain-1"} {
		p := pod(name, gang)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "nlp", Name: name + ".1"}, EventTime: metav1.NewMicroTime(time.Now()),
			ReportingController: "allot-scheduler", ReportingInstance: "allot-scheduler-0", Action: "Schedule", Type: corev1.EventTypeWarning,
			Reason: corev1.PodReasonUnschedulable, Note: "OverQuota: " + msg,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "nlp", Name: name, UID: p.UID}}
		if err := c.Create(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	solo := pod("eval", map[string]string{contract.LabelTeam: "nlp"})
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "nlp", Name: "eval"}, Target: corev1.ObjectReference{Kind: "Node", Name: "h100-3"}}
	if err := c.SubResource("binding").Create(ctx, solo, b); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := run([]string{"explain", "gang/pretrain", "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != 0 {
		t.Fatalf("explain exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"gang/pretrain in namespace nlp: team nlp, tier research, 2 pod(s) of 8 GPUs", "pending: 0 of 2 pods bound", "why:   " + msg, "what it means: The team's quota"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain gang lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"explain", "eval", "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != 0 {
		t.Fatalf("explain exited %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "running: eval on h100-3") {
		t.Errorf("explain of a bound pod:\n%s", out.String())
	}
	errb.Reset()
	if code := run([]string{"explain", "job/none", "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "has no pods") {
		t.Errorf("a job without pods: exit %d, %q", code, errb.String())
	}

	// On a hub: a Job it routed (after a failover), and one that waits.
	hubJob := func(name string, annotations map[string]string) {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "nlp", Name: name, Annotations: annotations}, Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(hub.ManagedBy),
			Template:  corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
		}}
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	const why = "routed to east: the cheapest cluster where 16 GPUs of h100 fit now, then the best fit ($1.25 per GPU-hour, 40 of 48 GPUs free); not west: lost"
	hubJob("finetune", map[string]string{hub.AnnotationCluster: "east", hub.AnnotationAttempt: "2", hub.AnnotationWhy: why})
	hubJob("sweep", map[string]string{hub.AnnotationPending: "OverQuota: over quota on h100: requests 16 GPUs; clusters: east 8 of 48 h100 GPUs free ($1.25 per GPU-hour)"})
	// Routed, and waiting in its worker: the hub's decision and the worker's
	// words together (what a worker wrote is printed escaped).
	hubJob("pretrain", map[string]string{hub.AnnotationCluster: "east", hub.AnnotationAttempt: "1", hub.AnnotationWhy: why,
		hub.AnnotationWorkerPending: "OverQuota: over quota on h100: requests 16 GPUs, 8 available to the team\x1b[2J",
		hub.AnnotationWorkerEvents:  "pretrain-1 Unschedulable: OverQuota: over quota on h100 (x3)\npretrain-0 Unschedulable: WaitingForGang: 1 of 2 exist"})
	for job, wants := range map[string][]string{
		"finetune": {"a Job of the fleet's hub", "routed to cluster east (attempt 2)", "why:   " + why, "routed 2 times"},
		"pretrain": {"routed to cluster east (attempt 1)", "why:   " + why, "waiting in east: OverQuota: over quota on h100: requests 16 GPUs, 8 available to the team\\x1b[2J\n",
			"what it means: The team's quota", "east's scheduler said (newest first):\n    pretrain-1 Unschedulable: OverQuota: over quota on h100 (x3)\n    pretrain-0 Unschedulable"},
		"sweep": {"pending: not routed to any cluster yet", "why:   OverQuota: over quota", "east 8 of 48 h100 GPUs free", "what it means: The team's quota"},
	} {
		out.Reset()
		if code := run([]string{"explain", "job/" + job, "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != 0 {
			t.Fatalf("explain job/%s exited %d: %s", job, code, errb.String())
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("explain job/%s lacks %q:\n%s", job, want, out.String())
			}
		}
	}

	// A JobSet of the hub: its routing, and its Jobs' mirrored status.
	errb.Reset()
	if code := run([]string{"explain", "jobset/train", "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "has no pods") {
		t.Errorf("a JobSet where JobSets are not served: exit %d, %q", code, errb.String())
	}
	testenv.InstallJobSetCRD(t, env)
	js := &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "nlp", Name: "train", Annotations: map[string]string{hub.AnnotationCluster: "east", hub.AnnotationAttempt: "1", hub.AnnotationWhy: why,
		hub.AnnotationWorkerPending: "WaitingForGang: waiting for the gang's pods: 2 of 3 exist"}},
		Spec: jobsetv1.JobSetSpec{ManagedBy: ptr.To(hub.ManagedBy), ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "workers", Replicas: 2, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}}}}}
	if err := c.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	js.Status.ReplicatedJobsStatus = []jobsetv1.ReplicatedJobStatus{{Name: "workers", Active: 2, Ready: 1}}
	if err := c.Status().Update(ctx, js); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"explain", "jobset/train", "-n", "nlp", "--kubeconfig", kubeconfig}, &out, &errb); code != 0 {
		t.Fatalf("explain jobset/train exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"jobset/train in namespace nlp: a JobSet of the fleet's hub", "routed to cluster east (attempt 1), where it runs as a copy of this JobSet", "why:   " + why,
		"status (mirrored from east): Jobs: 2 active (1 ready), 0 succeeded, 0 failed", "waiting in east: WaitingForGang: waiting for the gang's pods: 2 of 3 exist", "allot explain jobset/train -n nlp"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain jobset/train lacks %q:\n%s", want, out.String())
		}
	}
}

// TestExplainSimWithoutWait: a report whose job that ran has no wait_s (a
// hand-made or older report) is explained, not a crash (it was a nil
// dereference).
func TestExplainSimWithoutWait(t *testing.T) {
	report := filepath.Join(t.TempDir(), "sim.json")
	const rep = `{"jobs": [{"id": "j1", "team": "nlp", "tier": "research", "gpus": 8, "submit": 10, "start": 25, "end": 40, "nodes": ["n-0"]}]}`
	if err := os.WriteFile(report, []byte(rep), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := allot(t, nil, "explain", "--sim", report, "j1")
	if code != 0 || !strings.Contains(out, "started at 25s after waiting 15s, on n-0") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSlurmCodesAreAllots: every reason allot explain slurm/ID gives is one
// of the scheduler's, with its advice.
func TestSlurmCodesAreAllots(t *testing.T) {
	for _, reason := range []string{"AssocGrpGRES", "QOSGrpGRES", "Resources", "Priority", "ReqNodeNotAvail", "None", "Dependency"} {
		e := slurm.Explain(slurm.Job{State: "PENDING", Reason: reason}, nil, nil)
		if e.Code != "" && scheduler.ReasonCode(e.Code).Advice() == "" {
			t.Errorf("%s: %q is no reason of the scheduler's", reason, e.Code)
		}
	}
}
