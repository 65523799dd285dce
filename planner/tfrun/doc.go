// Package tfrun runs Terraform on the root modules allot renders, through
// hashicorp/terraform-exec: init, plan into a saved plan file with the detailed
// exit code, show -json of that plan, and apply of that saved plan only. It
// summarises a plan per pool (nodes before and after, resources added, changed
// and destroyed), detects drift (the state changed outside allot, resources
// changed outside Terraform, a pool whose nodes in the cluster differ from the
// state), and turns Terraform's failures into typed errors an operator can act
// on: *LockError, *BinaryError, *VersionError, *ProviderError, *BackendError,
// *HookError and *DriftError. A run killed mid-apply leaves a state the next
// plan and apply converge from; a state lock is released only by an explicit
// ForceUnlock naming it (see ForceUnlock). Subpackage kwok is the node hook of
// kwok modules.
package tfrun
