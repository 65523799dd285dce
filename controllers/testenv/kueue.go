package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// KueueNamespace is where the Kueue controller keeps its webhook certificate.
const KueueNamespace = "kueue-system"

// Kueue is a Kueue controller running against a test control plane.
type Kueue struct {
	// Log is the controller's output, for a failing test to show.
	Log *SyncBuffer
	cmd *exec.Cmd
}

// SyncBuffer is a bytes.Buffer a process or goroutines write to while a test
// reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartKueue installs Kueue's CRDs into env and runs bin/kueue ('make kueue'
// builds it and copies its CRDs to bin/kueue-crds) against it until the test
// ends. Two changes make Kueue run on a bare API server, neither of them in
// Kueue: the CRDs store v1beta2 (Kueue's own version) and serve only it, so
// the conversion webhook they name (at an address nothing listens on) is
// never called; and Kueue's internal certificate management makes the
// webhook and metrics certificates, with the webhook server on a free
// loopback port; the test copies the certificate from its Secret into the
// webhook server's CertDir, as the kubelet does where the Secret is
// mounted. Kueue's admission webhooks are not registered: Jobs are created
// suspended, as its webhook would make them.
func StartKueue(t testing.TB, env *Env) *Kueue {
	t.Helper()
	bin := filepath.Join(Assets(), "kueue")
	crdDir := filepath.Join(Assets(), "kueue-crds")
	for _, p := range []string{bin, crdDir} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("testenv: %s not found: run 'make kueue'", p)
		}
	}
	ctx := context.Background()
	if err := installCRDs(ctx, env, crdDir); err != nil {
		t.Fatalf("testenv: installing Kueue's CRDs: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}
	if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, ns)); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kueue-webhook-server-cert", Namespace: KueueNamespace}}
	if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, secret)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
leaderElection:
  leaderElect: false
health:
  healthProbeBindAddress: "0"
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
internalCertManagement:
  enable: true
clientConnection:
  qps: 1000
  burst: 2000
integrations:
  frameworks: ["batch/job"]
`, KueueNamespace, port, certDir)
	configFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	k := &Kueue{Log: &SyncBuffer{}}
	k.cmd = exec.Command(bin, "--config", configFile, "--feature-gates", "VisibilityOnDemand=false", "--zap-log-level", "2")
	k.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	k.cmd.Stdout, k.cmd.Stderr = k.Log, k.Log
	started := time.Now()
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("testenv: starting kueue: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- k.cmd.Wait() }()
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("kueue's log:\n%s", k.Log)
		}
	})
	// Kueue's certificate rotator writes the webhook certificate into the
	// Secret and then waits for the files to appear in its CertDir, which in
	// a cluster the kubelet does by mounting the Secret; until they appear its
	// certificate bootstrap blocks and nothing else starts. Here the test
	// writes them, as the kubelet would.
	mounted := false
	// Ready when its webhook server (started after the certificates) listens.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if !mounted {
			if mounted, err = mountSecret(ctx, env, secret, certDir); err != nil {
				t.Fatalf("testenv: copying Kueue's certificate to %s: %v", certDir, err)
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("testenv: kueue exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
			c.Close()
			t.Logf("testenv: kueue serving %s after starting it", time.Since(started).Round(100*time.Millisecond))
			return k
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: kueue not serving within 60s (certificate copied to %s: %v)", certDir, mounted)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountSecret writes the files of secret, once it holds a certificate and
// its key, into dir, and reports whether it did.
func mountSecret(ctx context.Context, env *Env, secret *corev1.Secret, dir string) (bool, error) {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		return false, err
	}
	if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	// The certificate last: Kueue waits for it to exist, then reads both.
	for _, name := range []string{"ca.crt", "tls.key", "tls.crt"} {
		if b, ok := secret.Data[name]; ok {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// installCRDs creates the CRDs in dir, each storing and serving its
// newest version only, and waits until they are established.
func installCRDs(ctx context.Context, env *Env, dir string) error {
	scheme := NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", dir)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		keep := len(crd.Spec.Versions) - 1
		for i, v := range crd.Spec.Versions {
			if v.Name == "v1beta2" {
				keep = i
			}
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = i == keep
			crd.Spec.Versions[i].Served = i == keep
		}
		if len(crd.Spec.Versions) > 1 {
			// Kueue's certificate manager fills in the CA of the conversion
			// webhook of these CRDs: give it one to fill (never called).
			url := "https://127.0.0.1:1/convert"
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, crd)); err != nil {
			return fmt.Errorf("%s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			if established(crd) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not established within 30s", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
