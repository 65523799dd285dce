package plaintext

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain: 8 GPUs":         "plain: 8 GPUs",
		"two\nlines":            `two\nlines`,
		"\x1b[2Jcleared":        `\x1b[2Jcleared`,
		"tab\there, ünïcode":    `tab\there, ünïcode`,
		"c1 \u009b31m and \x7f": `c1 \u009b31m and \x7f`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
