package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
)

func init() {
	commands = append(commands, newReconcileCommand, newSuspendCommand, newResumeCommand)
}

// clusterFlags reach a cluster as kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config (the usual loading rules), --context and
// -n/--namespace (default: the context's namespace).
type clusterFlags struct {
	kubeconfig, context, namespace string
}

func (f *clusterFlags) register(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	c.PersistentFlags().StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	c.PersistentFlags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of the CapacitySource (default: the context's)")
}

// client returns a client for allot's and Flux's sources, and the namespace.
func (f *clusterFlags) client() (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	rc, err := cfg.ClientConfig()
	if err != nil {
		return nil, "", reachError(err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cfg.Namespace(); err != nil {
			return nil, "", usageError{fmt.Errorf("reading the kubeconfig's namespace: %w", err)}
		}
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, allotv1.AddToScheme, sourcev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, "", err
		}
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", usageError{fmt.Errorf("reaching the cluster: %w", err)}
	}
	return c, ns, nil
}

// sourceVerb is a verb with one noun, source: 'allot VERB source NAME'.
func sourceVerb(verb, short, long string, run func(cmd *cobra.Command, f *clusterFlags, name string) error) *cobra.Command {
	var f clusterFlags
	c := &cobra.Command{Use: verb, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageHint(cmd, errors.New("name what to "+verb+": allot "+verb+" source NAME"))
		}}
	f.register(c)
	c.AddCommand(&cobra.Command{
		Use:     "source NAME",
		Aliases: []string{"capacitysource", "capsrc"},
		Short:   short,
		Long:    long,
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return run(cmd, &f, args[0]) },
	})
	return c
}

func newReconcileCommand() *cobra.Command {
	var withSource bool
	var timeout time.Duration
	c := sourceVerb("reconcile", "Reconcile a CapacitySource now and wait for the result",
		`Ask the manager to reconcile the CapacitySource NAME now, as Flux's CLI does:
set its annotation reconcile.fluxcd.io/requestedAt to the current time and wait
until its status.lastHandledReconcileAt says the manager has handled it, printing
a progress line while it waits. With --with-source, the Flux source it names
(spec.sourceRef) is asked to fetch first, and waited for the same way.

Exit 0 when the revision is applied (Ready=True), 1 when the reconcile failed
(the Ready condition's message is printed), 2 on a timeout or a bad call.
A suspended source is not reconciled: resume it first.`,
		func(cmd *cobra.Command, f *clusterFlags, name string) error {
			c, ns, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return reconcileSource(ctx, cmd.OutOrStdout(), c, client.ObjectKey{Namespace: ns, Name: name}, withSource)
		})
	c.PersistentFlags().BoolVar(&withSource, "with-source", false, "reconcile the Flux source named by spec.sourceRef first")
	c.PersistentFlags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait")
	return c
}

func newSuspendCommand() *cobra.Command {
	return sourceVerb("suspend", "Suspend a CapacitySource: what it applied stays, nothing new is applied",
		`Set spec.suspend of the CapacitySource NAME: the manager stops reconciling it
(new revisions are not applied, nothing is pruned); what it applied stays in
force. Same as: kubectl patch capacitysource NAME --type=merge -p '{"spec":{"suspend":true}}'`,
		func(cmd *cobra.Command, f *clusterFlags, name string) error {
			c, ns, err := f.client()
			if err != nil {
				return err
			}
			if err := setSuspend(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: name}, true); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CapacitySource %s/%s suspended\n", ns, name)
			return nil
		})
}

func newResumeCommand() *cobra.Command {
	var timeout time.Duration
	c := sourceVerb("resume", "Resume a suspended CapacitySource and wait for its reconcile",
		`Clear spec.suspend of the CapacitySource NAME, ask for a reconcile at once and
wait for its result, as 'allot reconcile source' does.`,
		func(cmd *cobra.Command, f *clusterFlags, name string) error {
			c, ns, err := f.client()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: ns, Name: name}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := setSuspend(ctx, c, key, false); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CapacitySource %s/%s resumed\n", ns, name)
			return reconcileSource(ctx, cmd.OutOrStdout(), c, key, false)
		})
	c.PersistentFlags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait")
	return c
}

func setSuspend(ctx context.Context, c client.Client, key client.ObjectKey, suspend bool) error {
	var src allotv1.CapacitySource
	if err := c.Get(ctx, key, &src); err != nil {
		return fmt.Errorf("CapacitySource %s: %w", key, err)
	}
	p := client.MergeFrom(src.DeepCopy())
	src.Spec.Suspend = suspend
	if err := c.Patch(ctx, &src, p); err != nil {
		return fmt.Errorf("CapacitySource %s: %w", key, err)
	}
	return nil
}

// reconcileSource requests a reconcile of the CapacitySource key (and of its
// Flux source first, withSource) and waits until it is handled.
func reconcileSource(ctx context.Context, out io.Writer, c client.Client, key client.ObjectKey, withSource bool) error {
	src := &allotv1.CapacitySource{}
	if err := c.Get(ctx, key, src); err != nil {
		return fmt.Errorf("CapacitySource %s: %w", key, err)
	}
	if src.Spec.Suspend {
		return fmt.Errorf("CapacitySource %s is suspended: run 'allot resume source %s' first", key, key.Name)
	}
	if withSource {
		ref := src.Spec.SourceRef
		if ref == nil {
			return usageError{fmt.Errorf("CapacitySource %s names no Flux source (spec.sourceRef): --with-source has nothing to reconcile", key)}
		}
		fsrc, err := capacity.NewFluxSource(ref.Kind)
		if err != nil {
			return err
		}
		skey := client.ObjectKey{Namespace: key.Namespace, Name: ref.Name}
		if ref.Namespace != "" {
			skey.Namespace = ref.Namespace
		}
		if err := requestAndWait(ctx, out, c, ref.Kind, skey, fsrc); err != nil {
			return err
		}
	}
	if err := requestAndWait(ctx, out, c, "CapacitySource", key, src); err != nil {
		return err
	}
	if !conditions.IsReady(src) {
		fmt.Fprintf(out, "CapacitySource %s failed: %s\n", key, conditions.GetMessage(src, allotv1.ReadyCondition))
		return exitError{exitFindings}
	}
	fmt.Fprintf(out, "CapacitySource %s applied revision %s\n", key, src.Status.LastAppliedRevision)
	return nil
}

// requestAndWait sets reconcile.fluxcd.io/requestedAt on obj and waits until
// its status.lastHandledReconcileAt matches, printing a line every 5 seconds.
func requestAndWait(ctx context.Context, out io.Writer, c client.Client, kind string, key client.ObjectKey, obj client.Object) error {
	if err := c.Get(ctx, key, obj); err != nil {
		return fmt.Errorf("%s %s: %w", kind, key, err)
	}
	at := time.Now().Format(time.RFC3339Nano)
	p := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[meta.ReconcileRequestAnnotation] = at
	obj.SetAnnotations(a)
	if err := c.Patch(ctx, obj, p); err != nil {
		return fmt.Errorf("%s %s: requesting a reconcile: %w", kind, key, err)
	}
	fmt.Fprintf(out, "%s %s: reconcile requested at %s\n", kind, key, at)
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastLine := start
	for {
		if err := c.Get(ctx, key, obj); err != nil {
			return fmt.Errorf("%s %s: %w", kind, key, err)
		}
		if handled(obj) == at {
			return nil
		}
		if time.Since(lastLine) >= 5*time.Second {
			lastLine = time.Now()
			msg := "waiting"
			if g, ok := obj.(conditions.Getter); ok && conditions.IsReconciling(g) {
				msg = conditions.GetMessage(g, meta.ReconcilingCondition)
			}
			fmt.Fprintf(out, "%s %s: %s (%s)\n", kind, key, msg, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return usageError{fmt.Errorf("%s %s: the reconcile requested at %s was not handled within the timeout", kind, key, at)}
		case <-tick.C:
		}
	}
}

// handled is obj's status.lastHandledReconcileAt.
func handled(obj client.Object) string {
	switch o := obj.(type) {
	case *allotv1.CapacitySource:
		return o.Status.LastHandledReconcileAt
	case *sourcev1.GitRepository:
		return o.Status.LastHandledReconcileAt
	case *sourcev1.OCIRepository:
		return o.Status.LastHandledReconcileAt
	case *sourcev1.Bucket:
		return o.Status.LastHandledReconcileAt
	}
	return ""
}
