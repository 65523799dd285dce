package kueue

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	"github.com/allot-dev/allot/scheduler/runner"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=clusterqueues,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=teams,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=teams/status,verbs=get;update;patch

// ClusterQueueGVK is the kind of a team's queue.
var ClusterQueueGVK = schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: "ClusterQueue"}

// Usage is what a ClusterQueue's status says of its team.
type Usage struct {
	Flavors           []allotv1.FlavorUsage
	PendingWorkloads  int64
	AdmittedWorkloads int64
}

// UsageOf reads the GPUs a ClusterQueue's admitted workloads use per flavor
// (and how many are borrowed), and its pending and admitted workloads.
// Kueue does not say what a queue lends: LentGPUs stays 0.
func UsageOf(cq *unstructured.Unstructured) Usage {
	var u Usage
	u.PendingWorkloads, _, _ = unstructured.NestedInt64(cq.Object, "status", "pendingWorkloads")
	u.AdmittedWorkloads, _, _ = unstructured.NestedInt64(cq.Object, "status", "admittedWorkloads")
	flavors, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		fm, _ := f.(map[string]any)
		name, _ := fm["name"].(string)
		res, _, _ := unstructured.NestedSlice(fm, "resources")
		for _, r := range res {
			rm, _ := r.(map[string]any)
			if rm["name"] != string(rkueue.ResourceGPU) {
				continue
			}
			u.Flavors = append(u.Flavors, allotv1.FlavorUsage{Flavor: name,
				UsedGPUs: quantity(rm["total"]), BorrowedGPUs: quantity(rm["borrowed"])})
		}
	}
	slices.SortFunc(u.Flavors, func(a, b allotv1.FlavorUsage) int { return cmp.Compare(a.Flavor, b.Flavor) })
	return u
}

func quantity(v any) int64 {
	s, ok := v.(string)
	if !ok {
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.Value()
}

// StatusReconciler writes each team's usage and pending workloads, as Kueue's
// ClusterQueue status says them, into its Team's status and the allot_team_*
// gauges, and meters the team's GPU time from that usage: the finance
// report's showback and the dashboards read them there whichever scheduler
// admits.
type StatusReconciler struct {
	Client client.Client
	// MeterEvery is how often a team's GPU time is brought up to date while
	// its usage does not change (default DefaultMeterEvery).
	MeterEvery time.Duration
}

// DefaultMeterEvery is how often an unchanged usage is metered.
const DefaultMeterEvery = 30 * time.Second

// TierAll is the tier of GPU time metered from Kueue: a ClusterQueue's
// usage does not say which priority its workloads ran at.
const TierAll = ""

// meter brings s's metered GPU time up to now: the usage s recorded last
// (its Flavors) held since MeteredAt, in whole seconds; MeteredAt moves by
// those whole seconds, so no fraction is lost between calls. The first call
// only starts the clock.
func meter(s allotv1.TeamStatus, now time.Time) ([]allotv1.MeteredUsage, *metav1.Time) {
	if s.MeteredAt == nil {
		return s.Metered, &metav1.Time{Time: now.Truncate(time.Second)}
	}
	secs := int64(now.Sub(s.MeteredAt.Time) / time.Second)
	if secs <= 0 {
		return s.Metered, s.MeteredAt
	}
	out := slices.Clone(s.Metered)
	for _, f := range s.Flavors {
		if f.UsedGPUs <= 0 {
			continue
		}
		i := slices.IndexFunc(out, func(m allotv1.MeteredUsage) bool { return m.Flavor == f.Flavor && m.Tier == TierAll })
		if i < 0 {
			out = append(out, allotv1.MeteredUsage{Flavor: f.Flavor, Tier: TierAll})
			i = len(out) - 1
		}
		if add := f.UsedGPUs * secs; add > 0 && out[i].GPUSeconds <= math.MaxInt64-add {
			out[i].GPUSeconds += add
		}
	}
	slices.SortFunc(out, func(a, b allotv1.MeteredUsage) int {
		return cmp.Or(cmp.Compare(a.Flavor, b.Flavor), cmp.Compare(a.Tier, b.Tier))
	})
	return out, &metav1.Time{Time: s.MeteredAt.Add(time.Duration(secs) * time.Second)}
}

// SetupWithManager watches the ClusterQueues.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	cq := &unstructured.Unstructured{}
	cq.SetGroupVersionKind(ClusterQueueGVK)
	return ctrl.NewControllerManagedBy(mgr).For(cq).Named("kueue-team-status").Complete(r)
}

// Reconcile copies one ClusterQueue's usage to its team's status.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cq := &unstructured.Unstructured{}
	cq.SetGroupVersionKind(ClusterQueueGVK)
	if err := r.Client.Get(ctx, req.NamespacedName, cq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name := cq.GetLabels()[allotv1.LabelTeam]
	if name == "" {
		return ctrl.Result{}, nil // not one of allot's
	}
	team := &allotv1.Team{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, team); err != nil {
		if apierrors.IsNotFound(err) {
			runner.ForgetTeam(name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	u := UsageOf(cq)
	nominal := map[string]int64{}
	for _, q := range team.Spec.Quota {
		nominal[q.Flavor] = q.Nominal
	}
	runner.SetTeamGauges(name, nominal, u.Flavors, u.PendingWorkloads, u.AdmittedWorkloads)
	every := cmp.Or(r.MeterEvery, DefaultMeterEvery)
	metered, at := meter(team.Status, time.Now())
	patched := team.DeepCopy()
	patched.Status.Flavors, patched.Status.PendingWorkloads, patched.Status.AdmittedWorkloads = u.Flavors, u.PendingWorkloads, u.AdmittedWorkloads
	patched.Status.Metered, patched.Status.MeteredAt = metered, at
	if equality.Semantic.DeepEqual(team.Status, patched.Status) {
		runner.SetTeamMetered(name, metered)
		return ctrl.Result{RequeueAfter: every}, nil
	}
	if err := r.Client.Status().Patch(ctx, patched, client.MergeFrom(team)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	runner.SetTeamMetered(name, metered)
	return ctrl.Result{RequeueAfter: every}, nil
}
