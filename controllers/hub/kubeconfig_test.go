package hub

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestWorkerConfigRefuses: a worker's kubeconfig is input from whoever may
// write the Secret; what would run a command, read the manager's files or
// skip TLS verification is refused, with what and never a credential.
func TestWorkerConfigRefuses(t *testing.T) {
	kc := func(cluster, user string) string {
		return "apiVersion: v1\nkind: Config\nclusters: [{name: w, cluster: {server: 'https://w.example:6443', " + cluster + "}}]\n" +
			"users: [{name: u, user: {token: t0ps3cret, " + user + "}}]\ncontexts: [{name: w, context: {cluster: w, user: u}}]\ncurrent-context: w\n"
	}
	for name, c := range map[string]struct{ in, want string }{
		"exec":          {kc("", "exec: {apiVersion: client.authentication.k8s.io/v1, command: sh}"), "runs a command"},
		"auth-provider": {kc("", "auth-provider: {name: gcp}"), "auth-provider"},
		"token file":    {kc("", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"), "reads a file"},
		"client key":    {kc("", "client-key: /etc/ssl/private/key.pem"), "reads a file"},
		"CA file":       {kc("certificate-authority: /etc/kubernetes/pki/ca.crt", ""), "reads its CA from a file"},
		"insecure":      {kc("insecure-skip-tls-verify: true", ""), "skips TLS verification"},
		"http":          {strings.Replace(kc("", ""), "https://", "http://", 1), "not an https:// address"},
		"HTTP":          {strings.Replace(kc("", ""), "https://", "HTTP://", 1), "not an https:// address"},
		"no scheme":     {strings.Replace(kc("tls-server-name: w.example", ""), "https://", "", 1), "not an https:// address"},
		"IP, no scheme": {strings.Replace(kc("tls-server-name: w.example", ""), "https://w.example", "10.0.0.1", 1), "not an https:// address"},
		"unix":          {strings.Replace(kc("", ""), "https://w.example:6443", "unix:///var/run/docker.sock", 1), "not an https:// address"},
		"opaque":        {strings.Replace(kc("", ""), "https://", "https:", 1), "not an https:// address"},
		"no server":     {strings.Replace(kc("certificate-authority-data: eA==", ""), "server: 'https://w.example:6443', ", "", 1), "has no server"},
		"proxy":         {kc("proxy-url: 'http://user:t0ps3cret@proxy.example:3128'", ""), "proxy-url"},
		"socks5 proxy":  {kc("proxy-url: 'socks5://proxy.example:1080'", ""), "proxy-url"},
		"as":            {kc("", "as: system:admin"), "impersonates"},
		"as-groups":     {kc("", "as-groups: [system:masters]"), "impersonates"},
		"as-uid":        {kc("", "as-uid: '0'"), "impersonates"},
		"as-user-extra": {kc("", "as-user-extra: {scopes: [all]}"), "impersonates"},
		"client cert":   {kc("", "client-certificate: /etc/ssl/certs/hub.pem"), "reads a file"},
		"no context":    {strings.Replace(kc("", ""), "current-context: w", "current-context: x", 1), `current context "x" not found`},
		"server user":   {strings.Replace(kc("", ""), "https://w.example", "https://admin:t0ps3cret@w.example", 1), "not a plain https://host:port"},
		"server query":  {strings.Replace(kc("", ""), ":6443", ":6443/?access_token=t0ps3cret", 1), "not a plain https://host:port"},
		"garbage":       {"{{{", "does not parse"},
		"too large":     {strings.Repeat("#", MaxKubeconfigBytes+1), "more than"},
	} {
		_, err := WorkerConfig([]byte(c.in), WorkerPolicy{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "t0ps3cret") {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
	cfg, err := WorkerConfig([]byte(kc("", "")), WorkerPolicy{})
	if err != nil || cfg.Host != "https://w.example:6443" || cfg.BearerToken != "t0ps3cret" {
		t.Fatalf("a plain kubeconfig: %v, %+v", err, cfg)
	}
	// What the operator allows, for labs.
	for name, c := range map[string]struct {
		in string
		p  WorkerPolicy
	}{
		"proxy":    {kc("proxy-url: 'socks5://proxy.example:1080'", ""), WorkerPolicy{AllowProxy: true}},
		"insecure": {kc("insecure-skip-tls-verify: true", ""), WorkerPolicy{AllowInsecure: true}},
	} {
		if _, err := WorkerConfig([]byte(c.in), c.p); err != nil {
			t.Errorf("%s allowed: %v", name, err)
		}
	}
	// Allowed, a proxy-url is still checked, and never quoted.
	_, err = WorkerConfig([]byte(kc("proxy-url: 'ftp://user:t0ps3cret@proxy.example'", "")), WorkerPolicy{AllowProxy: true})
	if err == nil || !strings.Contains(err.Error(), "proxy-url is not") || strings.Contains(err.Error(), "t0ps3cret") {
		t.Errorf("an ftp:// proxy-url: %v", err)
	}
}

// FuzzWorkerConfig: no kubeconfig makes WorkerConfig panic, and what it
// accepts runs no command and reads no file.
func FuzzWorkerConfig(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte("clusters: [{name: w, cluster: {server: 'https://x'}}]\ncontexts: [{name: w, context: {cluster: w}}]\ncurrent-context: w\n"))
	f.Add([]byte("clusters: [{name: w, cluster: {server: 'x:1', tls-server-name: x, proxy-url: 'http://proxy.example:1'}}]\ncontexts: [{name: w, context: {cluster: w}}]\ncurrent-context: w\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := WorkerConfig(b, WorkerPolicy{})
		if err != nil {
			return
		}
		u, _, err := rest.DefaultServerUrlFor(cfg)
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" || cfg.Insecure ||
			cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0 || err != nil || u.Scheme != "https" {
			t.Fatalf("accepted %+v", cfg)
		}
		// The environment's proxy (the operator's), never one of the Secret's.
		req := &http.Request{URL: u}
		pu, err := cfg.Proxy(req)
		env, _ := http.ProxyFromEnvironment(req)
		if err != nil || fmt.Sprint(pu) != fmt.Sprint(env) {
			t.Fatalf("accepted proxy %v, not the environment's %v: %+v", pu, env, cfg)
		}
	})
}
