package hub

import (
	"context"
	"crypto/sha256"
	"maps"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/fleet/nodestate"
)

// Workers is what the hub knows of its worker clusters, as the probes last
// found them: shared by the ClusterReconciler (which writes it) and the
// Router (which routes with it).
type Workers struct {
	mu sync.Mutex
	m  map[string]*worker
}

// worker is one worker cluster as last probed.
type worker struct {
	state State
	// cfg reaches the worker; nil until a probe has read its kubeconfig.
	cfg *rest.Config
	// kubeconfig fingerprints the kubeconfig cfg was made from, to notice
	// one that changed (moved, or its credentials rotated).
	kubeconfig [sha256.Size]byte
	client     client.Client
	// nodes are the worker's GPU nodes at its last successful probe, trimmed
	// to what the core reads.
	nodes []corev1.Node
	// failoverAfter is the Cluster's: how long the hub vouches for a copy.
	failoverAfter time.Duration
	// seenAt is when the last successful probe began.
	seenAt time.Time
	// gone: its Cluster was deleted while the fence of the copies made
	// there had not passed (forget); it is kept, unreachable, until then.
	gone bool
}

// State is a worker's standing for routing.
type State int

const (
	// Ready: reached at its last probe; it takes new jobs.
	Ready State = iota
	// Unreachable: not reached, within its failoverAfter; it keeps its jobs
	// and takes no new ones.
	Unreachable
	// Lost: unreachable longer than failoverAfter; its jobs go elsewhere.
	Lost
)

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{m: map[string]*worker{}} }

func (ws *Workers) get(name string) *worker {
	w := ws.m[name]
	if w == nil {
		w = &worker{state: Unreachable}
		ws.m[name] = w
	}
	return w
}

// seen records a successful probe begun at at.
func (ws *Workers) seen(name string, at time.Time, kubeconfig []byte, cfg *rest.Config, nodes []corev1.Node, failoverAfter time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.get(name)
	fp := sha256.Sum256(kubeconfig)
	if w.cfg == nil || w.kubeconfig != fp {
		w.client = nil // made again from the new configuration when used
	}
	w.state, w.cfg, w.kubeconfig, w.nodes, w.failoverAfter, w.seenAt, w.gone = Ready, cfg, fp, nodes, failoverAfter, at, false
}

// missed records a failed probe: Unreachable, or Lost once the grace passed.
func (ws *Workers) missed(name string, lost bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.get(name)
	w.state, w.gone = Unreachable, false
	if lost {
		w.state = Lost
	}
}

// fence is until when the hub vouches for the copies it made in the
// worker: failoverAfter after its last successful probe began (zero if
// never reached).
func (ws *Workers) fence(name string) time.Time {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.m[name]; w != nil && !w.seenAt.IsZero() {
		return w.seenAt.Add(w.failoverAfter)
	}
	return time.Time{}
}

// forget drops a worker whose Cluster was deleted: its jobs go elsewhere,
// once the fence of the copies the hub made there has passed (a copy the
// hub can no longer reach to delete would otherwise run beside the job's
// next attempt). Until then it stays, unreachable, and is no longer asked
// anything (snapshot).
func (ws *Workers) forget(name string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.m[name]
	if w == nil || w.seenAt.IsZero() {
		delete(ws.m, name)
		return
	}
	w.gone, w.state, w.cfg, w.client = true, Unreachable, nil, nil
}

// snapshot is the workers as one routing pass sees them.
type snapshot struct {
	name   string
	state  State
	cfg    *rest.Config
	client client.Client
	nodes  []corev1.Node
	// failoverAfter is how long the hub vouches for a copy it made here.
	failoverAfter time.Duration
	// fence is until when the hub vouches for the copies it made here:
	// failoverAfter after the last successful probe began. The worker is
	// Lost, and its jobs move, no sooner than that (ClusterReconciler.lostAt),
	// so a copy's fence always passes before its job can move, however late
	// a write to the worker (with a client made before the probes began to
	// fail) renews it.
	fence time.Time
	// copies are the hub's copies in the worker (of every kind), listed by
	// the pass; byUID indexes them by their hub object's UID. members are
	// the Jobs a copied JobSet made there, by the hub JobSet's UID: the hub
	// renews their fence with their JobSet's.
	copies  []client.Object
	byUID   map[types.UID]client.Object
	members map[types.UID][]*batchv1.Job
	// unserved are the kinds the worker does not serve (unserved), by name:
	// none is routed there, and a job of that kind the hub reads as routed
	// there keeps the routing it says.
	unserved map[string]bool
}

// listCopies lists the hub's copies in the worker: one call a kind. A
// kind other than Job that the worker does not serve is noted (unserved).
func (w *snapshot) listCopies(ctx context.Context) error {
	w.copies, w.byUID, w.members, w.unserved = nil, map[types.UID]client.Object{}, map[types.UID][]*batchv1.Job{}, map[string]bool{}
	for _, k := range kinds {
		list, err := k.List(ctx, w.client, client.HasLabels{LabelHubJob})
		if err != nil && k != kinds[0] && unserved(err) {
			w.unserved[k.Name()] = true
			continue
		}
		if err != nil {
			return err
		}
		for _, cp := range list {
			uid := types.UID(cp.GetLabels()[LabelHubJob])
			if j, ok := cp.(*batchv1.Job); ok && jobSetMember(j) {
				w.members[uid] = append(w.members[uid], j)
				continue
			}
			w.copies = append(w.copies, cp)
			w.byUID[uid] = cp
		}
	}
	return nil
}

// snapshot returns the workers by name as of now (a worker whose Cluster was
// deleted until its copies' fence passes); newClient makes a worker's client
// the first time it is needed.
func (ws *Workers) snapshot(now time.Time, newClient func(*rest.Config) (client.Client, error)) ([]snapshot, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []snapshot
	for _, name := range slices.Sorted(maps.Keys(ws.m)) {
		w := ws.m[name]
		if w.gone && !now.Before(w.seenAt.Add(w.failoverAfter)) {
			delete(ws.m, name)
			continue
		}
		if w.cfg != nil && w.client == nil {
			c, err := newClient(w.cfg)
			if err != nil {
				return nil, err
			}
			w.client = c
		}
		out = append(out, snapshot{name: name, state: w.state, cfg: w.cfg, client: w.client, nodes: w.nodes, failoverAfter: w.failoverAfter, fence: w.seenAt.Add(w.failoverAfter)})
	}
	return out, nil
}

// trimNode keeps of a node what the core reads: name, labels, the agent's
// count of healthy GPUs, taints and
// unschedulable, allocatable, capacity and conditions.
func trimNode(n *corev1.Node) corev1.Node {
	var t corev1.Node
	t.Name, t.Labels = n.Name, n.Labels
	if v, ok := n.Annotations[nodestate.AnnotationHealthyGPUs]; ok {
		t.Annotations = map[string]string{nodestate.AnnotationHealthyGPUs: v}
	}
	t.Spec.Taints, t.Spec.Unschedulable = n.Spec.Taints, n.Spec.Unschedulable
	t.Status.Allocatable, t.Status.Capacity, t.Status.Conditions = n.Status.Allocatable, n.Status.Capacity, n.Status.Conditions
	return t
}
