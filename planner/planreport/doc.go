// Package planreport owns how a plan and its diff are shown: an aligned text table for
// terminals, Markdown for the pull-request comment, and the JSON of docs/contracts.md's
// contract. It writes to an io.Writer and does nothing else.
package planreport
