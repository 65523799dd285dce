// Package schema owns the capacity repository's data model: the CUE definitions
// that users write against (embedded in the binary), the loader that evaluates a
// directory of CUE files into typed Go values that keep their source positions, and
// the Finding type every check reports in.
package schema
