// Package kube renders the Kubernetes objects of a capacity repository: a
// Namespace per team, a PriorityClass per tier, and the allot.dev/v1alpha1
// Cohorts, Tiers, Pools (sized by the plan) and Teams. Every object carries
// app.kubernetes.io/managed-by: allot. Manifests are YAML, one file per kind,
// numbered in the order they are safe to apply (capacity before the quotas
// that need it); objects are sorted by name and keys by the YAML encoder, so
// the same input gives the same bytes. It is pure: no client, no files.
package kube
