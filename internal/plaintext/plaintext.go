// Package plaintext makes text from someone else (a repository, a worker
// cluster, a pod) safe to print as one line: in a terminal, a log, a CI
// annotation or an annotation allot writes.
package plaintext

import (
	"strconv"
	"strings"
	"unicode"
)

// Escape writes the control characters of s as Go escapes (\n, \x1b): a
// newline starts no line, an escape sequence moves no cursor.
func Escape(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
