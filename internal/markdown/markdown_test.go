package markdown

import "testing"

// TestText: what a pull request can put in a cost centre or a message
// renders as text: each construct is escaped, and plain text is kept as it
// is (names, numbers, money).
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"CC-1051 team-a h100-80gb $1,234.50 (2 nodes)": "CC-1051 team-a h100-80gb $1,234.50 (2 nodes)",
		"a | b":                                           `a \| b`,
		"![x](https://evil.example/p.png)":                `\!\[x\](https:&#8203;//evil.example/p.png)`,
		"[click](https://evil.example)":                   `\[click\](https:&#8203;//evil.example)`,
		"<img src=x onerror=alert(1)>":                    "&lt;img src=x onerror=alert(1)&gt;",
		"@acme/everyone please approve":                   "@&#8203;acme/everyone please approve",
		"`code` **bold** _it_ ~~del~~":                    "\\`code\\` \\*\\*bold\\*\\* \\_it\\_ \\~\\~del\\~\\~",
		"line\nbreak\r\nand\rmore":                        "line break and more",
		`back\slash`:                                      `back\\slash`,
		"&#x2028; &amp;":                                  "&amp;#&#8203;x2028; &amp;amp;",
		"see https://evil.example/x":                      "see https:&#8203;//evil.example/x",
		"ftp://a FTP://b xmpp://c":                        "ftp:&#8203;//a FTP:&#8203;//b xmpp:&#8203;//c",
		"www.evil.example WWW.x.io":                       "www&#8203;.evil.example WWW&#8203;.x.io",
		"mail me@evil.example":                            "mail me@&#8203;evil.example",
		"fixes #12, acme/infra#3, GH-4":                   "fixes #&#8203;12, acme/infra#&#8203;3, GH-&#8203;4",
		"commit a5c3785ed8d6a35868bc169f07e40e889087fd2e": "commit a5c378&#8203;5ed8d6&#8203;a35868&#8203;bc169f&#8203;07e40e&#8203;889087&#8203;fd2e",
		"acme/infra@a5c3785 1234567":                      "acme/infra@&#8203;a5c378&#8203;5 1234567",
		"zero\u200bwidth":                                 "zero&#8203;width",
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
		"@acme/x ![i](https://e)": `@&#8203;acme/x \!\[i\](https:&#8203;//e)`,
	} {
		if got := Mention(in); got != want {
			t.Errorf("Mention(%q) = %q, want %q", in, got, want)
		}
	}
}
