package testenv

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// FinalizeNamespaces does for this control plane what kube-controller-manager's
// namespace controller does in a cluster, and envtest does not run: the
// objects of a namespace being deleted are deleted, then the namespace is
// removed, so that its name can be used again (a suite run twice with
// go test -count=2). Objects that keep finalizers of their own keep their
// namespace, as in a cluster. It runs until ctx ends.
func (e *Env) FinalizeNamespaces(ctx context.Context) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = rest.NoWarnings{} // deprecated kinds (v1 Endpoints) are deleted too
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			var resources []schema.GroupVersionResource
			for i := range nss.Items {
				ns := &nss.Items[i]
				if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
					continue
				}
				if resources == nil {
					resources = deletable(cs)
				}
				if emptied(ctx, md, resources, ns.Name) {
					ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
					_, _ = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
				}
			}
		}
	}()
	return nil
}

// deletable lists the namespaced resources that can be deleted as a collection.
func deletable(cs kubernetes.Interface) []schema.GroupVersionResource {
	lists, _ := cs.Discovery().ServerPreferredNamespacedResources() // a group that fails discovery is left out
	out := []schema.GroupVersionResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Verbs, "deletecollection") && slices.Contains(r.Verbs, "list") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out
}

// emptied deletes what namespace ns holds and says whether nothing is left.
func emptied(ctx context.Context, md metadata.Interface, resources []schema.GroupVersionResource, ns string) bool {
	empty := true
	for _, r := range resources {
		c := md.Resource(r).Namespace(ns)
		_ = c.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}, metav1.ListOptions{})
		if left, err := c.List(ctx, metav1.ListOptions{Limit: 1}); err != nil || len(left.Items) > 0 {
			empty = false
		}
	}
	return empty
}
