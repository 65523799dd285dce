// Package markdown escapes text from a capacity repository (a cost centre, a
// finding's message, a tier's description) for GitHub-flavored Markdown: the
// PR comment that finance reviews, and the step summary of CI. Such text is
// written by whoever can open a pull request; escaped, it reads as it was
// written and does nothing else: no image or link, no @mention that notifies
// a team, no raw HTML, no code span or emphasis, no cell that splits a table.
package markdown

import (
	"regexp"
	"strings"
)

// cell is the escaper of Text. A backslash escapes any ASCII punctuation in
// CommonMark; "<" and ">" are entities, as GitHub still reads tags after a
// backslash in some contexts; "@" is followed by a zero-width space, which
// ends a mention as GitHub parses it (what Renovate does for release notes);
// a line break would end the table row.
var cell = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "!", `\!`, "~", `\~`, "|", `\|`,
	"&", "&amp;", "<", "&lt;", ">", "&gt;", "@", "@&#8203;",
	"\r\n", " ", "\n", " ", "\r", " ",
)

// Text returns s escaped for the inline text of a Markdown document, a table
// cell included.
func Text(s string) string { return cell.Replace(s) }

// Code returns s as a code span (a file path, a position): fenced by more
// backticks than any run of them in s, so that s cannot end it, with its pipes
// escaped (GitHub splits a table cell at a pipe even inside a code span) and
// line breaks as spaces.
func Code(s string) string {
	s = strings.NewReplacer("|", `\|`, "\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " " // one space each side is stripped
	}
	return fence + s + fence
}

// mention is a GitHub @user or @org/team.
var mention = regexp.MustCompile(`^@[A-Za-z0-9][A-Za-z0-9_-]{0,38}(/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$`)

// Mention returns who, an approver the comment asks for, as a mention that
// notifies them when it is one (@user, @org/team), and escaped as Text
// otherwise.
func Mention(who string) string {
	if mention.MatchString(who) {
		return who
	}
	return Text(who)
}
