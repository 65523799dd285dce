package main

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hostileText is free text a pull request can put in a capacity repository
// (here a cost centre): every kind of thing GitHub links, mentions or
// renders in a comment.
const hostileText = `CC-1 see https://evil.example/a HTTP://b.example ftp://c.example (www.evil.example) *www.x.example ` +
	`mail x.y+z@evil.example ping @evil-user and @acme/everyone, fixes #12 acme/infra#3 GH-4 gh-5 ` +
	`a5c3785ed8d6a35868bc169f07e40e889087fd2e acme/infra@a5c3785 DEADBEEF12 1234567890 <img src=x onerror=alert(1)> ` +
	"<a href=https://e.example>a</a> [l](https://e.example) ![i](https://e.example/p.png) *b* `c` | d\n# heading\n> quote"

// githubLinks is what GitHub turns into a link, a mention or a reference in
// the text of a comment (entities decoded, code spans aside): an @ after a
// non-word character and before a name; www. after the start, a space or
// *_~(; a scheme's ://; an e-mail address; #123; GH-123; 7 or more hex
// digits with a letter among them (a number stays whole); a link.
var githubLinks = map[string]*regexp.Regexp{
	"mention":   regexp.MustCompile(`(?:^|[^A-Za-z0-9_` + "`" + `])(@[A-Za-z0-9-]+(?:/[A-Za-z0-9._-]+)?)`),
	"www":       regexp.MustCompile(`(?i)(?:^|[\s*_~(])www\.`),
	"scheme":    regexp.MustCompile(`(?i)[a-z]+://`),
	"e-mail":    regexp.MustCompile(`[A-Za-z0-9._+-]@[A-Za-z0-9_-]+\.`),
	"issue":     regexp.MustCompile(`(?:^|[^A-Za-z0-9_])#[0-9]`),
	"GH-":       regexp.MustCompile(`(?i)\bgh-[0-9]`),
	"commit":    regexp.MustCompile(`(?i)\b[0-9a-f]{7,40}\b`),
	"link text": regexp.MustCompile(`[^\\]\]\(`),
}

// TestFreeTextStaysText renders, through allot plan -o markdown (the PR
// comment, with a change that needs approvals), a repository whose cost
// centre holds every kind of link, mention and reference GitHub makes:
// none is left in the comment, the only mentions are the approvers the
// base names, and the text still reads.
func TestFreeTextStaysText(t *testing.T) {
	base := copyExamples(t)
	head := copyExamples(t)
	edit(t, head, "teams/nlp.cue", `costCenter: "CC-1051"`, "costCenter: "+strconvQuote(hostileText))
	edit(t, head, "teams/nlp.cue", `"h100-80gb": {nominal: 256`, `"h100-80gb": {nominal: 264`)
	code, out, errOut := allot(t, nil, "plan", head, "--base", base, "-o", "markdown")
	if code != exitOK && code != exitFindings {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	approvers := map[string]bool{}
	for _, f := range []string{"teams/nlp.cue", "policy.cue"} {
		b, err := os.ReadFile(filepath.Join(base, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"(@[^"]+)"`).FindAllStringSubmatch(string(b), -1) {
			approvers[m[1]] = true
		}
	}
	// What GitHub reads: entities decoded, code spans left out.
	source := regexp.MustCompile("`[^`]*`").ReplaceAllString(out, "``")
	if m := regexp.MustCompile(`<(?:img|a|script)\b`).FindString(source); m != "" {
		t.Errorf("a raw HTML tag in the comment: %q", m)
	}
	text := html.UnescapeString(source)
	mentioned := 0
	for kind, re := range githubLinks {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if kind == "mention" && approvers[m[1]] {
				mentioned++
				continue
			}
			if kind == "commit" && strings.Trim(m[0], "0123456789") == "" {
				continue
			}
			t.Errorf("%s left in the comment: %q", kind, m[0])
		}
	}
	if mentioned == 0 {
		t.Errorf("no approver is mentioned:\n%s", out)
	}
	if readable := strings.ReplaceAll(text, "\u200b", ""); !strings.Contains(readable, `https://evil.example/a HTTP://b.example`) ||
		!strings.Contains(readable, `@acme/everyone, fixes #12 acme/infra#3 GH-4`) {
		t.Errorf("the cost centre does not read as written:\n%s", out)
	}
	if !strings.Contains(text, " 1234567890 ") {
		t.Errorf("a number of the cost centre is cut:\n%s", out)
	}
	if t.Failed() {
		t.Logf("comment:\n%s", out)
	}
}

// strconvQuote quotes s as a CUE string (a JSON string is one).
func strconvQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
