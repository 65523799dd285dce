// Package promreg registers Prometheus collectors so that a component set up
// twice in one process (a manager restarted by its caller, a test run twice)
// shares the collectors of the first set-up instead of panicking on the
// duplicate.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it or, when a collector of the
// same descriptors is registered already, that one. Descriptors that clash
// with another collector (same name, other labels or help) are a programming
// error: Register panics, as prometheus.MustRegister does.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}
