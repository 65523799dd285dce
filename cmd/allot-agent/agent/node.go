package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	"github.com/allot-dev/allot/fleet/health"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// Component is the agent's name in Events and as a field manager.
const Component = "allot-agent"

// Node publishes reports on the agent's own node: the GPUHealthy condition
// (status subresource, strategic merge: other conditions untouched), the
// healthy-gpus annotation, the gpu-fault taint and the kept state (an
// optimistic-locked merge patch), and an Event on every change of health.
type Node struct {
	c         client.Client
	name      string
	heartbeat time.Duration
	now       func() time.Time
}

// NewNode returns a publisher for node name. The condition's heartbeat is
// refreshed at most every heartbeat when nothing else changes.
func NewNode(c client.Client, name string, heartbeat time.Duration, now func() time.Time) *Node {
	if now == nil {
		now = time.Now
	}
	return &Node{c: c, name: name, heartbeat: heartbeat, now: now}
}

// Load reads the node's boot ID, advertised GPUs and kept state.
func (n *Node) Load(ctx context.Context) (Facts, error) {
	var node corev1.Node
	if err := n.c.Get(ctx, types.NamespacedName{Name: n.name}, &node); err != nil {
		return Facts{}, fmt.Errorf("reading node %s: %w", n.name, err)
	}
	f := Facts{BootID: node.Status.NodeInfo.BootID}
	if q, ok := node.Status.Capacity[nodestate.ResourceGPU]; ok {
		f.GPUs = int(q.Value())
	}
	if st, ok := nodestate.ReadState(&node); ok {
		f.State = &st
	}
	return f, nil
}

// Cluster returns the node's allot.dev/cluster label (the XID overrides key).
func (n *Node) Cluster(ctx context.Context) (string, error) {
	var node corev1.Node
	if err := n.c.Get(ctx, types.NamespacedName{Name: n.name}, &node); err != nil {
		return "", fmt.Errorf("reading node %s: %w", n.name, err)
	}
	return node.Labels[contract.LabelCluster], nil
}

// Publish writes rep and st on the node: the annotations and taint first, with
// an optimistic lock (a merge patch replaces the whole taint list), then the
// condition, a strategic merge on the status that leaves the kubelet's
// conditions alone. A conflict reads the node again and retries.
func (n *Node) Publish(ctx context.Context, rep health.Report, st health.State) error {
	now := n.now()
	var node corev1.Node
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := n.c.Get(ctx, types.NamespacedName{Name: n.name}, &node); err != nil {
			return err
		}
		orig := node.DeepCopy()
		ch := nodestate.Apply(&node, rep, st, now, n.heartbeat)
		changed = changed || ch.Health
		if ch.Meta {
			meta := orig.DeepCopy()
			meta.Annotations, meta.Spec.Taints = node.Annotations, node.Spec.Taints
			if err := n.c.Patch(ctx, meta, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(Component)); err != nil {
				return err
			}
		}
		if ch.Status {
			status := orig.DeepCopy()
			status.Status = node.Status
			if err := n.c.Status().Patch(ctx, status, client.StrategicMergeFrom(orig), client.FieldOwner(Component)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing GPU health on node %s: %w", n.name, err)
	}
	if changed {
		if err := n.event(ctx, &node, rep, now); err != nil {
			return fmt.Errorf("recording the GPU health event of node %s: %w", n.name, err)
		}
	}
	return nil
}

// event records a change of the node's health. Node events live in the
// default namespace, as the kubelet's do; the reason is the condition's.
func (n *Node) event(ctx context.Context, node *corev1.Node, rep health.Report, now time.Time) error {
	typ := corev1.EventTypeNormal
	if !rep.Healthy {
		typ = corev1.EventTypeWarning
	}
	ts := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: node.Name + ".gpuhealth.", Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID},
		Reason:              rep.Reason,
		Message:             rep.Message,
		Type:                typ,
		Source:              corev1.EventSource{Component: Component, Host: node.Name},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: "allot.dev/agent",
		ReportingInstance:   node.Name,
	}
	return n.c.Create(ctx, ev)
}
