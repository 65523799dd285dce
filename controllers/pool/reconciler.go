package pool

import (
	"context"
	"errors"
	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/internal/apilimits"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
)

// Condition reasons of a Pool.
const (
	ReasonCapacityAvailable = "CapacityAvailable"
	ReasonCapacityBelowNeed = "CapacityBelowNeed"
	ReasonGPUsHealthy       = "GPUsHealthy"
	ReasonGPUFaults         = "GPUFaults"
)

// FieldManager owns the Pool status fields this reconciler writes.
const FieldManager = "allot-pool-health"

// +kubebuilder:rbac:groups=allot.dev,resources=pools,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=pools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps Pool status in line with the pool's nodes, and runs the
// repair rules of pools that declare them.
type Reconciler struct {
	Client client.Client
	// Reader lists the pods of a node (uncached), for pools with repair or
	// burst.
	Reader   client.Reader
	Recorder events.EventRecorder
	// Metrics, when set, export repair and burst.
	Metrics *Metrics
	// Demand, when set, says which gangs wait for nodes (the in-cluster
	// scheduler's view): pools with burst grow for them. Nil: no pool
	// grows; burst nodes held are still given back when idle.
	Demand Demand
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Recheck is how often a pool waiting for a gang to leave a lost node
	// is looked at again; 0: DefaultRecheck.
	Recheck time.Duration
}

// SetupWithManager registers the reconciler: a Pool is reconciled when it
// changes and when one of its nodes does.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, indexPool, func(o client.Object) []string {
		if p := o.GetLabels()[contract.LabelPool]; p != "" {
			return []string{p}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&allotv1.Pool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if p := o.GetLabels()[contract.LabelPool]; p != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p}}}
			}
			return nil
		})).
		Named("pool").
		Complete(r)
}

const indexPool = "metadata.labels.pool"

// Reconcile observes the pool's nodes and writes the status and conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	pool := &allotv1.Pool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Name) // its gauges go with it
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Repair decides from its own last decision (status.repair): read it
	// from the API server, not from a cache that may not have seen it yet,
	// so that no action is taken twice.
	if (pool.Spec.Repair != nil || pool.Spec.Burst != nil) && r.Reader != nil {
		if err := r.Reader.Get(ctx, req.NamespacedName, pool); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingFields{indexPool: pool.Name}); err != nil {
		return ctrl.Result{}, err
	}
	patcher := patch.NewSerialPatcher(pool, r.Client)
	before := pool.DeepCopy()
	defer func() {
		if err := patcher.Patch(ctx, pool,
			patch.WithOwnedConditions{Conditions: []string{allotv1.ReadyCondition, allotv1.CapacityReadyCondition, allotv1.GPUHealthyCondition}},
			patch.WithStatusObservedGeneration{},
			patch.WithFieldOwner(FieldManager),
		); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, err)
		}
	}()

	h := Observe(pool, nodes.Items)
	pool.Status.Nodes, pool.Status.ReadyNodes = h.Nodes, h.UsableNodes
	pool.Status.GPUs, pool.Status.HealthyGPUs = h.GPUs, h.HealthyGPUs
	pool.Status.UnhealthyNodes = nil
	for _, f := range h.Faulty {
		pool.Status.UnhealthyNodes = append(pool.Status.UnhealthyNodes, f.Node)
	}
	if h.CapacityReady() {
		conditions.MarkTrue(pool, allotv1.CapacityReadyCondition, ReasonCapacityAvailable, "%s", h.Message())
	} else {
		conditions.MarkFalse(pool, allotv1.CapacityReadyCondition, ReasonCapacityBelowNeed, "%s", h.Message())
	}
	if len(h.Faulty) == 0 {
		conditions.MarkTrue(pool, allotv1.GPUHealthyCondition, ReasonGPUsHealthy, "every node of the pool is healthy")
	} else {
		conditions.MarkFalse(pool, allotv1.GPUHealthyCondition, ReasonGPUFaults, "%d of %d nodes offer fewer GPUs than they have: %s", len(h.Faulty), h.Nodes, h.FaultList())
	}
	conditions.SetSummary(pool, allotv1.ReadyCondition, conditions.WithConditions(allotv1.CapacityReadyCondition))
	r.announce(before, pool)
	again, err := r.repair(ctx, pool, nodes.Items)
	return ctrl.Result{RequeueAfter: again}, err
}

// announce records an event for every change of CapacityReady or GPUHealthy;
// the event's reason is the condition's.
func (r *Reconciler) announce(before, after *allotv1.Pool) {
	if r.Recorder == nil {
		return
	}
	for _, t := range []string{allotv1.CapacityReadyCondition, allotv1.GPUHealthyCondition} {
		a, b := conditions.Get(before, t), conditions.Get(after, t)
		// A change of status or reason, not of the counts in the message: a
		// pool growing node by node is one event, not one per node.
		if b == nil || (a != nil && a.Status == b.Status && a.Reason == b.Reason) {
			continue
		}
		kind := corev1.EventTypeNormal
		if b.Status != "True" {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(after, nil, kind, b.Reason, t, "%s", apilimits.Note(b.Message))
	}
}
