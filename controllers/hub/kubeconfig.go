package hub

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WorkerPolicy is what the operator allows a worker's kubeconfig beyond the
// hub's rule: TLS, straight to a server whose certificate verifies, with
// inline credentials. Both are for labs, and off by default.
type WorkerPolicy struct {
	// AllowProxy honours a kubeconfig's proxy-url (allot manager
	// --hub-allow-worker-proxy); off, such a kubeconfig is refused: the
	// Secret would choose where the hub's connections to the worker go.
	AllowProxy bool
	// AllowInsecure honours insecure-skip-tls-verify (allot manager
	// --hub-allow-insecure-workers); off, such a kubeconfig is refused:
	// whoever sits on the way would get the worker's credentials.
	AllowInsecure bool
}

// refusal is a kubeconfig the hub reads but will not use: it asks for what
// the hub does not do with a Secret's word (run a command, read a file of
// the manager's, talk to the worker in clear or through a proxy, act as
// someone else). The Cluster says so with ReasonKubeconfigRefused.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

func refused(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// WorkerConfig turns a worker's kubeconfig into a client configuration. The
// kubeconfig is input from whoever may write the Secret: only its current
// context is used, bounded in size; the server must be https:// and its
// certificate verified (unless p.AllowInsecure), reached directly (a
// proxy-url only if p.AllowProxy; the proxy of the manager's environment,
// HTTPS_PROXY and NO_PROXY, is the operator's and is used: through it the
// TLS session still ends at the worker); credentials are inline only. A
// kubeconfig that would run a command (exec, auth-provider), read a file
// of the manager's (token, certificate, key or CA file), impersonate (as,
// as-uid, as-groups, as-user-extra) or do what p does not allow is refused.
// The error names the field, never a credential, the server or the proxy.
func WorkerConfig(data []byte, p WorkerPolicy) (*rest.Config, error) {
	if len(data) > MaxKubeconfigBytes {
		return nil, fmt.Errorf("kubeconfig of %d bytes: more than %d", len(data), MaxKubeconfigBytes)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.New("not a kubeconfig (it does not parse)")
	}
	ctxName := kc.CurrentContext
	kctx := kc.Contexts[ctxName]
	if kctx == nil {
		return nil, fmt.Errorf("kubeconfig: current context %q not found", ctxName)
	}
	if ai := kc.AuthInfos[kctx.AuthInfo]; ai != nil {
		if err := checkUser(kctx.AuthInfo, ai); err != nil {
			return nil, err
		}
	}
	cl := kc.Clusters[kctx.Cluster]
	if cl == nil {
		return nil, fmt.Errorf("kubeconfig: cluster %q of the current context not found", kctx.Cluster)
	}
	if err := checkCluster(kctx.Cluster, cl, p); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*kc, ctxName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// What client-go dials, whatever led there: https, or nothing.
	if u, _, err := rest.DefaultServerUrlFor(cfg); err != nil || u.Scheme != "https" {
		return nil, refused("kubeconfig cluster %q: its server is not reached over https: refused", kctx.Cluster)
	}
	if cfg.Proxy == nil {
		// client-go's default, made explicit: the environment's proxy.
		cfg.Proxy = http.ProxyFromEnvironment
	}
	return cfg, nil
}

// checkUser refuses the credentials that are not inline data.
func checkUser(name string, ai *clientcmdapi.AuthInfo) error {
	only := "only inline credentials (token, client-certificate-data and client-key-data, username and password) are accepted"
	switch {
	case ai.Exec != nil:
		return refused("kubeconfig user %q runs a command (exec): %s", name, only)
	case ai.AuthProvider != nil:
		return refused("kubeconfig user %q uses an auth-provider plugin: %s", name, only)
	case ai.TokenFile != "":
		return refused("kubeconfig user %q reads a file (tokenFile): %s", name, only)
	case ai.ClientCertificate != "" || ai.ClientKey != "":
		return refused("kubeconfig user %q reads a file (client-certificate or client-key): %s", name, only)
	case ai.Impersonate != "" || ai.ImpersonateUID != "" || len(ai.ImpersonateGroups) > 0 || len(ai.ImpersonateUserExtra) > 0:
		return refused("kubeconfig user %q impersonates (as, as-uid, as-groups or as-user-extra): the hub acts in a worker as its credentials' own user", name)
	}
	return nil
}

// checkCluster refuses a server that is not https://host[:port][/path], and
// what p does not allow.
func checkCluster(name string, cl *clientcmdapi.Cluster, p WorkerPolicy) error {
	u, err := url.Parse(cl.Server)
	switch {
	case cl.Server == "":
		// clientcmd would fill in KUBERNETES_MASTER or http://localhost:8080.
		return refused("kubeconfig cluster %q has no server", name)
	case err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return refused("kubeconfig cluster %q: its server is not an https:// address: the hub talks to workers over TLS only", name)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		// Credentials in the address would be sent (basic auth) and quoted
		// wherever the address is, in conditions and events.
		return refused("kubeconfig cluster %q: its server is not a plain https://host:port address (no user, password or query): credentials go in the user", name)
	case cl.CertificateAuthority != "":
		return refused("kubeconfig cluster %q reads its CA from a file (certificate-authority): only certificate-authority-data is accepted", name)
	case cl.InsecureSkipTLSVerify && !p.AllowInsecure:
		return refused("kubeconfig cluster %q skips TLS verification (insecure-skip-tls-verify): refused; give its CA in certificate-authority-data (an operator may allow it for labs: --hub-allow-insecure-workers)", name)
	case cl.ProxyURL != "" && !p.AllowProxy:
		return refused("kubeconfig cluster %q goes through a proxy (proxy-url): refused; the hub reaches workers directly, or through the proxy of its own environment (an operator may allow it for labs: --hub-allow-worker-proxy)", name)
	}
	if cl.ProxyURL != "" {
		// Checked here: clientcmd would quote it, password and all.
		pu, err := url.Parse(cl.ProxyURL)
		if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https" && pu.Scheme != "socks5") {
			return refused("kubeconfig cluster %q: its proxy-url is not an http://, https:// or socks5:// address", name)
		}
	}
	return nil
}

// unquoted is err with every credential of cfg cut out of its text: what a
// worker's API server (or whatever answers at its address, or the proxy on
// the way) says goes into the Cluster's conditions and events, and it may
// echo the request's credentials back.
func unquoted(err error, cfg *rest.Config) error {
	msg := err.Error()
	secrets := []string{cfg.BearerToken, cfg.Password, string(cfg.KeyData)}
	if cfg.Username != "" || cfg.Password != "" {
		secrets = append(secrets, basicAuth(cfg.Username, cfg.Password))
	}
	if pu := proxyOf(cfg); pu != nil && pu.User != nil {
		pw, _ := pu.User.Password()
		secrets = append(secrets, pw, basicAuth(pu.User.Username(), pw))
	}
	cut := false
	for _, s := range secrets {
		if len(s) >= 4 && strings.Contains(msg, s) {
			msg, cut = strings.ReplaceAll(msg, s, "[redacted]"), true
		}
	}
	if !cut {
		return err
	}
	return &probeError{ReasonUnreachable, errors.New(msg)}
}

func basicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// proxyOf is the proxy cfg's requests to its server go through, if any.
func proxyOf(cfg *rest.Config) *url.URL {
	if cfg.Proxy == nil {
		return nil
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil
	}
	pu, err := cfg.Proxy(&http.Request{URL: u})
	if err != nil {
		return nil
	}
	return pu
}
