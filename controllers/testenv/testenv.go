// Package testenv starts a real kube-apiserver and etcd (controller-runtime's
// envtest, with the binaries 'make controlplane' builds into bin/) with allot's
// CRDs installed, for controller, scheduler and agent tests.
//
// Tests that need it call Start; when the binaries are missing the test fails
// with the command that builds them: it never skips into a pass.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/prometheus/client_golang/prometheus"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a direct (uncached) client with Scheme.
	Client client.Client
	// Scheme knows the core Kubernetes types and allot.dev/v1alpha1.
	Scheme *runtime.Scheme

	te *envtest.Environment
}

// StopAPIServer stops the API server and leaves etcd running, as an outage
// of a cluster's control plane: its clients get no answer until
// StartAPIServer. An API server that does not stop within apiServerStop
// (it waits for its watches) is killed.
func (e *Env) StopAPIServer() error {
	err := e.te.ControlPlane.GetAPIServer().Stop()
	if err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return err
	}
	addr := e.te.ControlPlane.GetAPIServer().SecureServing.ListenAddr.HostPort()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		_ = conn.Close()
	}
	return fmt.Errorf("the API server still listens on %s", addr)
}

// apiServerStop bounds how long an API server may take to stop.
const apiServerStop = 5 * time.Second

// StartAPIServer starts the API server StopAPIServer stopped, at the same
// address, with the same certificates and the same data.
func (e *Env) StartAPIServer() error { return e.te.ControlPlane.GetAPIServer().Start() }

// Root is the repository root (where go.mod is).
func Root() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Assets is the directory holding kube-apiserver and etcd: KUBEBUILDER_ASSETS
// when set, else the repository's bin/.
func Assets() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(Root(), "bin")
}

// NewScheme returns a scheme with the core Kubernetes types, allot's and
// Flux's sources (source.toolkit.fluxcd.io/v1) and JobSet.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(s))
	must(allotv1.AddToScheme(s))
	must(sourcev1.AddToScheme(s))
	must(jobsetv1.AddToScheme(s))
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

var startMu sync.Mutex

// Start starts a control plane for the test and stops it when the test ends.
// Each call starts its own API server and etcd: tests in one package that can
// share one should share it (TestMain or a package-level sync.Once).
func Start(t testing.TB) *Env {
	t.Helper()
	env, stop, err := start()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Logf("testenv: stopping the control plane: %v", err)
		}
	})
	return env
}

// StartMain is Start for TestMain: it returns the environment and a stop
// function, or an error that says how to build the binaries.
func StartMain() (*Env, func() error, error) { return start() }

func start() (*Env, func() error, error) {
	startMu.Lock()
	defer startMu.Unlock()
	assets := Assets()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, nil, &MissingError{Dir: assets, Binary: b}
		}
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// Flux's source CRDs (GitRepository, OCIRepository, Bucket, copied
		// from source-controller v1.9.6, the version of its API in go.mod):
		// CapacitySources may name them.
		CRDDirectoryPaths:     []string{filepath.Join(Root(), "config", "crd"), filepath.Join(Root(), "controllers", "testenv", "testdata", "fluxcrd")},
		ErrorIfCRDPathMissing: true,
	}
	// Certificates in a directory of its own, kept over a restart of the API
	// server (StopAPIServer): envtest makes new ones in a directory it
	// allocates.
	certs, err := os.MkdirTemp("", "allot-apiserver-")
	if err != nil {
		return nil, nil, err
	}
	te.ControlPlane.GetAPIServer().CertDir = certs
	te.ControlPlane.GetAPIServer().StopTimeout = apiServerStop
	stop := func() error {
		err := te.Stop()
		return errors.Join(err, os.RemoveAll(certs))
	}
	cfg, err := te.Start()
	if err != nil {
		_ = stop()
		return nil, nil, err
	}
	// Client-side rate limits slow tests and benchmarks down for nothing.
	cfg.QPS, cfg.Burst = 5000, 10000
	scheme := NewScheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = stop()
		return nil, nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, te: te}, stop, nil
}

// MissingError says a control-plane binary is missing and how to build it.
type MissingError struct{ Dir, Binary string }

func (e *MissingError) Error() string {
	return e.Binary + " not found in " + e.Dir + ": run 'make controlplane' (or set KUBEBUILDER_ASSETS)"
}

// CreateNode creates a Node with gpus nvidia.com/gpu and labels that reports
// Ready, as a kubelet would: the API server's admission taints every new Node
// node.kubernetes.io/not-ready, so the taint is cleared after the status is set.
func CreateNode(ctx context.Context, c client.Client, name string, gpus int64, labels map[string]string) (*corev1.Node, error) {
	n := &corev1.Node{}
	n.Name = name
	n.Labels = labels
	if err := c.Create(ctx, n); err != nil {
		return nil, err
	}
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	n.Status.Capacity = corev1.ResourceList{nodestate.ResourceGPU: q, corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2Ti"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, n); err != nil {
		return nil, err
	}
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if len(taints) != len(n.Spec.Taints) {
		n.Spec.Taints = taints
		if err := c.Update(ctx, n); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// WriteKubeconfig writes a kubeconfig that reaches the control plane as an
// administrator, for a process started beside the test (allot manager, kubectl).
func (e *Env) WriteKubeconfig(path string) error { return e.WriteKubeconfigAs(path, "") }

// WriteKubeconfigAs is WriteKubeconfig impersonating user (e.g.
// system:serviceaccount:allot-system:allot-manager), so that the process has
// only the rights RBAC gives that user; "" is the administrator.
func (e *Env) WriteKubeconfigAs(path, user string) error {
	return clientcmd.WriteToFile(*e.kubeconfig(user), path)
}

// Kubeconfig is the kubeconfig WriteKubeconfigAs writes, with its credentials
// inline, as bytes (say, for a Secret).
func (e *Env) Kubeconfig(user string) ([]byte, error) { return clientcmd.Write(*e.kubeconfig(user)) }

func (e *Env) kubeconfig(user string) *clientcmdapi.Config {
	c := e.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken, Impersonate: user}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	return cfg
}

// Eventually polls f every 50ms until it returns nil; after timeout the test
// fails, saying what it waited for and f's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

// FreeAddr returns a loopback address with a port free now, for a server the
// test starts (metrics, probes).
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// CreateJobPods makes the pods of Job ns/name as its Job controller would
// (no controller runs beside the test API server): parallelism pods named
// <name>-<i>, with the template's labels and spec and the Job as their
// controller. It returns their names.
func CreateJobPods(ctx context.Context, c client.Client, ns, name string) ([]string, error) {
	var j batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
		return nil, err
	}
	n := int32(1)
	if j.Spec.Parallelism != nil {
		n = *j.Spec.Parallelism
	}
	var names []string
	for i := range n {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", name, i), Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}},
			Spec: j.Spec.Template.Spec}
		if err := c.Create(ctx, p); err != nil {
			return names, err
		}
		names = append(names, p.Name)
	}
	return names, nil
}

// Metric is the value of the first gauge or counter of family name in g
// whose labels include every one of want; -1 when there is none.
func Metric(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			has := map[string]string{}
			for _, l := range m.GetLabel() {
				has[l.GetName()] = l.GetValue()
			}
			matches := true
			for k, v := range want {
				matches = matches && has[k] == v
			}
			if !matches {
				continue
			}
			if gauge := m.GetGauge(); gauge != nil {
				return gauge.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
