package hub

import (
	"strings"
	"testing"
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
		"no context":    {strings.Replace(kc("", ""), "current-context: w", "current-context: x", 1), `current context "x" not found`},
		"server user":   {strings.Replace(kc("", ""), "https://w.example", "https://admin:t0ps3cret@w.example", 1), "not a plain https://host:port"},
		"server query":  {strings.Replace(kc("", ""), ":6443", ":6443/?access_token=t0ps3cret", 1), "not a plain https://host:port"},
		"garbage":       {"{{{", "does not parse"},
		"too large":     {strings.Repeat("#", MaxKubeconfigBytes+1), "more than"},
	} {
		_, err := WorkerConfig([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "t0ps3cret") {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
	cfg, err := WorkerConfig([]byte(kc("", "")))
	if err != nil || cfg.Host != "https://w.example:6443" || cfg.BearerToken != "t0ps3cret" {
		t.Fatalf("a plain kubeconfig: %v, %+v", err, cfg)
	}
}

// FuzzWorkerConfig: no kubeconfig makes WorkerConfig panic, and what it
// accepts runs no command and reads no file.
func FuzzWorkerConfig(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte("clusters: [{name: w, cluster: {server: 'https://x'}}]\ncontexts: [{name: w, context: {cluster: w}}]\ncurrent-context: w\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := WorkerConfig(b)
		if err != nil {
			return
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" || cfg.Insecure {
			t.Fatalf("accepted %+v", cfg)
		}
	})
}
