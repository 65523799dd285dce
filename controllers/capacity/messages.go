package capacity

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of what a status and an event hold. The API server refuses a
// condition message over 32 KiB (metav1.Condition) and an event note over
// 1 KiB (events.k8s.io/v1), and a whole object over its request limit: an
// unbounded message (a revision's error quoting a 40 KiB value, Terraform's
// output) would make the status patch fail, and the source would go on
// saying what it said before.
const (
	maxConditionBytes = 32 << 10
	maxNoteBytes      = 1 << 10
	// maxFindingBytes bounds a finding's message in the status, and each
	// finding the Ready condition quotes.
	maxFindingBytes = 1 << 10
)

// truncated ends a message cut short by truncate.
const truncated = " ... (truncated)"

// truncate returns s cut to at most n bytes, on a character boundary, saying
// that it was.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(0, n-len(truncated))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncated
}

// redact returns s with each secret (of 3 bytes or more: a shorter one is too
// common a string to take out) replaced by ***.
func redact(s string, secrets []string) string {
	// Longest first, so that a part inside another goes with it.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "***")
		}
	}
	return s
}
