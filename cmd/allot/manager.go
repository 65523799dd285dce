package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/kueue"
	"github.com/allot-dev/allot/controllers/pool"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/runner"
	"github.com/allot-dev/allot/schema"
)

// Help of the manager's /metrics flags (allot-agent's say the same).
const (
	metricsSecureHelp = "serve /metrics over HTTPS to requests whose bearer token may get the non-resource URL /metrics (a TokenReview and a SubjectAccessReview; ClusterRole allot-metrics-reader); false: plain HTTP to anyone, for development only"
	metricsCertsHelp  = "directory of the metrics server's tls.crt and tls.key (default: a self-signed certificate)"
)

func init() { commands = append(commands, newManagerCommand) }

// managerOptions are the manager's flags.
type managerOptions struct {
	kubeconfig     string
	metricsAddr    string
	metricsSecure  bool
	metricsCerts   string
	probeAddr      string
	leaderElect    bool
	leaderNS       string
	leaderID       string
	gitCache       string
	gitMaxBytes    int64
	schedulerName  string
	noScheduler    bool
	scheduler      string
	kueueLenient   bool
	noGitOps       bool
	statusInterval time.Duration
	notReadyGrace  time.Duration
	// core: the scheduling core's options the flags set (gang timeout, walk).
	core          scheduler.Options
	strictTenancy bool
	development   bool
	terraformDir  string
	terraformHook string
	tfClusters    []string
	backend       backendFlags
	cluster       string
	readyTimeout  time.Duration
	tfEnvSecret   string
	staleLockAge  time.Duration
	hub           bool
	quotaFromHub  bool
	hubNamespace  string
	hubPolicy     hub.WorkerPolicy
}

func newManagerCommand() *cobra.Command {
	var o managerOptions
	c := &cobra.Command{
		Use:   "manager",
		Short: "Run in the cluster: GitOps reconciler, Pool health, embedded scheduler, /metrics",
		Long: `Run allot's in-cluster manager: the CapacitySource reconciler (fetch a Git
revision or a Flux artifact, validate and plan it exactly as 'allot plan' does,
apply the objects in safe order with server-side apply, prune what left Git), the
Pool health reconciler (healthy GPUs per pool from its nodes, the CapacityReady
condition) and the embedded gang- and topology-aware scheduler, which binds the
pods whose spec.schedulerName is "allot". They run on the elected leader only.

Serves Prometheus metrics on --metrics-bind-address (HTTPS, to bearer tokens
allowed to get /metrics, unless --metrics-secure=false) and /healthz and
/readyz on --health-probe-bind-address. Stops cleanly on SIGINT or SIGTERM.

The cluster is reached through --kubeconfig, else $KUBECONFIG, else the
in-cluster service account.`,
		Example: `  allot manager --kubeconfig ~/.kube/config --leader-elect=false
  allot manager --metrics-bind-address :8080 --git-cache-dir /var/cache/allot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runManager(ctx, o, cmd)
		},
	}
	f := c.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0 disables it)")
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, metricsSecureHelp)
	f.StringVar(&o.metricsCerts, "metrics-cert-dir", "", metricsCertsHelp)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 disables them)")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas; only the leader reconciles and schedules")
	f.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's namespace)")
	f.StringVar(&o.leaderID, "leader-election-id", "allot-manager", "name of the leader Lease")
	f.StringVar(&o.gitCache, "git-cache-dir", filepath.Join(os.TempDir(), "allot-git"), "directory of the Git mirrors of CapacitySources")
	f.Int64Var(&o.gitMaxBytes, "git-max-bytes", capacity.DefaultMaxCloneBytes, "most bytes a clone of a CapacitySource's repository may take on disk; a larger one fails the fetch (the last good revision stays in force)")
	f.StringVar(&o.schedulerName, "scheduler-name", contract.SchedulerName, "spec.schedulerName of the pods allot schedules")
	f.BoolVar(&o.noScheduler, "no-scheduler", false, "do not run the embedded scheduler")
	f.StringVar(&o.scheduler, "scheduler", "allot", "what admits the workloads: allot (the embedded scheduler) or kueue (Kueue, already in the cluster: the manager applies its ClusterQueues and the rest in the safe order, and reads the teams' usage from their status; docs/kueue.md)")
	f.BoolVar(&o.kueueLenient, "kueue-approximate", false, "with --scheduler=kueue, apply a revision whose rules Kueue only approximates though their tier, team or pool does not say approximate: true (by default such a revision is refused and the last good one stays in force)")
	f.BoolVar(&o.noGitOps, "no-gitops", false, "do not run the CapacitySource reconciler")
	f.DurationVar(&o.statusInterval, "status-interval", 10*time.Second, "how often Team status and usage metrics are refreshed")
	f.DurationVar(&o.notReadyGrace, "not-ready-grace", 5*time.Minute, "how long a node may be not Ready before its gangs are evicted (meanwhile it takes no new work; a GPU fault evicts at once; 0: at once)")
	o.core = scheduler.DefaultOptions()
	f.DurationVar(&o.core.GangTimeout, "gang-timeout", o.core.GangTimeout, "how long an admitted gang may take to have every pod running (pod status) before it is taken back whole and requeued with a doubling backoff (0: never)")
	walkFlags(f, &o.core)
	f.BoolVar(&o.strictTenancy, "strict-tenancy", true, "refuse the pods of namespaces that belong to no team (a team's own, or one mapped by teams.<team>.namespaces); with --strict-tenancy=false their allot.dev/team label names their team")
	f.BoolVar(&o.development, "log-development", false, "human-readable logs instead of JSON")
	f.StringVar(&o.terraformDir, "terraform-dir", "", "make pool sizes real with Terraform, keeping its working directories here (a persistent volume); empty: pool sizes live in the Pool objects only")
	o.backend.register(c)
	f.BoolVar(&o.hub, "hub", false, "run as the fleet's hub in a management cluster: probe each registered worker Cluster (kubeconfig Secrets in --hub-namespace) and route the Jobs with spec.managedBy "+hub.ManagedBy+" to them, with the teams' quotas enforced fleet-wide (docs/scheduling.md); the embedded scheduler does not run on a hub")
	f.BoolVar(&o.quotaFromHub, "quota-from-hub", false, "with --cluster, in a worker of a hub: apply the teams' quotas whole, not this cluster's share (the hub enforces them fleet-wide)")
	f.StringVar(&o.hubNamespace, "hub-namespace", "", "namespace of the workers' kubeconfig Secrets (default: --leader-election-namespace, else the pod's namespace)")
	f.BoolVar(&o.hubPolicy.AllowProxy, "hub-allow-worker-proxy", false, "for labs: honour a worker kubeconfig's proxy-url (by default it is refused, and the hub reaches workers directly or through the proxy of its own environment, HTTPS_PROXY and NO_PROXY)")
	f.BoolVar(&o.hubPolicy.AllowInsecure, "hub-allow-insecure-workers", false, "for labs: honour a worker kubeconfig's insecure-skip-tls-verify (by default it is refused: the hub talks to workers over TLS only, verifying their certificates)")
	f.StringVar(&o.cluster, "cluster", "", "in a fleet of several clusters, the cluster this manager runs in: it applies that cluster's pools and its share of each team's quota (each flavor's quota split among the clusters by their planned GPUs of it)")
	f.StringSliceVar(&o.tfClusters, "terraform-clusters", nil, "with --terraform-dir, only these clusters are resized by Terraform (default: all)")
	f.StringVar(&o.terraformHook, "terraform-hook", "", "command of onprem and kwok modules' node hooks (default: this binary's 'hook kwok')")
	f.StringVar(&o.tfEnvSecret, "terraform-env-secret", "", "a Secret ([NAMESPACE/]NAME, default namespace: --leader-election-namespace) whose keys are environment variables of terraform, read at every run: TF_VAR_<name> sets a module variable (project, subnet_ids, ...), others are credentials (AWS_*, GOOGLE_*, TF_HTTP_PASSWORD, ...)")
	f.DurationVar(&o.staleLockAge, "terraform-stale-lock-age", 30*time.Minute, "a Terraform state lock held this long is reported as stale (the StateUnlocked condition) and waits for the annotation allot.dev/force-unlock=<lock ID>; the manager never releases one by itself (0: never reported)")
	f.DurationVar(&o.readyTimeout, "node-ready-timeout", 10*time.Minute, "how long a grown pool's nodes may take to be Ready before the quota raise waits for a retry")
	return c
}

func runManager(ctx context.Context, o managerOptions, cmd *cobra.Command) error {
	var h slog.Handler = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	if o.development {
		h = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	}
	log := logr.FromSlogHandler(h)
	ctrl.SetLogger(log)
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return usageError{fmt.Errorf("reaching the cluster: %w", err)}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := allotv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := sourcev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := jobsetv1.AddToScheme(scheme); err != nil {
		return err
	}
	metrics := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		// Metrics name teams, pools and their sizes: only those allowed to
		// read them get them, over TLS, as kube-controller-manager does.
		metrics.SecureServing, metrics.CertDir = true, o.metricsCerts
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderID,
		LeaderElectionNamespace:       o.leaderNS,
		LeaderElectionReleaseOnCancel: true,
		// Long enough for a Terraform apply to stop cleanly (60s after SIGINT).
		GracefulShutdownTimeout: ptr.To(90 * time.Second),
		Logger:                  log,
		// A manager set up again in one process (an embedding program, go
		// test -count=2) names its controllers as the first did; the first
		// still checks that the names are unique.
		Controller: config.Controller{SkipNameValidation: ptr.To(managersSetUp.Add(1) > 1)},
	})
	if err != nil {
		return fmt.Errorf("starting the manager: %w", err)
	}
	if err := setupManager(mgr, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting manager", "metrics", o.metricsAddr, "probes", o.probeAddr, "leaderElection", o.leaderElect,
		"scheduler", !o.noScheduler, "gitops", !o.noGitOps)
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("manager: %w", err)
	}
	return nil
}

// setupManager wires the reconcilers and the scheduler into mgr: the one place
// where the manager's parts are put together.
// managersSetUp counts the managers this process has set up.
var managersSetUp atomic.Int32

func setupManager(mgr ctrl.Manager, o managerOptions) error {
	if o.quotaFromHub && o.cluster == "" {
		return usageError{errors.New("--quota-from-hub needs --cluster: it applies that cluster's pools with the teams' whole quotas")}
	}
	switch o.scheduler {
	case "allot":
		if o.kueueLenient {
			return usageError{errors.New("--kueue-approximate is for --scheduler=kueue")}
		}
	case "kueue":
		o.noScheduler = true
		st := &kueue.StatusReconciler{Client: mgr.GetClient()}
		if err := st.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the Kueue team status reconciler: %w", err)
		}
	default:
		return usageError{fmt.Errorf("--scheduler %q: want allot or kueue", o.scheduler)}
	}
	if !o.noGitOps {
		if o.gitMaxBytes <= 0 {
			return usageError{fmt.Errorf("--git-max-bytes %d: want a positive number of bytes", o.gitMaxBytes)}
		}
		if err := os.MkdirAll(o.gitCache, 0o755); err != nil {
			return usageError{fmt.Errorf("--git-cache-dir: %w", err)}
		}
		r := &capacity.Reconciler{
			Client:       mgr.GetClient(),
			Reader:       mgr.GetAPIReader(),
			Fetcher:      capacity.Sources{Git: &capacity.GitFetcher{Dir: o.gitCache, Secrets: mgr.GetAPIReader(), MaxBytes: o.gitMaxBytes}, Flux: &capacity.FluxFetcher{Client: mgr.GetClient(), Dir: o.gitCache}},
			Recorder:     mgr.GetEventRecorder("allot-capacity"),
			Metrics:      capacity.NewMetrics(ctrlmetrics.Registry),
			Cluster:      schema.ClusterName(o.cluster),
			Kueue:        o.scheduler == "kueue",
			KueueLenient: o.kueueLenient,

			FleetQuotas: o.quotaFromHub,
		}
		if o.cluster != "" && len(o.tfClusters) == 0 {
			o.tfClusters = []string{o.cluster}
		}
		if o.terraformDir != "" {
			hook := o.terraformHook
			if hook == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--terraform-hook: %w", err)
				}
				hook = self + " hook kwok"
			}
			opts, err := o.backend.options()
			if err != nil {
				return err
			}
			tf := &capacity.Terraform{
				Reader: mgr.GetAPIReader(), Dir: o.terraformDir, Hook: hook, ReadyTimeout: o.readyTimeout, Options: opts, StaleLockAge: o.staleLockAge,
				Recorder: mgr.GetEventRecorder("allot-capacity"), Clusters: map[schema.ClusterName]bool{},
			}
			if o.tfEnvSecret != "" {
				ns, name, ok := strings.Cut(o.tfEnvSecret, "/")
				if !ok {
					ns, name = o.leaderNS, o.tfEnvSecret
				}
				if ns == "" || name == "" {
					return usageError{fmt.Errorf("--terraform-env-secret %q: want NAMESPACE/NAME, or NAME with --leader-election-namespace", o.tfEnvSecret)}
				}
				tf.EnvSecret = client.ObjectKey{Namespace: ns, Name: name}
			}
			for _, c := range o.tfClusters {
				tf.Clusters[schema.ClusterName(c)] = true
			}
			if o.kubeconfig != "" {
				// The node hooks reach the cluster as the manager does.
				abs, err := filepath.Abs(o.kubeconfig)
				if err != nil {
					return err
				}
				tf.Env = map[string]string{"KUBECONFIG": abs}
			}
			r.Capacity = tf
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the CapacitySource reconciler: %w", err)
		}
	}
	if o.hub {
		ns := cmp.Or(o.hubNamespace, o.ownNamespace())
		if ns == "" {
			return usageError{errors.New("--hub needs --hub-namespace (the namespace of the workers' kubeconfig Secrets) outside a pod")}
		}
		workers := hub.NewWorkers()
		metrics := hub.NewMetrics(ctrlmetrics.Registry)
		h := &hub.ClusterReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("allot-hub"), Namespace: ns, Metrics: metrics, Workers: workers, Policy: o.hubPolicy}
		if err := h.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the hub's Cluster reconciler: %w", err)
		}
		core := scheduler.DefaultOptions()
		if err := (&hub.Router{Workers: workers, Core: &core, Metrics: metrics}).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the hub's router: %w", err)
		}
		o.noScheduler = true // a hub has no GPU nodes: its jobs run in the workers
	}
	pools := &pool.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("allot-pool"),
		Metrics: pool.NewMetrics(ctrlmetrics.Registry)}
	if err := pools.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Pool health reconciler: %w", err)
	}
	if !o.noScheduler {
		core := o.core
		ns := o.ownNamespace()
		if ns == "" {
			ctrl.Log.WithName("scheduler").Info("the manager's namespace is unknown (outside a pod, without --leader-election-namespace): a bare pod taken back from a gang bound in part is lost if the leader stops before it is made again")
		}
		s := runner.New(runner.Options{SchedulerName: o.schedulerName, Core: &core, StrictTenancy: o.strictTenancy, Cluster: o.cluster, StatusInterval: o.statusInterval, NotReadyGrace: cmp.Or(o.notReadyGrace, -1), StateNamespace: ns})
		if err := s.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the scheduler: %w", err)
		}
		// Burst pools grow for the gangs this scheduler holds back for want
		// of nodes (the manager has not started: no reconcile has run yet).
		pools.Demand = s.Demand
	}
	return nil
}

// restConfig reads the kubeconfig named, else controller-runtime's default
// ($KUBECONFIG, in-cluster, ~/.kube/config).
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return ctrl.GetConfig()
}

// ownNamespace is the manager's namespace: --leader-election-namespace, else
// the pod's (its service account's); "" outside a pod without the flag.
func (o *managerOptions) ownNamespace() string {
	if o.leaderNS != "" {
		return o.leaderNS
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
