package pool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/schema"
)

// DefaultRecheck is how often a pool waiting for a gang to leave a lost
// node is looked at again: pods leaving a node do not reconcile its Pool.
const DefaultRecheck = time.Minute

// repair runs the pool's repair rules (fleet/elastic) on its nodes, keeps
// their state on the Pool's status, cordons retired nodes and records an
// event per action. It returns when to look again (0: when something
// changes).
func (r *Reconciler) repair(ctx context.Context, pool *allotv1.Pool, nodes []corev1.Node) (time.Duration, error) {
	spec := pool.Spec.Repair
	if spec == nil {
		pool.Status.Repair = nil
		r.Metrics.forget(pool.Name)
		return 0, nil
	}
	now := r.now()
	st := stateFromStatus(pool.Status.Repair)
	named := schema.Provider(pool.Spec.Provider).NamesNodes()
	if named {
		// In index order: the module removes the highest seats first.
		slices.SortStableFunc(nodes, func(a, b corev1.Node) int {
			i, _ := fleet.NodeIndex(schema.PoolName(pool.Name), a.Name)
			j, _ := fleet.NodeIndex(schema.PoolName(pool.Name), b.Name)
			return cmp.Compare(i, j)
		})
	}
	// A retirement on record stands only if the Node bears the manager's
	// mark (or is gone): the status alone retires no node.
	marked := map[string]bool{}
	for i := range nodes {
		marked[nodes[i].Name] = nodes[i].Annotations[contract.AnnotationRetired] != ""
	}
	recorded := map[string]bool{}
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		if m, there := marked[ns.Name]; ns.Retired && there && !m {
			ns.Retired, ns.Kept = false, false
		}
		recorded[ns.Name] = true
	}
	in := make([]elastic.Node, 0, len(nodes))
	// Whether a gang runs on a node matters for nodes with a record (lost,
	// retired, failing) and, while replacements are held, for every node
	// (giving one back).
	for i := range nodes {
		c := nodestate.Read(&nodes[i])
		n := elastic.Node{Name: nodes[i].Name, Usable: c.Usable, HealthyGPUs: c.HealthyGPUs,
			NotReady: c.Reason == nodestate.ReasonNotReady, Created: nodes[i].CreationTimestamp.Time}
		if !c.Usable || c.HealthyGPUs < pool.Spec.GPUsPerNode || recorded[n.Name] || st.Replacements > 0 {
			busy, err := r.busy(ctx, n.Name)
			if err != nil {
				return 0, err
			}
			n.Busy = busy
		}
		in = append(in, n)
	}
	p := elastic.Pool{Fixed: pool.Spec.NodesTarget, Spare: pool.Spec.SpareNodes, Max: pool.Spec.Nodes.Max, GPUsPerNode: pool.Spec.GPUsPerNode, Named: named,
		Repair: &schema.Repair{After: spec.After.Duration, MaxNodes: spec.MaxNodes, Broken: schema.RepairBroken(spec.Broken),
			Flaps: spec.Flaps, FlapWindow: spec.FlapWindow.Duration}}
	if p.Repair.Flaps < 2 {
		p.Repair.Flaps = 2
	}
	next, d := elastic.Repair(p, st, in, now)
	pool.Status.Repair = statusFromState(next)
	r.Metrics.observe(pool.Name, next, d)
	for _, name := range d.Cordon {
		if err := r.retire(ctx, nodes, name, slices.Contains(d.Kept, name)); err != nil {
			return 0, err
		}
	}
	for _, a := range d.Actions {
		r.record(pool, a)
	}
	// Look again when a node's grace ends, or while a gang holds a lost node.
	var again time.Duration
	for _, ns := range next.Nodes {
		if ns.Retired || ns.UnusableSince.IsZero() {
			continue
		}
		if w := ns.UnusableSince.Add(p.Repair.After).Sub(now); w > 0 && (again == 0 || w < again) {
			again = w
		}
	}
	for _, n := range in {
		if recheck := cmp.Or(r.Recheck, DefaultRecheck); n.Busy && (!n.Usable || slices.Contains(d.Retired, n.Name)) && (again == 0 || recheck < again) {
			again = recheck
		}
	}
	return again, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// busy says whether a live pod with GPUs runs on the node (one being deleted
// is leaving).
func (r *Reconciler) busy(ctx context.Context, node string) (bool, error) {
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return false, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Limits[nodestate.ResourceGPU]; ok && !q.IsZero() {
				return true, nil
			}
		}
	}
	return false, nil
}

// retire cordons a retired node and marks it so (contract.AnnotationRetired:
// keep or remove), when it is not already.
func (r *Reconciler) retire(ctx context.Context, nodes []corev1.Node, name string, kept bool) error {
	mark := "remove"
	if kept {
		mark = "keep"
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Name != name || n.Spec.Unschedulable && n.Annotations[contract.AnnotationRetired] == mark {
			continue
		}
		base := n.DeepCopy()
		n.Spec.Unschedulable = true
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[contract.AnnotationRetired] = mark
		if err := r.Client.Patch(ctx, n, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("retiring node %s: %w", name, err)
		}
	}
	return nil
}

// record records an action as an event on the Pool, its kind the reason.
func (r *Reconciler) record(pool *allotv1.Pool, a elastic.Action) {
	if r.Recorder == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if a.Kind == elastic.ActionAtMax || a.Kind == elastic.ActionFlapping {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(pool, nil, kind, string(a.Kind), "Repair", "%s", apilimits.Note(a.Reason))
}

// stateFromStatus reads the repair state back from a Pool's status. Anyone
// who may write the status may have written it: the counts are bounded
// where they are used (elastic.Repair clamps replacements to its room), the
// records to elastic.MaxRecords and the failures to 100 each.
func stateFromStatus(s *allotv1.PoolRepairStatus) elastic.State {
	if s == nil {
		return elastic.State{}
	}
	st := elastic.State{Replacements: max(0, s.ReplacementNodes)}
	for _, rec := range s.Nodes[:min(len(s.Nodes), elastic.MaxRecords)] {
		ns := elastic.NodeState{Name: rec.Name, Retired: rec.Retired, Kept: rec.Kept, Reason: rec.Reason}
		if rec.UnusableSince != nil {
			ns.UnusableSince = rec.UnusableSince.Time
		}
		for _, f := range rec.Failures[:min(len(rec.Failures), 100)] {
			ns.Failures = append(ns.Failures, f.Time)
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st
}

func statusFromState(st elastic.State) *allotv1.PoolRepairStatus {
	out := &allotv1.PoolRepairStatus{ReplacementNodes: st.Replacements}
	for _, ns := range st.Nodes {
		rec := allotv1.PoolNodeRecord{Name: ns.Name, Retired: ns.Retired, Kept: ns.Kept, Reason: apilimits.Truncate(ns.Reason, 256)}
		if !ns.UnusableSince.IsZero() {
			t := metav1.NewTime(ns.UnusableSince)
			rec.UnusableSince = &t
		}
		for _, f := range ns.Failures {
			rec.Failures = append(rec.Failures, metav1.NewTime(f))
		}
		out.Nodes = append(out.Nodes, rec)
	}
	return out
}
