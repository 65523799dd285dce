package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// Help of the /metrics flags (allot manager's say the same).
const (
	metricsSecureHelp = "serve /metrics over HTTPS to requests whose bearer token may get the non-resource URL /metrics (a TokenReview and a SubjectAccessReview; ClusterRole allot-metrics-reader); false: plain HTTP to anyone, for development only"
	metricsCertsHelp  = "directory of the metrics server's tls.crt and tls.key (default: a self-signed certificate)"
)

// serveMetrics serves g at /metrics on addr until ctx ends, the way the
// manager's controller-runtime metrics server does: with secure, over HTTPS
// (certDir's tls.crt and tls.key, reloaded when they change, or else a
// self-signed certificate) and only to bearer tokens allowed to get /metrics;
// without, over plain HTTP to anyone. It returns once it listens.
func serveMetrics(ctx context.Context, log logr.Logger, addr string, secure bool, certDir string, cfg *rest.Config, g prometheus.Gatherer) error {
	var h http.Handler = promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	var tlsCfg *tls.Config
	if secure {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return fmt.Errorf("serving metrics: %w", err)
		}
		filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
		if err != nil {
			return fmt.Errorf("serving metrics: %w", err)
		}
		if h, err = filter(log, h); err != nil {
			return fmt.Errorf("serving metrics: %w", err)
		}
		if tlsCfg, err = metricsTLS(ctx, log, certDir); err != nil {
			return fmt.Errorf("serving metrics: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serving metrics: %w", err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving metrics")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return nil
}

// metricsTLS is the TLS configuration of a secure metrics server: the
// certificate in certDir when there is one, else a self-signed one.
func metricsTLS(ctx context.Context, log logr.Logger, certDir string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if certDir != "" {
		crt, key := filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key")
		if _, err := os.Stat(crt); err != nil {
			return nil, fmt.Errorf("--metrics-cert-dir: %w", err)
		}
		w, err := certwatcher.New(crt, key)
		if err != nil {
			return nil, fmt.Errorf("--metrics-cert-dir: %w", err)
		}
		go func() {
			if err := w.Start(ctx); err != nil {
				log.Error(err, "watching the metrics certificate")
			}
		}()
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	crt, key, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}
