// Package render turns a capacity repository and its plan into the files that
// make it real: Kubernetes manifests under kubernetes/ (package kube) and one
// Terraform root module per cluster under terraform/<cluster>/ (package
// terraform). It is pure: it returns the files as values, sorted by path, and the
// caller writes them. The same input gives the same bytes.
package render
