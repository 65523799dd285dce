package markdown

import "testing"

// TestText: what a pull request can put in a cost centre or a message
// renders as text: each construct is escaped, and plain text is kept as it
// is (names, numbers, money).
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"CC-1051 team-a h100-80gb $1,234.50 (2 nodes)": "CC-1051 team-a h100-80gb $1,234.50 (2 nodes)",
		"a | b":                            `a \| b`,
		"![x](https://evil.example/p.png)": `\!\[x\](https://evil.example/p.png)`,
		"[click](https://evil.example)":    `\[click\](https://evil.example)`,
		"<img src=x onerror=alert(1)>":     "&lt;img src=x onerror=alert(1)&gt;",
		"@acme/everyone please approve":    "@&#8203;acme/everyone please approve",
		"`code` **bold** _it_ ~~del~~":     "\\`code\\` \\*\\*bold\\*\\* \\_it\\_ \\~\\~del\\~\\~",
		"line\nbreak\r\nand\rmore":         "line break and more",
		`back\slash`:                       `back\\slash`,
		"&#x2028; &amp;":                   "&amp;#x2028; &amp;amp;",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCode: a code span that its text cannot end, nor split a table cell.
func TestCode(t *testing.T) {
	for in, want := range map[string]string{
		"teams/ads.cue:4:2":         "`teams/ads.cue:4:2`",
		"a`![x](https://evil)`.cue": "``a`![x](https://evil)`.cue``",
		"``x":                       "``` ``x ```",
		"a|b\nc":                    "`a\\|b c`",
	} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMention: an approver that is a GitHub user or team stays a mention (the
// comment asks them to review); anything else is text.
func TestMention(t *testing.T) {
	for in, want := range map[string]string{
		"@acme/finance":           "@acme/finance",
		"@nlp-leads":              "@nlp-leads",
		"finance":                 "finance",
		"@acme/x ![i](https://e)": `@&#8203;acme/x \!\[i\](https://e)`,
	} {
		if got := Mention(in); got != want {
			t.Errorf("Mention(%q) = %q, want %q", in, got, want)
		}
	}
}
