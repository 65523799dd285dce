package hub_test

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/hub"
	"github.com/allot-dev/allot/controllers/testenv"
)

// TestRefusedWorkersAreNotContacted: the hub talks to a worker over TLS
// only, straight to a server whose certificate it verifies, with inline
// credentials: a kubeconfig Secret that names an http:// server (in any
// case, or no scheme at all, which client-go would take as http without a
// CA), a proxy (http or socks5), an exec plugin (which would write a marker
// file), an auth-provider, a file of the manager's (tokenFile,
// client-certificate, certificate-authority), insecure-skip-tls-verify or
// impersonation is refused: the Cluster's Reachable and Ready conditions
// say KubeconfigRefused and which field, an event says it, and the token
// is in neither, nor in the logs. Every address the kubeconfigs name is a
// real listener that counts its connections: none is made, nor does the
// marker file exist.
func TestRefusedWorkersAreNotContacted(t *testing.T) {
	hubEnv := testenv.Start(t)
	c := hubEnv.Client
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, "no")
	}))
	srv.Listener = countingListener{srv.Listener, &dials}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	const token = "refused-s3cret-t0ken-0123456789"
	marker := filepath.Join(t.TempDir(), "pwned")
	kc := func(server, cluster, user string) []byte {
		return fmt.Appendf(nil, "apiVersion: v1\nkind: Config\nclusters: [{name: w, cluster: {server: %q, %s}}]\n"+
			"users: [{name: u, user: {token: %s, %s}}]\ncontexts: [{name: w, context: {cluster: w, user: u}}]\ncurrent-context: w\n", server, cluster, token, user)
	}
	withCA := "certificate-authority-data: " + ca
	for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}} {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	var logs testenv.SyncBuffer
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { fmt.Fprintln(&logs, prefix, args) }, funcr.Options{Verbosity: 10}))

	for name, tc := range map[string]struct {
		kubeconfig []byte
		want       string
	}{
		"http":                    {kc("http://"+addr, "", ""), "not an https:// address"},
		"HTTP in capitals":        {kc("HTTP://"+addr, withCA, ""), "not an https:// address"},
		"no scheme":               {kc("localhost:"+port, "", ""), "not an https:// address"},
		"no scheme, server name":  {kc("localhost:"+port, "tls-server-name: example.com", ""), "not an https:// address"},
		"http, server name":       {kc("http://"+addr, withCA+", tls-server-name: example.com", ""), "not an https:// address"},
		"proxy":                   {kc("https://"+addr, withCA+", proxy-url: 'http://"+addr+"'", ""), "(proxy-url)"},
		"socks5 proxy":            {kc("https://"+addr, withCA+", proxy-url: 'socks5://"+addr+"'", ""), "(proxy-url)"},
		"exec":                    {kc("https://"+addr, withCA, "exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', 'touch "+marker+"'], interactiveMode: Never}"), "(exec)"},
		"auth-provider":           {kc("https://"+addr, withCA, "auth-provider: {name: oidc, config: {idp-issuer-url: 'https://"+addr+"', client-id: x, id-token: x}}"), "auth-provider"},
		"tokenFile":               {kc("https://"+addr, withCA, "tokenFile: /etc/hostname"), "(tokenFile)"},
		"client-certificate file": {kc("https://"+addr, withCA, "client-certificate: /etc/ssl/certs/ca-certificates.crt, client-key: /etc/ssl/private/key.pem"), "(client-certificate or client-key)"},
		"certificate-authority":   {kc("https://"+addr, "certificate-authority: /etc/ssl/certs/ca-certificates.crt", ""), "(certificate-authority)"},
		"insecure":                {kc("https://"+addr, "insecure-skip-tls-verify: true", ""), "(insecure-skip-tls-verify)"},
		"as":                      {kc("https://"+addr, withCA, "as: system:admin, as-groups: [system:masters]"), "impersonates"},
		"as-uid":                  {kc("https://"+addr, withCA, "as-uid: '0'"), "impersonates"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := strings.NewReplacer(" ", "-", ",", "").Replace(strings.ToLower(name))
			for _, o := range []client.Object{
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj}, Data: map[string][]byte{"kubeconfig": tc.kubeconfig}},
				&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: obj}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: obj}}},
			} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			rec := events.NewFakeRecorder(16)
			cl := probeOnce(t, ctx, &hub.ClusterReconciler{Client: c, Reader: c, Recorder: rec, Namespace: ns, ProbeTimeout: 2 * time.Second, Workers: hub.NewWorkers()}, obj)
			for _, cond := range []string{allotv1.ReachableCondition, allotv1.ReadyCondition} {
				got := conditions.Get(cl, cond)
				if got == nil || got.Status != metav1.ConditionFalse || (cond == allotv1.ReachableCondition && got.Reason != hub.ReasonKubeconfigRefused) ||
					!strings.Contains(got.Message, tc.want) || strings.Contains(got.Message, token) {
					t.Errorf("%s: %+v, want False, %s, saying %q, without the token", cond, got, hub.ReasonKubeconfigRefused, tc.want)
				}
			}
			select {
			case e := <-rec.Events:
				if !strings.Contains(e, tc.want) || strings.Contains(e, token) {
					t.Errorf("event %q: want the refusal, without the token", e)
				}
			default:
				t.Error("no event for a refused kubeconfig")
			}
			if n := dials.Load(); n != 0 {
				t.Errorf("the addresses of the kubeconfig were dialed %d times", n)
			}
		})
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the exec plugin ran: %s exists (%v)", marker, err)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the logs quote the token:\n%s", logs.String())
	}
}

// TestWorkerProxyAllowedByTheOperator: a kubeconfig's proxy-url is refused
// (the proxy is not dialed), unless the operator allows it (allot manager
// --hub-allow-worker-proxy): then the hub reaches the worker, a real API
// server, through that proxy (a real CONNECT proxy, which counts the
// tunnels it opened to the worker), and the TLS session is the worker's.
func TestWorkerProxyAllowedByTheOperator(t *testing.T) {
	ctx := context.Background()
	hubEnv := testenv.Start(t)
	c := hubEnv.Client
	proxy := newConnectProxy(t)
	kc, err := hubEnv.Kubeconfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.ProxyURL = proxy.srv.URL
	}
	if kc, err = clientcmd.Write(*cfg); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(hubEnv.Config.Host, "https://"), "/")
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxied"}, Data: map[string][]byte{"kubeconfig": kc}},
		&allotv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "proxied"}, Spec: allotv1.ClusterSpec{KubeconfigSecretRef: allotv1.SecretKeyRef{Name: "proxied"}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r := &hub.ClusterReconciler{Client: c, Reader: c, Namespace: ns, ProbeTimeout: 5 * time.Second, Workers: hub.NewWorkers()}
	if cl := probeOnce(t, ctx, r, "proxied"); conditions.GetReason(cl, allotv1.ReachableCondition) != hub.ReasonKubeconfigRefused || proxy.connects.Load() != 0 {
		t.Fatalf("without the operator's flag: Reachable %+v, %d tunnels: want refused, none", conditions.Get(cl, allotv1.ReachableCondition), proxy.connects.Load())
	}
	r.Policy.AllowProxy = true
	if cl := probeOnce(t, ctx, r, "proxied"); !conditions.IsTrue(cl, allotv1.ReadyCondition) {
		t.Fatalf("with the operator's flag: Ready %+v", conditions.Get(cl, allotv1.ReadyCondition))
	}
	if got := proxy.targets(); len(got) == 0 || got[0] != host {
		t.Errorf("the proxy tunnelled to %v, want %s", got, host)
	}
}

// probeOnce reconciles Cluster name once with r and returns it.
func probeOnce(t *testing.T, ctx context.Context, r *hub.ClusterReconciler, name string) *allotv1.Cluster {
	t.Helper()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatal(err)
	}
	var cl allotv1.Cluster
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
		t.Fatal(err)
	}
	return &cl
}

// countingListener counts the connections it accepted.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// connectProxy is an HTTP proxy that tunnels CONNECT requests, and records
// where to.
type connectProxy struct {
	srv      *httptest.Server
	connects atomic.Int64
	mu       sync.Mutex
	to       []string
	conns    []net.Conn
}

func newConnectProxy(t *testing.T) *connectProxy {
	p := &connectProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.connects.Add(1)
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			_ = up.Close()
			return
		}
		p.mu.Lock()
		p.to, p.conns = append(p.to, r.Host), append(p.conns, up, down)
		p.mu.Unlock()
		_, _ = down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		go func() { _, _ = io.Copy(up, buf); _ = up.Close() }()
		_, _ = io.Copy(down, up)
		_ = down.Close()
	}))
	t.Cleanup(func() {
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.srv.Close()
	})
	return p
}

func (p *connectProxy) targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.to...)
}
