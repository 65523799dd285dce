// Package apilimits cuts what allot writes to a status, a condition or an
// event (the controllers, and the scheduler runner's pending reasons) to what
// the API server takes: it refuses a condition message over 32 KiB
// (metav1.Condition) and drops an event whose note is over 1 KiB
// (events.k8s.io/v1). An unbounded message (an error quoting a 40 KiB value,
// Terraform's output, the names of many faulty nodes) would make a status
// patch fail, so the object goes on saying what it said before, or lose the
// event without a trace.
package apilimits

import "unicode/utf8"

// The API server's bounds.
const (
	ConditionBytes = 32 << 10
	NoteBytes      = 1 << 10
)

// Truncated ends a message cut short.
const Truncated = " ... (truncated)"

// Truncate returns s cut to at most n bytes, on a character boundary, saying
// that it was (when n leaves room to).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := Truncated
	if n < len(marker) {
		marker = "" // no room to say so
	}
	cut := max(0, n-len(marker))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}

// Condition returns s cut to what a condition's message holds.
func Condition(s string) string { return Truncate(s, ConditionBytes) }

// Note returns s cut to what an event's note holds.
func Note(s string) string { return Truncate(s, NoteBytes) }
