// Package markdown escapes text from a capacity repository (a cost centre, a
// finding's message, a tier's description) for GitHub-flavored Markdown: the
// PR comment that finance reviews, and the step summary of CI. Such text is
// written by whoever can open a pull request; escaped, it reads as it was
// written and does nothing else: no image, link or autolink (a URL, www., an
// e-mail address), no @mention that notifies a team, no reference to an
// issue or a commit, no raw HTML, no code span or emphasis, no cell that
// splits a table.
package markdown

import (
	"regexp"
	"strings"
)

// zwsp, a zero-width space, ends what GitHub would read as a mention, an
// autolink or a reference where it is put: it is no character of a user
// name, a domain, a number or a hash, and it is not shown. As an entity
// (&#8203;) it reads the same in the rendered comment and is visible in the
// Markdown source; GitHub decodes entities before it looks for mentions and
// references, so the character, not the entity, is what breaks them.
const zwsp = "\u200b"

// cell is the escaper of Text. A backslash escapes any ASCII punctuation in
// CommonMark; "<" and ">" are entities, as GitHub still reads tags after a
// backslash in some contexts; a line break would end the table row. A
// zero-width space follows "@" (a mention, an e-mail address, owner/repo@sha:
// what Renovate does for release notes), "#" (#123, owner/repo#1, a heading)
// and the colon of "://" (http, https, ftp and any other scheme), and
// splits "www." and "GH-" (unbreak below); every zero-width space is
// written as its entity.
var cell = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "!", `\!`, "~", `\~`, "|", `\|`,
	"&", "&amp;", "<", "&lt;", ">", "&gt;", "@", "@&#8203;", "#", "#&#8203;", "://", ":&#8203;//",
	zwsp, "&#8203;",
	"\r\n", " ", "\n", " ", "\r", " ",
)

// unbreak matches what GitHub links without a character cell escapes: www.
// (an autolink without a scheme), GH-123 (an issue), and a run of 7 or more
// hex digits with a letter among them (a commit's hash, which GitHub links
// when it names one of the repository's), in any case. A run of decimal
// digits alone is a number the comment must show whole (a count, a bound);
// it names a commit only by the chance of a hash that has no letter in its
// first seven digits and is a prefix of one of the repository's.
var unbreak = regexp.MustCompile(`(?i)www\.|gh-|[0-9a-f]{7,}`)

// Text returns s escaped for the inline text of a Markdown document, a table
// cell included.
func Text(s string) string {
	s = unbreak.ReplaceAllStringFunc(s, func(m string) string {
		switch strings.ToLower(m) {
		case "www.":
			return m[:3] + zwsp + m[3:]
		case "gh-":
			return m + zwsp
		}
		if strings.Trim(m, "0123456789") == "" {
			return m
		}
		// A hash is linked from 7 hex digits: no run of 7 is left.
		var b strings.Builder
		for i := 0; i < len(m); i += 6 {
			if i > 0 {
				b.WriteString(zwsp)
			}
			b.WriteString(m[i:min(i+6, len(m))])
		}
		return b.String()
	})
	return cell.Replace(s)
}

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
