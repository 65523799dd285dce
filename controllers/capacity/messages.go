package capacity

import (
	"slices"
	"strings"
)

// maxFindingBytes bounds a finding's message in the status, and each finding
// the Ready condition quotes (apilimits has the API server's bounds).
const maxFindingBytes = 1 << 10

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
