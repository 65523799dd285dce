package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// healTimeout bounds each wait of the repair step: the grace (labRepair's
// after), a Terraform apply, and the scheduler's cycle.
const healTimeout = 90 * time.Second

// labRepair is the repair the demo's lab pool declares.
const labRepair = `repair: {after: "5s", maxNodes: 1, broken: "remove"}`

// heal fails a GPU of a node under the lab's gang, as allot-agent reports a
// fatal fault, and shows the pool heal within what Git approved: the gang is
// evicted whole and comes back (the demo finishes its pods as a kubelet
// would and makes them again as their Job controller would), after
// repair.after a replacement node is made by Terraform, the gang runs again,
// and the broken node, once no gang runs on it, is retired and removed.
func (d *demo) heal(ctx context.Context) error {
	d.header("A GPU fails under " + labWorkload + ": repair replaces the node")
	team, name, _ := strings.Cut(labWorkload, "/")
	var pods corev1.PodList
	if err := d.c.List(ctx, &pods, client.InNamespace(team), client.MatchingLabels{contract.LabelGang: name}); err != nil {
		return err
	}
	var broken string
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && (broken == "" || p.Spec.NodeName < broken) {
			broken = p.Spec.NodeName
		}
	}
	if broken == "" {
		return fmt.Errorf("%s runs on no node", labWorkload)
	}
	var node corev1.Node
	if err := d.c.Get(ctx, client.ObjectKey{Name: broken}, &node); err != nil {
		return err
	}
	base := node.DeepCopy()
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: nodestate.TaintGPUFault, Value: "xid-79", Effect: corev1.TaintEffectNoSchedule})
	if err := d.c.Patch(ctx, &node, client.MergeFrom(base)); err != nil {
		return err
	}
	d.say("%s: fatal GPU fault (taint %s, as allot-agent sets it)", broken, nodestate.TaintGPUFault)

	// The gang is evicted whole; its pods end and come back unbound.
	err := d.waitUntil(ctx, healTimeout, labWorkload+" not evicted", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := d.c.List(ctx, &pods, client.InNamespace(team), client.MatchingLabels{contract.LabelGang: name}); err != nil {
			return false, err.Error(), nil
		}
		evicted := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				evicted++
			}
		}
		return evicted > 0, fmt.Sprintf("%d of %d pods evicted", evicted, len(pods.Items)), nil
	})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if err := d.c.Delete(ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	for _, j := range workload {
		if j.id() != labWorkload {
			continue
		}
		if err := d.waitUntil(ctx, healTimeout, "the evicted pods not gone", func(ctx context.Context) (bool, string, error) {
			var pods corev1.PodList
			if err := d.c.List(ctx, &pods, client.InNamespace(team), client.MatchingLabels{contract.LabelGang: name}); err != nil {
				return false, err.Error(), nil
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items)), nil
		}); err != nil {
			return err
		}
		if err := j.create(ctx, d.c); err != nil {
			return err
		}
	}
	d.say("%s evicted whole and submitted again: it waits for 4 healthy L4 nodes, 3 are left", labWorkload)

	// A replacement node, the gang on it, and the broken node retired.
	var where []string
	err = d.waitUntil(ctx, healTimeout, labWorkload+" not running again beside a replacement", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := d.c.List(ctx, &pods, client.InNamespace(team), client.MatchingLabels{contract.LabelGang: name}); err != nil {
			return false, err.Error(), nil
		}
		where = where[:0]
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" || p.Spec.NodeName == broken {
				return false, fmt.Sprintf("pod %s on %q", p.Name, p.Spec.NodeName), nil
			}
			where = append(where, p.Spec.NodeName)
		}
		return len(where) == len(pods.Items) && len(where) > 0, "", nil
	})
	if err != nil {
		return err
	}
	slices.Sort(where)
	d.say("%s runs again on %s", labWorkload, strings.Join(where, ", "))
	err = d.waitUntil(ctx, healTimeout, broken+" not retired and removed", func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		if err := d.c.Get(ctx, client.ObjectKey{Name: broken}, &n); err == nil {
			return false, fmt.Sprintf("%s still there (retired: %q)", broken, n.Annotations[contract.AnnotationRetired]), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	var pool allotv1.Pool
	if err := d.c.Get(ctx, client.ObjectKey{Name: "lab-l4"}, &pool); err != nil {
		return err
	}
	var evs eventsv1.EventList
	if err := d.c.List(ctx, &evs); err != nil {
		return err
	}
	slices.SortFunc(evs.Items, func(a, b eventsv1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Pool" && e.Regarding.Name == "lab-l4" && e.Action == "Repair" {
			d.say("pool lab-l4 %s: %s", e.Reason, e.Note)
			d.res.repair = append(d.res.repair, e.Reason)
		}
	}
	d.say("pool lab-l4: nodesTarget %d (Git's, unchanged), %s removed; a fault never changes the plan", pool.Spec.NodesTarget, broken)
	d.res.retired = broken
	return nil
}
