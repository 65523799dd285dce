//go:build tools

// Package kueue pins the Kueue release the tests run against; 'make kueue'
// builds sigs.k8s.io/kueue/cmd/kueue from it into bin/.
package kueue

import _ "sigs.k8s.io/kueue/cmd/kueue"
