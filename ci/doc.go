// Package ci holds the CI templates that run allot on capacity-repository pull
// requests, and the tests that keep this repository's architecture rules.
package ci
