// Package runner runs Terraform on the root modules allot renders, through
// hashicorp/terraform-exec: init, plan into a saved plan file with the detailed
// exit code, show -json of that plan, and apply of that saved plan only. It
// summarises a plan per pool (nodes before and after, resources added, changed
// and destroyed) and turns Terraform's failures into typed errors an operator
// can act on: *LockError, *BinaryError, *VersionError, *ProviderError,
// *BackendError, *HookError and *DriftError.
package runner
