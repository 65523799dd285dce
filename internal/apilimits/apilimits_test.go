package apilimits

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTruncate: a message within the bound is kept whole; a longer one is
// cut to the bound on a character boundary (a cut inside a multi-byte
// character would be invalid UTF-8, which the API server refuses too) and
// says it was cut.
func TestTruncate(t *testing.T) {
	if got := Note("short"); got != "short" {
		t.Errorf("Note(short) = %q", got)
	}
	exact := strings.Repeat("a", NoteBytes)
	if got := Note(exact); got != exact {
		t.Errorf("a note of exactly %d bytes was cut", NoteBytes)
	}
	for _, s := range []string{
		strings.Repeat("a", NoteBytes+1),
		strings.Repeat("é", NoteBytes),       // 2 bytes each
		strings.Repeat("研", NoteBytes),       // 3 bytes each
		"x" + strings.Repeat("🙂", NoteBytes), // 4 bytes each, off by one
	} {
		got := Note(s)
		if len(got) > NoteBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, Truncated) || !strings.HasPrefix(s, strings.TrimSuffix(got, Truncated)) {
			t.Errorf("Note of %d bytes: %d bytes, valid UTF-8 %v, %q...", len(s), len(got), utf8.ValidString(got), got[:min(len(got), 20)])
		}
		if len(got) < NoteBytes-4 {
			t.Errorf("Note of %d bytes kept only %d", len(s), len(got))
		}
	}
	if got := Condition(strings.Repeat("b", 100<<10)); len(got) > ConditionBytes || len(got) < ConditionBytes-4 {
		t.Errorf("Condition of 100 KiB: %d bytes", len(got))
	}
	if got := Truncate("abcdef", 3); len(got) > 3 {
		t.Errorf("Truncate to less than the marker: %q", got)
	}
}
