package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/internal/promreg"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// Condition reasons of a Cluster.
const (
	ReasonReachable         = "Reachable"
	ReasonUnreachable       = "Unreachable"
	ReasonLost              = "Lost"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonInvalidKubeconfig = "InvalidKubeconfig"
	// ReasonKubeconfigRefused: the kubeconfig asks for what the hub does
	// not do with a Secret's word (WorkerConfig); the worker is not
	// contacted.
	ReasonKubeconfigRefused = "KubeconfigRefused"
)

// FieldManager owns the Cluster status fields this reconciler writes.
const FieldManager = "allot-hub-cluster"

// Defaults of a Cluster and of the probes.
const (
	DefaultFailoverAfter = 5 * time.Minute
	DefaultInterval      = 10 * time.Second
	DefaultProbeTimeout  = 5 * time.Second
	// MaxKubeconfigBytes bounds a worker's kubeconfig.
	MaxKubeconfigBytes = 1 << 20
	// maxNodePages bounds the node list a probe reads (500 a page).
	maxNodePages = 200
	// DefaultMaxConcurrentProbes: workers probed at once.
	DefaultMaxConcurrentProbes = 16
)

// +kubebuilder:rbac:groups=allot.dev,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=allot.dev,resources=clusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// ClusterReconciler probes each registered worker cluster's API server and
// keeps its Cluster's conditions: Reachable, and Ready (False: Unreachable
// within failoverAfter, Lost after it).
type ClusterReconciler struct {
	Client client.Client
	// Reader reads the kubeconfig Secrets, uncached (the manager's API
	// reader): the hub watches no Secret, and needs only get on the Secrets
	// of its namespace (config/hub: a Role, not a ClusterRole).
	Reader   client.Reader
	Recorder events.EventRecorder
	// Namespace holds the kubeconfig Secrets (the hub manager's own); a
	// Cluster cannot name a Secret elsewhere.
	Namespace string
	// Interval between probes of a worker; default DefaultInterval.
	Interval time.Duration
	// ProbeTimeout bounds one probe; default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics, if set, receives the reachability of each worker.
	Metrics *Metrics
	// Workers, if set, receives what each probe found: the Router routes
	// with it.
	Workers *Workers
	// MaxConcurrentProbes bounds the workers probed at once; default
	// DefaultMaxConcurrentProbes. Workers that hang each hold one for
	// ProbeTimeout, and the others are probed beside them.
	MaxConcurrentProbes int
	// Policy is what the operator allows the workers' kubeconfigs beyond
	// TLS to a verified server with inline credentials (WorkerPolicy).
	Policy WorkerPolicy
}

// SetupWithManager registers the reconciler: a Cluster is reconciled when it
// changes and every Interval (a changed Secret is read at the next probe).
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	probes := r.MaxConcurrentProbes
	if probes <= 0 {
		probes = DefaultMaxConcurrentProbes
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&allotv1.Cluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: probes}).
		Named("hub-cluster").
		Complete(r)
}

// Reconcile probes the worker and writes what it found.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	c := &allotv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		if apierrors.IsNotFound(err) {
			if r.Metrics != nil {
				r.Metrics.forget(req.Name)
			}
			if r.Workers != nil {
				r.Workers.forget(req.Name)
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := patch.NewSerialPatcher(c, r.Client)
	before := c.DeepCopy()
	defer func() {
		if err := patcher.Patch(ctx, c,
			patch.WithOwnedConditions{Conditions: []string{allotv1.ReadyCondition, allotv1.ReachableCondition}},
			patch.WithStatusObservedGeneration{},
			patch.WithFieldOwner(FieldManager),
		); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, err)
		}
	}()
	now := r.now()
	seen, err := r.probe(ctx, c)
	if err == nil {
		c.Status.Nodes, c.Status.GPUs, c.Status.ServerVersion = seen.nodes, seen.gpus, seen.version
		c.Status.LastSeen, c.Status.UnreachableSince = &metav1.Time{Time: now}, nil
		msg := fmt.Sprintf("%d GPU nodes, %d GPUs (Kubernetes %s)", seen.nodes, seen.gpus, seen.version)
		conditions.MarkTrue(c, allotv1.ReachableCondition, ReasonReachable, "%s", msg)
		conditions.MarkTrue(c, allotv1.ReadyCondition, ReasonReachable, "%s", msg)
		if r.Workers != nil {
			r.Workers.seen(c.Name, now, seen.kubeconfig, seen.cfg, seen.list, failoverAfter(c))
		}
	} else {
		reason := ReasonUnreachable
		var pe *probeError
		if errors.As(err, &pe) {
			reason = pe.reason
		}
		if c.Status.UnreachableSince == nil {
			c.Status.UnreachableSince = &metav1.Time{Time: now}
		}
		// The error is the cluster's (what its API server answered): cut it
		// to leave room for the rest of each message.
		why := apilimits.Truncate(err.Error(), apilimits.ConditionBytes/2)
		conditions.MarkFalse(c, allotv1.ReachableCondition, reason, "%s", why)
		grace := failoverAfter(c)
		since := c.Status.UnreachableSince.Time
		if left := r.lostAt(c).Sub(now); left > 0 {
			conditions.MarkFalse(c, allotv1.ReadyCondition, ReasonUnreachable, "unreachable since %s; its jobs stay there for %s more (failoverAfter %s): %s",
				since.UTC().Format(time.RFC3339), left.Round(time.Second), grace, why)
			if r.Workers != nil {
				r.Workers.missed(c.Name, false)
			}
		} else {
			if r.Workers != nil {
				r.Workers.missed(c.Name, true)
			}
			conditions.MarkFalse(c, allotv1.ReadyCondition, ReasonLost, "unreachable since %s, longer than failoverAfter %s: its jobs go to other clusters: %s",
				since.UTC().Format(time.RFC3339), grace, why)
		}
	}
	r.announce(before, c)
	if r.Metrics != nil {
		r.Metrics.observe(c)
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(c, now)}, nil
}

// requeueAfter is the next probe: the interval, or sooner when the grace of
// an unreachable worker ends first.
func (r *ClusterReconciler) requeueAfter(c *allotv1.Cluster, now time.Time) time.Duration {
	d := r.Interval
	if d <= 0 {
		d = DefaultInterval
	}
	if s := c.Status.UnreachableSince; s != nil {
		if left := r.lostAt(c).Sub(now); left > 0 && left < d {
			d = left
		}
	}
	return d
}

// lostAt is when the unreachable worker c is Lost: failoverAfter after the
// end of the second its first failed probe began in, and never before the
// fence of the copies made there (Workers.fence: failoverAfter after the
// last successful probe began), so that a job moves only once its copy's
// fence has passed and cannot run twice. The API keeps UnreachableSince to
// the second, and the last successful probe may have begun later in that
// second; or it may not be there at all in the Cluster read (a cache that
// lags, a status patch that failed), which still says unreachable since an
// earlier outage; a new leader knows that probe from status.lastSeen alone.
func (r *ClusterReconciler) lostAt(c *allotv1.Cluster) time.Time {
	grace := failoverAfter(c)
	at := c.Status.UnreachableSince.Truncate(time.Second).Add(time.Second + grace)
	if s := c.Status.LastSeen; s != nil {
		// A leader that never reached the worker knows the last good probe
		// (its own or an earlier leader's) from the status alone.
		at = maxTime(at, s.Truncate(time.Second).Add(time.Second+grace))
	}
	if r.Workers != nil {
		at = maxTime(at, r.Workers.fence(c.Name))
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func failoverAfter(c *allotv1.Cluster) time.Duration {
	if f := c.Spec.FailoverAfter; f != nil && f.Duration > 0 {
		return f.Duration
	}
	return DefaultFailoverAfter
}

func (r *ClusterReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// probeError is a probe's failure with the condition reason it stands for.
type probeError struct {
	reason string
	err    error
}

func (e *probeError) Error() string { return e.err.Error() }
func (e *probeError) Unwrap() error { return e.err }

type seen struct {
	nodes, gpus int64
	version     string
	// cfg reaches the worker (made from kubeconfig); list holds its GPU
	// nodes, trimmed.
	cfg        *rest.Config
	kubeconfig []byte
	list       []corev1.Node
}

// probe reads the worker's kubeconfig Secret and asks its API server for its
// version and its GPU nodes.
func (r *ClusterReconciler) probe(ctx context.Context, c *allotv1.Cluster) (seen, error) {
	ref := c.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = "kubeconfig"
	}
	var s corev1.Secret
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return seen{}, &probeError{ReasonSecretNotFound, fmt.Errorf("secret %s/%s not found", r.Namespace, ref.Name)}
		}
		return seen{}, err
	}
	data, ok := s.Data[key]
	if !ok {
		return seen{}, &probeError{ReasonSecretNotFound, fmt.Errorf("secret %s/%s has no key %q", r.Namespace, ref.Name, key)}
	}
	cfg, err := WorkerConfig(data, r.Policy)
	if err != nil {
		reason := ReasonInvalidKubeconfig
		var no *refusal
		if errors.As(err, &no) {
			reason = ReasonKubeconfigRefused
		}
		return seen{}, &probeError{reason, fmt.Errorf("secret %s/%s key %q: %w", r.Namespace, ref.Name, key, err)}
	}
	timeout := r.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return seen{}, &probeError{ReasonInvalidKubeconfig, err}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return seen{}, unquoted(fmt.Errorf("asking %s for its version: %w", cfg.Host, err), cfg)
	}
	out := seen{version: v.GitVersion, cfg: cfg, kubeconfig: data}
	opts := metav1.ListOptions{Limit: 500}
	for range maxNodePages {
		nodes, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return seen{}, unquoted(fmt.Errorf("listing the nodes of %s: %w", cfg.Host, err), cfg)
		}
		for _, n := range nodes.Items {
			if q, ok := n.Status.Allocatable[nodestate.ResourceGPU]; ok && q.Value() > 0 {
				out.nodes++
				out.gpus += q.Value()
				out.list = append(out.list, trimNode(&n))
			}
		}
		if opts.Continue = nodes.Continue; opts.Continue == "" {
			break
		}
	}
	return out, nil
}

// announce records an event when Ready changes status or reason.
func (r *ClusterReconciler) announce(before, after *allotv1.Cluster) {
	if r.Recorder == nil {
		return
	}
	a, b := conditions.Get(before, allotv1.ReadyCondition), conditions.Get(after, allotv1.ReadyCondition)
	if b == nil || (a != nil && a.Status == b.Status && a.Reason == b.Reason) {
		return
	}
	kind := corev1.EventTypeNormal
	if b.Status != metav1.ConditionTrue {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, nil, kind, b.Reason, allotv1.ReadyCondition, "%s", apilimits.Note(b.Message))
}

// Metrics are the hub's view of its workers.
type Metrics struct {
	reachable *prometheus.GaugeVec
	lost      *prometheus.GaugeVec
	gpus      *prometheus.GaugeVec
	routed    *prometheus.CounterVec
	failovers *prometheus.CounterVec
	pending   prometheus.Gauge
	// placementGone counts, by worker and how they are counted now, the
	// routed jobs whose recorded nodes no longer hold them.
	placementGone *prometheus.GaugeVec
}

// NewMetrics registers the hub's cluster metrics with reg; set up again in
// one process, it shares the metrics registered first.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reachable: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_hub_cluster_reachable", Help: "1 when the hub reached the worker cluster's API server at its last probe."}, []string{"cluster"}),
		lost:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_hub_cluster_lost", Help: "1 when the worker cluster has been unreachable longer than its failoverAfter."}, []string{"cluster"}),
		gpus:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_hub_cluster_gpus", Help: "GPUs of the worker cluster's GPU nodes at its last successful probe."}, []string{"cluster"}),
	}
	m.routed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_hub_jobs_routed_total", Help: "Jobs the hub routed to a worker cluster (each failover routes again)."}, []string{"cluster"})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_hub_failovers_total", Help: "Jobs taken from a lost worker cluster to be routed again."}, []string{"cluster"})
	m.pending = prometheus.NewGauge(prometheus.GaugeOpts{Name: "allot_hub_jobs_pending", Help: "The hub's jobs waiting to be routed at its last pass."})
	m.placementGone = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "allot_hub_jobs_placement_gone", Help: "Routed jobs whose recorded nodes no longer hold them in their worker at the last pass, by how the hub counts them instead: on other nodes (nodes), in their team's quota alone (quota), or not at all (none)."}, []string{"cluster", "counted"})
	for _, g := range []**prometheus.GaugeVec{&m.reachable, &m.lost, &m.gpus, &m.placementGone} {
		*g = promreg.Register(reg, *g)
	}
	m.routed = promreg.Register(reg, m.routed)
	m.failovers = promreg.Register(reg, m.failovers)
	m.pending = promreg.Register(reg, m.pending)
	return m
}

func (m *Metrics) observe(c *allotv1.Cluster) {
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	m.reachable.WithLabelValues(c.Name).Set(b(conditions.IsTrue(c, allotv1.ReachableCondition)))
	m.lost.WithLabelValues(c.Name).Set(b(conditions.GetReason(c, allotv1.ReadyCondition) == ReasonLost))
	m.gpus.WithLabelValues(c.Name).Set(float64(c.Status.GPUs))
}

func (m *Metrics) forget(name string) {
	m.reachable.DeleteLabelValues(name)
	m.lost.DeleteLabelValues(name)
	m.gpus.DeleteLabelValues(name)
}
