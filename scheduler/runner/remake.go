package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
)

// UnboundRecord is the Secret, in Options.StateNamespace, that holds the bare
// pods taken back from their nodes until they are made again: one key per
// pod UID, the pod to make as JSON. A leader that stops between deleting such
// a pod and making it again leaves it there, and the next leader makes it.
const UnboundRecord = "allot-scheduler-unbound"

// maxUnboundRecord bounds the record (a Secret holds at most 1 MiB): a pod
// that does not fit in it is not taken back (it stays bound, and its gang is
// accounted for where it runs).
const maxUnboundRecord = 768 << 10

// unboundCopy is the pod to make again in place of one taken back from its
// node: unbound, with its labels, annotations, owners and finalizers.
func unboundCopy(full *corev1.Pod) *corev1.Pod {
	again := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: full.Namespace, Name: full.Name, Labels: full.Labels, Annotations: full.Annotations,
			OwnerReferences: full.OwnerReferences, Finalizers: full.Finalizers,
		}, Spec: *full.Spec.DeepCopy()}
	again.Spec.NodeName = ""
	again.Spec.EphemeralContainers = nil // not accepted on create
	if _, ok := full.Annotations[contract.AnnotationBoundAs]; ok {
		// Unbound, it is bound as nothing yet: its next bind writes it.
		again.Annotations = maps.Clone(full.Annotations)
		delete(again.Annotations, contract.AnnotationBoundAs)
	}
	return again
}

// canRemake asks the API, with a dry run, whether it would take the pod made
// again: one it would refuse (an admission policy, a namespace the manager
// may not create pods in, a quota) is not taken back, so it is never lost.
func (r *Runner) canRemake(ctx context.Context, again *corev1.Pod) error {
	err := retryTransient(ctx, func() error { return r.client.Create(ctx, again.DeepCopy(), client.DryRunAll) })
	// A quota the pod itself fills refuses the dry run; once it is deleted,
	// the pod made again fits where it was.
	if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota") {
		return nil
	}
	return fmt.Errorf("the API would not make it again unbound: %w", err)
}

// keep writes the pod to make again under uid into the record before the
// pod is deleted. Without a StateNamespace there is no record.
func (r *Runner) keep(ctx context.Context, uid types.UID, again *corev1.Pod) error {
	if r.opts.StateNamespace == "" {
		return nil
	}
	data, err := json.Marshal(again)
	if err != nil {
		return err
	}
	return r.updateRecord(ctx, func(d map[string][]byte) error {
		size := len(data)
		for k, v := range d {
			if k != string(uid) {
				size += len(k) + len(v)
			}
		}
		if size > maxUnboundRecord {
			return fmt.Errorf("the record of pods being made again (Secret %s/%s) is full: %d bytes with this pod, at most %d", r.opts.StateNamespace, UnboundRecord, size, maxUnboundRecord)
		}
		d[string(uid)] = data
		return nil
	})
}

// forget drops uid from the record: its pod was made again, or never deleted.
func (r *Runner) forget(ctx context.Context, uid types.UID) {
	if r.opts.StateNamespace == "" {
		return
	}
	// Retried: an entry left behind for a pod made again, which then ended
	// and was deleted, would make the next leader make it once more.
	_ = r.persist(ctx, "dropping a pod made again from the record", func() error {
		return r.updateRecord(ctx, func(d map[string][]byte) error {
			delete(d, string(uid))
			return nil
		})
	}, "uid", uid)
}

// persist retries f with remakeBackoff until it succeeds or ctx ends (then it
// says so and returns ctx's error): giving up would lose a pod to make again.
func (r *Runner) persist(ctx context.Context, what string, f func() error, kv ...any) error {
	err := wait.ExponentialBackoffWithContext(ctx, remakeBackoff, func(context.Context) (bool, error) {
		if err := f(); err != nil {
			r.log.Error(err, what+"; retrying", kv...)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		r.log.Error(err, "stopped before "+what+"; the next leader does it", kv...)
	}
	return err
}

// goneOrReplaced says, from a read of its name, whether the pod of uid is no
// longer there.
func goneOrReplaced(err error, cur *corev1.Pod, uid types.UID) bool {
	return apierrors.IsNotFound(err) || (err == nil && cur.UID != uid)
}

// updateRecord applies change to the record's data, made if missing, with
// retries on conflicts (one leader writes it, from several goroutines).
func (r *Runner) updateRecord(ctx context.Context, change func(map[string][]byte) error) error {
	r.recordMu.Lock()
	defer r.recordMu.Unlock()
	key := client.ObjectKey{Namespace: r.opts.StateNamespace, Name: UnboundRecord}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var s corev1.Secret
		err := retryTransient(ctx, func() error { return r.reader.Get(ctx, key, &s) })
		if apierrors.IsNotFound(err) {
			s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
			if err := change(s.Data); err != nil {
				return err
			}
			if len(s.Data) == 0 {
				return nil
			}
			err = r.client.Create(ctx, &s)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), key.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		if err := change(s.Data); err != nil {
			return err
		}
		return r.client.Update(ctx, &s)
	})
}

// recoverUnbound makes again the bare pods a previous leader took back from
// their nodes and stopped before it made them again (their record outlives
// it). A pod that was never deleted is left as it is.
func (r *Runner) recoverUnbound(ctx context.Context) {
	if r.opts.StateNamespace == "" {
		return
	}
	var s corev1.Secret
	key := client.ObjectKey{Namespace: r.opts.StateNamespace, Name: UnboundRecord}
	// Read until it is read (or is not there): what it holds is lost otherwise.
	var found error
	if r.persist(ctx, "reading the record of pods being made again", func() error {
		found = r.reader.Get(ctx, key, &s)
		return client.IgnoreNotFound(found)
	}, "secret", key) != nil || found != nil {
		return
	}
	for uid, data := range s.Data {
		var again corev1.Pod
		if err := json.Unmarshal(data, &again); err != nil || again.Name == "" || again.Namespace == "" {
			r.log.Error(err, "a pod in the record of pods being made again cannot be read; dropped", "uid", uid)
			r.forget(ctx, types.UID(uid))
			continue
		}
		ref := podRef{ns: again.Namespace, name: again.Name, uid: types.UID(uid)}
		var cur corev1.Pod
		var err error
		if r.persist(ctx, "reading a pod a previous leader took back", func() error {
			err = r.reader.Get(ctx, client.ObjectKey{Namespace: ref.ns, Name: ref.name}, &cur)
			return client.IgnoreNotFound(err)
		}, "pod", ref.name, "namespace", ref.ns) != nil {
			return
		}
		if !goneOrReplaced(err, &cur, ref.uid) && cur.DeletionTimestamp == nil {
			r.forget(ctx, ref.uid) // never deleted: nothing to make again
			continue
		}
		r.log.Info("making again a pod a previous leader took back from its node", "pod", ref.name, "namespace", ref.ns)
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			r.remakeWhenGone(ctx, ref, &again)
		}()
	}
}

// remakeWhenGone waits until the pod taken back is gone (its finalizers, if
// any, may take a while: it is never given up on), makes it again unbound,
// and drops it from the record.
func (r *Runner) remakeWhenGone(ctx context.Context, ref podRef, again *corev1.Pod) {
	key := client.ObjectKey{Namespace: ref.ns, Name: ref.name}
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var cur corev1.Pod
		err := r.reader.Get(ctx, key, &cur)
		return goneOrReplaced(err, &cur, ref.uid), nil
	})
	if err != nil {
		r.log.Error(err, "stopped while waiting for an unbound pod to go; the next leader makes it again", "pod", ref.name, "namespace", ref.ns)
		return
	}
	if r.remake(ctx, ref, again) {
		r.forget(ctx, ref.uid)
	}
}

// remakeBackoff bounds the wait between tries to make a bare pod again.
var remakeBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// remake creates a bare pod taken back from its node again. It tries until
// the API takes it (or the pod exists again) or the runner stops: an
// admission policy refusing it for a while, or an API server under load,
// must not lose the pod. It says whether the pod was made.
func (r *Runner) remake(ctx context.Context, ref podRef, again *corev1.Pod) bool {
	tries := 0
	err := wait.ExponentialBackoffWithContext(ctx, remakeBackoff, func(ctx context.Context) (bool, error) {
		err := r.client.Create(ctx, again.DeepCopy())
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		if tries++; tries == 1 {
			r.emit(podEvent{pod: ref, kind: corev1.EventTypeWarning, reason: "RemakeFailed", action: "Unbind",
				note: fmt.Sprintf("the pod, taken back from its node, could not be made again unbound (%s); retrying until it can", quoted(err))})
		}
		r.log.Error(err, "making an unbound pod again; retrying", "pod", ref.name, "namespace", ref.ns, "tries", tries)
		return false, nil
	})
	if err != nil {
		r.log.Error(err, "stopped before an unbound pod was made again; the next leader makes it", "pod", ref.name, "namespace", ref.ns)
		return false
	}
	return true
}
