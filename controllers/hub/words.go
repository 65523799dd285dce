package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/internal/plaintext"
)

// What the hub tells on its Job of the worker it is routed to: the worker
// scheduler's words about the copy (docs/scheduling.md, "The hub").
const (
	// AnnotationWorkerPending on a hub Job says why its copy waits in its
	// worker: the worker scheduler's reason for the first of the copy's pods
	// that waits, "code: message" (the message as the pod's PodScheduled
	// condition says it; the code from the newest event of the copy's
	// pods that says that message: the scheduler tells a gang's reason on
	// one of its pods). Removed once no pod of the copy
	// waits, and when the job is routed again.
	AnnotationWorkerPending = "hub.allot.dev/worker-pending"
	// AnnotationWorkerEvents on a hub Job is the worker scheduler's latest
	// events about the copy's waiting pods, newest first, one a line
	// ("POD REASON: NOTE", with "(xN)" when it was said N times), at most
	// maxWorkerEvents of them; read again each time the reason changes.
	AnnotationWorkerEvents = "hub.allot.dev/worker-events"
	// ReasonWorkerPending is the reason of the event on a hub Job when the
	// worker's reason for its copy changes (its message: a code read after
	// the message makes no second event).
	ReasonWorkerPending = "WorkerPending"
	// workerScheduler is the reporting controller of the worker
	// scheduler's events.
	workerScheduler = "allot-scheduler"
	// maxWorkerEvents bounds AnnotationWorkerEvents' lines.
	maxWorkerEvents = 5
	// maxWaitingPods bounds the waiting pods of the copies read from a
	// worker in one pass, and maxEventLists the namespaces whose events are
	// read: jobs past them are told in a later pass.
	maxWaitingPods = 2000
	maxEventLists  = 4
	maxEventsRead  = 2000
	// codeUnknown stands for the code of a reason no event read says (held
	// back by the worker's budget of events, or not written yet).
	codeUnknown = "Pending"
)

// hear reads from worker w why the copies of jobs (routed there and
// mirrored this pass) wait, and writes it on their hub Jobs: the worker
// scheduler's pending reason and its latest events. It costs one call to
// the worker a pass (the copies' pods that wait: none once they all run),
// and one more per namespace where a reason changed.
func (r *Router) hear(ctx context.Context, w *snapshot, jobs []*hubJob) error {
	byCopy := map[types.UID]*hubJob{}
	told := false
	for _, h := range jobs {
		if h.cluster != w.name {
			continue
		}
		told = told || h.job.GetAnnotations()[AnnotationWorkerPending] != ""
		if cp := w.byUID[h.job.GetUID()]; cp != nil && kindOf(cp) == h.kind && !h.kind.Finished(cp) {
			byCopy[cp.GetUID()] = h
			for _, m := range w.members[h.job.GetUID()] {
				byCopy[m.UID] = h // a JobSet's pods are its Jobs'
			}
		}
	}
	if len(byCopy) == 0 && !told {
		return nil
	}
	// Each job's first waiting pod (by name), and the names of those that wait.
	type waiting struct {
		first *corev1.Pod
		pods  map[string]bool
	}
	waits := map[*hubJob]*waiting{}
	truncated := false
	if len(byCopy) > 0 {
		var pods corev1.PodList
		err := w.client.List(ctx, &pods, client.MatchingLabels{contract.LabelCluster: w.name},
			client.MatchingFields{"spec.nodeName": "", "status.phase": string(corev1.PodPending)}, client.Limit(maxWaitingPods))
		if err != nil {
			return fmt.Errorf("listing the waiting pods of the hub's jobs in %s: %w", w.name, err)
		}
		truncated = pods.Continue != ""
		for i := range pods.Items {
			p := &pods.Items[i]
			ctl := controllerOf(p)
			h := byCopy[ctl]
			if h == nil || p.Namespace != h.job.GetNamespace() || p.DeletionTimestamp != nil {
				continue
			}
			wt := waits[h]
			if wt == nil {
				wt = &waiting{pods: map[string]bool{}}
				waits[h] = wt
			}
			wt.pods[p.Name] = true
			if wt.first == nil || p.Name < wt.first.Name {
				wt.first = p
			}
		}
	}
	// A reason that changed needs the worker's events of its namespace.
	changed := map[string][]*hubJob{}
	fresh := map[string]bool{}
	var errs []error
	for _, h := range jobs {
		if h.cluster != w.name {
			continue
		}
		wt := waits[h]
		msg := ""
		if wt != nil {
			msg = plaintext.Escape(pendingMessage(wt.first))
		}
		if msg == "" {
			// Running, finished, or not said yet: nothing to tell (unless
			// its pods were past the bound of the list).
			if h.job.GetAnnotations()[AnnotationWorkerPending] != "" && (wt != nil || !truncated) {
				errs = append(errs, r.annotate(ctx, h, AnnotationWorkerPending, ""))
			}
			continue
		}
		said := h.job.GetAnnotations()[AnnotationWorkerPending]
		if !saidAlready(said, msg) {
			changed[h.job.GetNamespace()] = append(changed[h.job.GetNamespace()], h)
			if !strings.HasPrefix(said, codeUnknown+": ") {
				fresh[h.job.GetNamespace()] = true
			}
		}
	}
	// A new reason first, then the codes not read yet, so that retries
	// never keep a change waiting.
	namespaces := slices.Collect(maps.Keys(changed))
	slices.SortFunc(namespaces, func(a, b string) int {
		if fresh[a] != fresh[b] {
			if fresh[a] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, ns := range namespaces[:min(len(namespaces), maxEventLists)] {
		var evs eventsv1.EventList
		err := w.client.List(ctx, &evs, client.InNamespace(ns), client.MatchingFields{"reportingController": workerScheduler}, client.Limit(maxEventsRead))
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the events of %s in %s: %w", ns, w.name, err))
			if unanswered(err) {
				break
			}
			continue
		}
		slices.SortStableFunc(evs.Items, func(a, b eventsv1.Event) int { return eventTime(&b).Compare(eventTime(&a)) })
		for _, h := range changed[ns] {
			wt := waits[h]
			msg := plaintext.Escape(pendingMessage(wt.first))
			code := ""
			var lines []string
			for i := range evs.Items {
				e := &evs.Items[i]
				if e.Regarding.Kind != "Pod" || !wt.pods[e.Regarding.Name] {
					continue
				}
				note := plaintext.Escape(e.Note)
				if c, m, ok := strings.Cut(note, ": "); ok && code == "" && e.Reason == corev1.PodReasonUnschedulable && sameMessage(m, msg) {
					code = c
				}
				if len(lines) < maxWorkerEvents {
					line := fmt.Sprintf("%s %s: %s", plaintext.Escape(e.Regarding.Name), plaintext.Escape(e.Reason), note)
					if e.Series != nil && e.Series.Count > 1 {
						line += fmt.Sprintf(" (x%d)", e.Series.Count)
					}
					lines = append(lines, line)
				}
			}
			if code == "" {
				code = codeUnknown // read again next pass
			}
			errs = append(errs, r.tellWorker(ctx, h, w.name, code+": "+msg, strings.Join(lines, "\n")))
		}
	}
	return errors.Join(errs...)
}

// tellWorker writes the worker's reason and events on the hub Job, and says
// so in an event.
func (r *Router) tellWorker(ctx context.Context, h *hubJob, cluster, reason, events string) error {
	reason, events = bounded(reason), bounded(events)
	before := h.job.GetAnnotations()[AnnotationWorkerPending]
	if before == reason && h.job.GetAnnotations()[AnnotationWorkerEvents] == events {
		return nil
	}
	patch := client.MergeFrom(deepCopy(h.job))
	setAnnotation(h.job, AnnotationWorkerPending, reason)
	if events == "" {
		setAnnotation(h.job, AnnotationWorkerEvents, "")
	} else {
		setAnnotation(h.job, AnnotationWorkerEvents, events)
	}
	if err := r.Client.Patch(ctx, h.job, patch); err != nil {
		return err
	}
	// One event a reason: not again when only its code, read late, is added.
	_, was, _ := strings.Cut(before, ": ")
	_, is, _ := strings.Cut(reason, ": ")
	if r.Recorder != nil && was != is {
		r.Recorder.Eventf(h.job, nil, corev1.EventTypeNormal, ReasonWorkerPending, "Route", "%s",
			apilimits.Note(fmt.Sprintf("waiting in cluster %s: %s", cluster, reason)))
	}
	return nil
}

// saidAlready says whether annotation, "code: message" as tellWorker wrote
// it (cut at its bound), says msg.
func saidAlready(annotation, msg string) bool {
	code, said, ok := strings.Cut(annotation, ": ")
	if !ok || code == codeUnknown {
		return false
	}
	if cut, ok := strings.CutSuffix(said, "…"); ok && len(annotation) >= 2<<10 {
		return strings.HasPrefix(msg, cut)
	}
	return said == msg
}

// sameMessage says whether an event's message says msg: the same, or its
// beginning where the event's note was cut at its bound (apilimits.Note).
func sameMessage(said, msg string) bool {
	if said == msg {
		return true
	}
	cut, ok := strings.CutSuffix(said, apilimits.Truncated)
	return ok && strings.HasPrefix(msg, cut)
}

// pendingMessage is the message of a pod's PodScheduled=False condition.
func pendingMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// controllerOf is the UID of the Job that controls p, if any.
func controllerOf(p *corev1.Pod) types.UID {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "Job" && o.APIVersion == batchv1.SchemeGroupVersion.String() {
			return o.UID
		}
	}
	return ""
}

// eventTime is when an event was last said.
func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case e.DeprecatedLastTimestamp.Time.After(e.CreationTimestamp.Time):
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
