package pool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/scheduler/runner"
	"github.com/allot-dev/allot/schema"
)

// DefaultRecheck is how often a pool waiting for a gang to leave a lost
// node is looked at again: pods leaving a node do not reconcile its Pool.
const DefaultRecheck = time.Minute

// repair runs the pool's burst and repair rules (fleet/elastic.Decide) on
// its nodes, keeps their state on the Pool's status, cordons retired nodes
// and records an event per action. It returns when to look again (0: when
// something changes).
func (r *Reconciler) repair(ctx context.Context, pool *allotv1.Pool, nodes []corev1.Node) (time.Duration, error) {
	spec, bspec := pool.Spec.Repair, pool.Spec.Burst
	if bspec == nil {
		pool.Status.Burst = nil
	}
	if spec == nil && bspec == nil {
		pool.Status.Repair = nil
		r.Metrics.forget(pool.Name)
		return 0, nil
	}
	now := r.now()
	base := pool.DeepCopy()
	st := stateFromStatus(pool.Status.Repair, pool.Status.Burst)
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
	// mark (or is gone): the status alone retires no node. The mark is
	// read again uncached before a record is undone (the cache may not
	// have seen a mark just written).
	marks := map[string]string{}
	for i := range nodes {
		marks[nodes[i].Name] = nodes[i].Annotations[contract.AnnotationRetired]
	}
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		if m, there := marks[ns.Name]; ns.Retired && there && m == "" && r.Reader != nil {
			var n corev1.Node
			switch err := r.Reader.Get(ctx, client.ObjectKey{Name: ns.Name}, &n); {
			case apierrors.IsNotFound(err):
				delete(marks, ns.Name) // gone: the record stands
			case err != nil:
				return 0, fmt.Errorf("reading node %s: %w", ns.Name, err)
			default:
				marks[ns.Name] = n.Annotations[contract.AnnotationRetired]
			}
		}
	}
	st, recorded := trustRecords(st, marks)
	// What the scheduler sees: the gangs waiting for nodes of this pool, and
	// the nodes a pod holds GPUs on.
	var gangs []elastic.Gang
	var seen map[string]bool
	if bspec != nil && r.Demand != nil {
		var err error
		if gangs, seen, err = r.demand(ctx, pool); err != nil {
			return 0, err
		}
	}
	in := make([]elastic.Node, 0, len(nodes))
	// Whether a gang runs on a node is read from the API server (uncached)
	// for nodes with a record (lost, retired, failing), while replacements
	// are held (giving one back), and without the scheduler's view; burst
	// checks the nodes it gives back (decide). The scheduler's view is
	// enough for the rest.
	for i := range nodes {
		c := nodestate.Read(&nodes[i])
		n := elastic.Node{Name: nodes[i].Name, Usable: c.Usable, HealthyGPUs: c.HealthyGPUs,
			NotReady: c.Reason == nodestate.ReasonNotReady, Created: nodes[i].CreationTimestamp.Time, Busy: seen[nodes[i].Name]}
		ask := spec != nil && (!c.Usable || c.HealthyGPUs < pool.Spec.GPUsPerNode || recorded[n.Name] || st.Replacements > 0) ||
			bspec != nil && seen == nil
		if ask && !n.Busy {
			busy, err := r.busy(ctx, n.Name)
			if err != nil {
				return 0, err
			}
			n.Busy = busy
		}
		in = append(in, n)
	}
	p := elastic.Pool{Fixed: pool.Spec.NodesTarget, Spare: pool.Spec.SpareNodes, Max: pool.Spec.Nodes.Max, GPUsPerNode: pool.Spec.GPUsPerNode, Named: named}
	if named {
		p.IndexOf = func(node string) (int64, bool) { return fleet.NodeIndex(schema.PoolName(pool.Name), node) }
	}
	if spec != nil {
		p.Repair = &schema.Repair{After: spec.After.Duration, MaxNodes: spec.MaxNodes, Broken: schema.RepairBroken(spec.Broken),
			Flaps: max(2, spec.Flaps), FlapWindow: spec.FlapWindow.Duration}
	}
	if bspec != nil {
		p.Burst = &schema.Burst{MaxNodes: bspec.MaxNodes, IdleAfter: max(time.Minute, bspec.IdleAfter.Duration)}
	}
	next, d, err := r.decide(ctx, p, st, gangs, in, now)
	if err != nil {
		return 0, err
	}
	before := pool.Status.DeepCopy()
	pool.Status.Repair, pool.Status.Burst = statusFromState(next, bspec != nil)
	if bspec != nil {
		// What the burst nodes were held for since the last count, billed
		// in the finance report.
		meterBurst(pool.Status.Burst, elastic.Meter(meteredOf(before.Burst), st.BurstTeams, next.BurstTeams, now))
	}
	explain(before, &pool.Status, d.Actions)
	r.Metrics.observe(pool.Name, next, d)
	// The status goes first, then the marks: Terraform seats the pool from
	// both, and a node marked while the status still counts it would have
	// a new node made in its place.
	if unmarked := slices.ContainsFunc(d.Cordon, func(name string) bool { return marks[name] == "" }); unmarked {
		if err := r.Client.Status().Patch(ctx, pool, client.MergeFrom(base), client.FieldOwner(FieldManager)); err != nil {
			return 0, fmt.Errorf("writing the pool's status before retiring nodes: %w", err)
		}
	}
	for _, name := range d.Cordon {
		if err := r.retire(ctx, nodes, name, slices.Contains(d.Kept, name)); err != nil {
			return 0, err
		}
	}
	for _, a := range d.Actions {
		r.record(pool, a)
	}
	// Look again when a node's grace ends, while a gang holds a lost node,
	// and, for burst, every Recheck: waiting gangs and idle time change
	// nothing the Pool watches.
	var again time.Duration
	if bspec != nil {
		again = cmp.Or(r.Recheck, DefaultRecheck)
	}
	for _, ns := range next.Nodes {
		if p.Repair == nil || ns.Retired || ns.UnusableSince.IsZero() {
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
	kind, action := corev1.EventTypeNormal, "Repair"
	switch a.Kind {
	case elastic.ActionAtMax, elastic.ActionFlapping, elastic.ActionBurstAtMax:
		kind = corev1.EventTypeWarning
	}
	switch a.Kind {
	case elastic.ActionBurstUp, elastic.ActionBurstDown, elastic.ActionBurstAtMax:
		action = "Burst"
	}
	r.Recorder.Eventf(pool, nil, kind, string(a.Kind), action, "%s", apilimits.Note(a.Reason))
}

// stateFromStatus reads the repair state back from a Pool's status. Anyone
// who may write the status may have written it: the counts are bounded
// where they are used (elastic.Repair clamps replacements to its room), the
// records to elastic.MaxRecords and the failures to 100 each.
func stateFromStatus(s *allotv1.PoolRepairStatus, b *allotv1.PoolBurstStatus) elastic.State {
	var st elastic.State
	if b != nil {
		st.Burst, st.BurstAtMax = max(0, b.BurstNodes), b.AtMax
		for _, t := range b.Teams[:min(len(b.Teams), maxTeams)] {
			st.BurstTeams = append(st.BurstTeams, elastic.TeamNodes{Team: t.Team, Nodes: t.Nodes})
		}
		for _, in := range b.Idle[:min(len(b.Idle), maxIdle)] {
			st.Idle = append(st.Idle, elastic.IdleNode{Name: in.Name, Since: in.Since.Time})
		}
	}
	if s == nil {
		return st
	}
	st.Replacements, st.AtMax = max(0, s.ReplacementNodes), s.AtMax
	for _, rec := range s.Nodes[:min(len(s.Nodes), elastic.MaxRecords)] {
		ns := elastic.NodeState{Name: rec.Name, Retired: rec.Retired, Kept: rec.Kept, Reason: rec.Reason, Burst: rec.Burst}
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

// The most teams and idle nodes a Pool's burst status keeps (its CRD's
// bounds).
const (
	maxTeams = 1000
	maxIdle  = 10000
)

func statusFromState(st elastic.State, burst bool) (*allotv1.PoolRepairStatus, *allotv1.PoolBurstStatus) {
	var b *allotv1.PoolBurstStatus
	if burst {
		b = &allotv1.PoolBurstStatus{BurstNodes: st.Burst, AtMax: st.BurstAtMax}
		for _, t := range st.BurstTeams[:min(len(st.BurstTeams), maxTeams)] {
			b.Teams = append(b.Teams, allotv1.PoolBurstTeam{Team: apilimits.Truncate(t.Team, 253), Nodes: t.Nodes})
		}
		for _, in := range st.Idle[:min(len(st.Idle), maxIdle)] {
			b.Idle = append(b.Idle, allotv1.PoolIdleNode{Name: in.Name, Since: metav1.NewTime(in.Since)})
		}
	}
	out := &allotv1.PoolRepairStatus{ReplacementNodes: st.Replacements, AtMax: st.AtMax}
	for _, ns := range st.Nodes {
		rec := allotv1.PoolNodeRecord{Name: ns.Name, Retired: ns.Retired, Kept: ns.Kept, Reason: apilimits.Truncate(ns.Reason, 256), Burst: ns.Burst}
		if !ns.UnusableSince.IsZero() {
			t := metav1.NewTime(ns.UnusableSince)
			rec.UnusableSince = &t
		}
		for _, f := range ns.Failures {
			rec.Failures = append(rec.Failures, metav1.NewTime(f))
		}
		out.Nodes = append(out.Nodes, rec)
	}
	return out, b
}

// decide runs elastic.Decide and checks against the API server (uncached)
// that the nodes it gives back as idle run no gang: the scheduler's view
// may lag a bind. A node found busy is marked so and the decision taken
// again (a few times at most; then it stands, and Terraform's shrink guard
// holds a removal of work).
func (r *Reconciler) decide(ctx context.Context, p elastic.Pool, st elastic.State, gangs []elastic.Gang, in []elastic.Node, now time.Time) (elastic.State, elastic.Decision, error) {
	for range 3 {
		next, d := elastic.Decide(p, st, gangs, in, now)
		found := false
		for i := range in {
			ns := slices.IndexFunc(next.Nodes, func(ns elastic.NodeState) bool { return ns.Name == in[i].Name })
			if in[i].Busy || ns < 0 || !next.Nodes[ns].Burst || !next.Nodes[ns].Retired {
				continue
			}
			if old := slices.IndexFunc(st.Nodes, func(o elastic.NodeState) bool { return o.Name == in[i].Name && o.Retired }); old >= 0 {
				continue // given back before, checked then
			}
			busy, err := r.busy(ctx, in[i].Name)
			if err != nil {
				return st, elastic.Decision{}, err
			}
			if busy {
				in[i].Busy, found = true, true
			}
		}
		if !found {
			return next, d, nil
		}
	}
	next, d := elastic.Decide(p, st, gangs, in, now)
	return next, d, nil
}

// trustRecords lets a record of the status stand only as far as the
// Nodes' marks (marks: the mark of each node present, "" for none) bear it
// out, and returns the nodes with a record. A node retired on record but
// not marked is not retired: a burst node given back whose mark was never
// written (the manager stopped, or the write failed) holds its seat again
// as a burst node; any other is seated again. A record cannot turn a node
// the manager marked keep into one to remove.
func trustRecords(st elastic.State, marks map[string]string) (elastic.State, map[string]bool) {
	recorded := map[string]bool{}
	var kept []elastic.NodeState
	for _, ns := range st.Nodes {
		m, there := marks[ns.Name]
		switch {
		case ns.Retired && there && m == "" && ns.Burst:
			st.Burst++
			continue
		case ns.Retired && there && m == "":
			ns.Retired, ns.Kept = false, false
		case ns.Burst && m == "keep":
			ns.Burst = false
		}
		recorded[ns.Name] = true
		kept = append(kept, ns)
	}
	st.Nodes = kept
	return st, recorded
}

// explain keeps on the status why the replacement and burst nodes are what
// they are: the reason of the decision's last action of each, else the one
// there was.
func explain(before, after *allotv1.PoolStatus, acts []elastic.Action) {
	if after.Repair != nil && before.Repair != nil {
		after.Repair.Message = before.Repair.Message
	}
	if after.Burst != nil && before.Burst != nil {
		after.Burst.Message = before.Burst.Message
	}
	for _, a := range acts {
		switch a.Kind {
		case elastic.ActionReplace, elastic.ActionGiveBack, elastic.ActionAtMax:
			if after.Repair != nil {
				after.Repair.Message = apilimits.Truncate(a.Reason, 1024)
			}
		case elastic.ActionBurstUp, elastic.ActionBurstDown, elastic.ActionBurstAtMax:
			if after.Burst != nil {
				after.Burst.Message = apilimits.Truncate(a.Reason, 1024)
			}
		}
	}
}

// Demand says which gangs wait for nodes, and on which nodes a pod holds
// GPUs, as the in-cluster scheduler sees it (runner.Runner.Demand).
type Demand func() ([]runner.Waiting, map[string]bool)

// demand returns the gangs waiting for the pool's nodes, and the nodes the
// scheduler sees busy. A flavor's gangs wait for the burst pool of lowest
// name among the cluster's pools of that flavor: one pool grows for them,
// not each.
func (r *Reconciler) demand(ctx context.Context, pool *allotv1.Pool) ([]elastic.Gang, map[string]bool, error) {
	waiting, busy := r.Demand()
	var pools allotv1.PoolList
	if err := r.Client.List(ctx, &pools); err != nil {
		return nil, nil, fmt.Errorf("listing pools: %w", err)
	}
	for _, o := range pools.Items {
		if o.Spec.Burst != nil && o.Spec.Flavor == pool.Spec.Flavor && o.Spec.Cluster == pool.Spec.Cluster && o.Name < pool.Name {
			return nil, busy, nil
		}
	}
	per := fleet.NodesPerDomain(Topology(pool))
	var gangs []elastic.Gang
	for _, w := range waiting {
		if w.Flavor != pool.Spec.Flavor || w.Cluster != "" && w.Cluster != pool.Spec.Cluster {
			continue
		}
		g := elastic.Gang{Team: w.Team, GPUs: w.GPUs, PodGPUs: w.PodGPUs}
		if w.Level != "" {
			if g.DomainNodes = per[w.Level]; g.DomainNodes == 0 {
				continue // no such level here, or unbounded: nodes do not help
			}
		}
		gangs = append(gangs, g)
	}
	return gangs, busy, nil
}

// Topology reads a Pool's topology back into the configuration's terms.
func Topology(p *allotv1.Pool) *schema.Topology {
	if p.Spec.Topology == nil {
		return nil
	}
	t := &schema.Topology{Sizes: map[string]int64{}}
	for _, l := range p.Spec.Topology.Levels {
		t.Levels = append(t.Levels, l.Name)
		if l.DomainSize != nil {
			t.Sizes[l.Name] = *l.DomainSize
		}
	}
	return t
}

// meteredOf reads a Pool's burst meter from its status (none: a new one).
func meteredOf(b *allotv1.PoolBurstStatus) elastic.Metered {
	var m elastic.Metered
	if b == nil || b.MeteredSince == nil || b.MeteredAt == nil {
		return m
	}
	m.Since, m.At = b.MeteredSince.Time, b.MeteredAt.Time
	for _, t := range b.Metered[:min(len(b.Metered), elastic.MaxMeteredTeams)] {
		m.Teams = append(m.Teams, elastic.TeamSeconds{Team: t.Team, NodeSeconds: max(0, t.NodeSeconds)})
	}
	return m
}

// meterBurst writes m on a Pool's burst status.
func meterBurst(b *allotv1.PoolBurstStatus, m elastic.Metered) {
	since, at := metav1.NewTime(m.Since), metav1.NewTime(m.At)
	b.MeteredSince, b.MeteredAt, b.Metered = &since, &at, nil
	for _, t := range m.Teams {
		b.Metered = append(b.Metered, allotv1.PoolBurstMeter{Team: apilimits.Truncate(t.Team, 253), NodeSeconds: t.NodeSeconds})
	}
}
