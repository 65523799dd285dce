package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
)

// kind is what the router needs of a kind of object it routes: a hub
// object whose spec.managedBy is ManagedBy, run in one worker as one gang
// by a copy of it there (docs/scheduling.md, "What the hub routes").
type kind interface {
	// Name is the kind's name, as in its objects' apiVersion/kind.
	Name() string
	// New is an empty object of the kind.
	New() client.Object
	// List lists the kind's objects.
	List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]client.Object, error)
	// Managed says whether the hub routes o.
	Managed(o client.Object) bool
	// Workload reads o as the core's workload.
	Workload(o client.Object, ten *tenancy) (scheduler.Workload, error)
	// Copy is o as worker cluster runs it (see workerCopy).
	Copy(o client.Object, cluster string, attempt int, placement string, fence time.Time) client.Object
	// Finished says whether o completed or failed.
	Finished(o client.Object) bool
	// TakeStatus sets dst's status to src's, and says whether it changed.
	TakeStatus(dst, src client.Object) bool
}

// kinds are the kinds the hub routes, in the order a pass reads them.
var kinds = []kind{jobKind{}, jobSetKind{}}

// kindOf is the kind of o (one of kinds).
func kindOf(o client.Object) kind {
	if _, ok := o.(*jobsetv1.JobSet); ok {
		return jobSetKind{}
	}
	return jobKind{}
}

// unserved says whether err, listing a kind in a worker, says the worker
// serves none of it: no CRD, or no right to read it (a worker whose role
// predates the kind). The hub routes that kind elsewhere.
func unserved(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
}

// objects are a list's items as objects.
func objects[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// byHub says whether a spec.managedBy hands its object to the hub.
func byHub(m *string) bool { return m != nil && *m == ManagedBy }

// jobKind is batch/v1 Job: its pods are its gang (its parallelism, at most
// its completions).
type jobKind struct{}

func (jobKind) Name() string       { return "Job" }
func (jobKind) New() client.Object { return &batchv1.Job{} }

func (jobKind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]client.Object, error) {
	var l batchv1.JobList
	if err := c.List(ctx, &l, opts...); err != nil {
		return nil, err
	}
	return objects(l.Items), nil
}

func (jobKind) Managed(o client.Object) bool {
	return byHub(o.(*batchv1.Job).Spec.ManagedBy)
}

func (jobKind) Workload(o client.Object, ten *tenancy) (scheduler.Workload, error) {
	return jobWorkload(o.(*batchv1.Job), ten)
}

func (jobKind) Copy(o client.Object, cluster string, attempt int, placement string, fence time.Time) client.Object {
	return workerCopy(o.(*batchv1.Job), cluster, attempt, placement, fence)
}

func (jobKind) Finished(o client.Object) bool { return finished(o.(*batchv1.Job)) }

func (jobKind) TakeStatus(dst, src client.Object) bool {
	d, s := dst.(*batchv1.Job), src.(*batchv1.Job)
	if statusEqual(&d.Status, &s.Status) {
		return false
	}
	d.Status = *s.Status.DeepCopy()
	return true
}

// jobSetKind is JobSet (jobset.x-k8s.io/v1alpha2): the pods of all its
// replicated jobs are one gang, in one worker. Its pods must be alike (the
// same GPUs, team, tier and placement labels), as a gang's are.
type jobSetKind struct{}

func (jobSetKind) Name() string       { return "JobSet" }
func (jobSetKind) New() client.Object { return &jobsetv1.JobSet{} }

func (jobSetKind) List(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]client.Object, error) {
	var l jobsetv1.JobSetList
	if err := c.List(ctx, &l, opts...); err != nil {
		return nil, err
	}
	return objects(l.Items), nil
}

func (jobSetKind) Managed(o client.Object) bool {
	return byHub(o.(*jobsetv1.JobSet).Spec.ManagedBy)
}

// maxReplicatedJobs bounds the replicated jobs of a JobSet the hub reads.
const maxReplicatedJobs = 64

// The labels a JobSet's pod templates must agree on: they make the
// workload, as one pod's do.
var gangLabels = []string{contract.LabelTeam, contract.LabelTier, contract.LabelRequire, contract.LabelPrefer, contract.LabelFlavor, contract.LabelCluster}

func (jobSetKind) Workload(o client.Object, ten *tenancy) (scheduler.Workload, error) {
	js := o.(*jobsetv1.JobSet)
	rjs := js.Spec.ReplicatedJobs
	w := scheduler.Workload{ID: jobSetID(js)}
	switch {
	case len(rjs) == 0:
		return w, errors.New("the JobSet has no replicated jobs: nothing to run")
	case len(rjs) > maxReplicatedJobs:
		return w, fmt.Errorf("the JobSet has %d replicated jobs, more than the hub routes (%d)", len(rjs), maxReplicatedJobs)
	case js.Spec.StartupPolicy != nil && js.Spec.StartupPolicy.StartupPolicyOrder == jobsetv1.InOrder:
		return w, errors.New("startupPolicy InOrder: the hub routes a JobSet as one gang, whose pods bind together; in order, its later Jobs would wait for pods that wait for them (use AnyOrder)")
	}
	for _, rj := range rjs {
		if len(rj.DependsOn) > 0 {
			return w, fmt.Errorf("replicated job %s depends on %s: the hub routes a JobSet as one gang, whose pods bind together; a Job made only once another is ready would never be (drop dependsOn)", rj.Name, rj.DependsOn[0].Name)
		}
	}
	// The workload of its first replicated job, as a Job's; the others
	// must agree with it, and add their pods.
	first := jobOf(js, 0)
	w, err := jobWorkload(first, ten)
	w.ID = jobSetID(js)
	if err != nil {
		return w, fmt.Errorf("replicated job %s: %w", rjs[0].Name, err)
	}
	for i := range rjs {
		j := jobOf(js, i)
		for _, l := range gangLabels {
			if a, b := first.Spec.Template.Labels[l], j.Spec.Template.Labels[l]; a != b {
				return w, fmt.Errorf("replicated jobs %s and %s disagree on label %s (%q and %q): a JobSet's pods are one gang, and alike", rjs[0].Name, rjs[i].Name, l, a, b)
			}
		}
		if g := runner.PodGPUs(&corev1.Pod{Spec: j.Spec.Template.Spec}); g != w.GPUsPerPod {
			return w, fmt.Errorf("replicated jobs %s and %s request different GPUs a pod (%d and %d): a JobSet's pods are one gang, and alike", rjs[0].Name, rjs[i].Name, w.GPUsPerPod, g)
		}
	}
	w.Pods, err = jobSetPods(js)
	return w, err
}

// maxJobSetJobs bounds the Jobs a routed JobSet makes in its worker (the
// sum of its replicated jobs' replicas).
const maxJobSetJobs = 10_000

// jobSetPods counts a JobSet's pods: each replicated job's replicas times
// its Job's parallelism (at most its completions), bounded.
func jobSetPods(js *jobsetv1.JobSet) (int64, error) {
	var n, jobs int64
	for _, rj := range js.Spec.ReplicatedJobs {
		pods := int64(1)
		if p := rj.Template.Spec.Parallelism; p != nil {
			pods = int64(*p)
		}
		if c := rj.Template.Spec.Completions; c != nil && int64(*c) < pods {
			pods = int64(*c)
		}
		switch {
		case rj.Replicas < 0:
			return 0, fmt.Errorf("replicated job %s: %d replicas", rj.Name, rj.Replicas)
		case rj.Replicas > 0 && pods < 1:
			return 0, fmt.Errorf("replicated job %s: %d Jobs of no pods (parallelism or completions 0): nothing to run", rj.Name, rj.Replicas)
		}
		// Both are int32: their product fits; the sums are bounded at each step.
		jobs += int64(rj.Replicas)
		n += int64(rj.Replicas) * pods
		if jobs > maxJobSetJobs || n > scheduler.MaxPods {
			return 0, fmt.Errorf("the JobSet makes more than the hub routes (at most %d Jobs and %d pods): replicated job %s brings it to %d Jobs, %d pods", maxJobSetJobs, scheduler.MaxPods, rj.Name, jobs, n)
		}
	}
	if n < 1 {
		return 0, errors.New("the JobSet's replicated jobs have no pods: nothing to run")
	}
	return n, nil
}

// jobSetID keeps a JobSet apart from a Job of its name.
func jobSetID(js *jobsetv1.JobSet) scheduler.WorkloadID {
	return scheduler.WorkloadID(js.Namespace + "/jobset/" + js.Name)
}

// jobOf is the JobSet's i-th replicated job as a Job of its namespace,
// created with it.
func jobOf(js *jobsetv1.JobSet, i int) *batchv1.Job {
	t := &js.Spec.ReplicatedJobs[i].Template
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: js.Name, CreationTimestamp: js.CreationTimestamp, Labels: t.Labels}, Spec: t.Spec}
}

// Copy is the JobSet as the worker runs it, as workerCopy makes a Job's.
// Its replicated jobs' Jobs carry what the worker's scheduler reads on a
// copy's Job (the hub Job's UID, the attempt and the fence: the hub renews
// it on them too, as on the JobSet); their pods are pinned to the worker and
// are one gang (contract.LabelGang: the hub JobSet's UID, LabelGangSize: all
// its pods).
func (jobSetKind) Copy(o client.Object, cluster string, attempt int, placement string, fence time.Time) client.Object {
	js := o.(*jobsetv1.JobSet)
	cp := &jobsetv1.JobSet{ObjectMeta: copyMeta(js, cluster, attempt, placement, fence)}
	cp.Spec = *js.Spec.DeepCopy()
	cp.Spec.ManagedBy, cp.Spec.Suspend = nil, nil
	size := ""
	if n, err := jobSetPods(js); err == nil {
		size = strconv.FormatInt(n, 10)
	}
	for i := range cp.Spec.ReplicatedJobs {
		t := &cp.Spec.ReplicatedJobs[i].Template
		t.Labels = maps.Clone(t.Labels)
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[LabelHubJob] = string(js.UID)
		t.Labels[contract.LabelCluster] = cluster
		t.Annotations = maps.Clone(t.Annotations)
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[AnnotationAttempt] = cp.Annotations[AnnotationAttempt]
		t.Annotations[contract.AnnotationHubFence] = cp.Annotations[contract.AnnotationHubFence]
		if byHub(t.Spec.ManagedBy) {
			t.Spec.ManagedBy = nil // the worker's Job controller runs its Jobs
		}
		labels := map[string]string{}
		for k, v := range t.Spec.Template.Labels {
			if !generatedLabel(k) {
				labels[k] = v
			}
		}
		labels[contract.LabelCluster] = cluster
		labels[contract.LabelGang] = string(js.UID) // no other gang's in the worker
		if size != "" {
			labels[contract.LabelGangSize] = size
		}
		t.Spec.Template.Labels = labels
	}
	return cp
}

func (jobSetKind) Finished(o client.Object) bool {
	js := o.(*jobsetv1.JobSet)
	if js.Status.TerminalState != "" {
		return true
	}
	return slices.ContainsFunc(js.Status.Conditions, func(c metav1.Condition) bool {
		return (c.Type == string(jobsetv1.JobSetCompleted) || c.Type == string(jobsetv1.JobSetFailed)) && c.Status == metav1.ConditionTrue
	})
}

func (jobSetKind) TakeStatus(dst, src client.Object) bool {
	d, s := dst.(*jobsetv1.JobSet), src.(*jobsetv1.JobSet)
	if jobSetStatusEqual(&d.Status, &s.Status) {
		return false
	}
	d.Status = *s.Status.DeepCopy()
	return true
}

func jobSetStatusEqual(a, b *jobsetv1.JobSetStatus) bool {
	if a.Restarts != b.Restarts || a.TerminalState != b.TerminalState || len(a.Conditions) != len(b.Conditions) || len(a.ReplicatedJobsStatus) != len(b.ReplicatedJobsStatus) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status {
			return false
		}
	}
	return slices.Equal(a.ReplicatedJobsStatus, b.ReplicatedJobsStatus)
}

// copyMeta is the metadata of a hub object's copy in a worker: its
// namespace, name and labels (not those the API server set), the hub
// object's UID, the worker, the attempt, the placement and the fence.
func copyMeta(o client.Object, cluster string, attempt int, placement string, fence time.Time) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), Labels: map[string]string{}, Annotations: map[string]string{}}
	for k, v := range o.GetLabels() {
		if !generatedLabel(k) {
			m.Labels[k] = v
		}
	}
	m.Labels[LabelHubJob] = string(o.GetUID())
	m.Labels[contract.LabelCluster] = cluster
	m.Annotations[AnnotationAttempt] = strconv.Itoa(attempt)
	if placement != "" {
		m.Annotations[AnnotationPlacement] = placement
	}
	m.Annotations[contract.AnnotationHubFence] = fence.UTC().Format(fenceLayout)
	return m
}

// jobSetMember says whether j was made by a JobSet (its controller).
func jobSetMember(j *batchv1.Job) bool {
	c := metav1.GetControllerOf(j)
	return c != nil && c.Kind == "JobSet" && c.APIVersion == jobsetv1.SchemeGroupVersion.String()
}

// setAnnotation sets o's annotation k to v ("" removes it).
func setAnnotation(o client.Object, k, v string) {
	a := o.GetAnnotations()
	if v == "" {
		delete(a, k)
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// deepCopy copies o.
func deepCopy(o client.Object) client.Object { return o.DeepCopyObject().(client.Object) }
