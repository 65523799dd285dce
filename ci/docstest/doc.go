// Package docstest keeps README.md and docs/*.md true: its test runs every
// shell block they show (checking the output they show) or finds it marked
// illustrative with the reason, and fails on a citation of a file that is not
// in the repository. The convention is at the top of docs/development.md.
package docstest
