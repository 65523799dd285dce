package docstest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// root is the repository: this package is ci/docstest.
var root, _ = filepath.Abs(filepath.Join("..", ".."))

// shells are the languages of a shell block; every other fenced block is
// neither run nor checked (cue, yaml, text, ...).
var shells = []string{"sh", "bash", "shell", "console"}

// illustrative is the marker on the line before a block the test does not
// run; the reason is required.
var illustrative = regexp.MustCompile(`^<!--\s*illustrative:\s*(.*?)\s*-->$`)

// A block is one fenced code block of a page.
type block struct {
	page   string // relative to root
	line   int    // of the opening fence, 1-based
	lang   string
	marked string // the illustrative reason, "" when unmarked
	hasTag bool   // an illustrative marker is there (its reason may be empty)
	lines  []string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// pages are README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return out
}

// parse returns the fenced blocks of a page (``` or ~~~, indented or not;
// a block's lines lose the fence's indentation).
func parse(page string, text []byte) ([]block, error) {
	var out []block
	var cur *block
	var fence, indent string
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				out = append(out, *cur)
				cur = nil
			} else {
				cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence, indent = f, line[:len(line)-len(trimmed)]
			info := strings.Fields(strings.TrimPrefix(trimmed, f))
			cur = &block{page: page, line: n}
			if len(info) > 0 {
				cur.lang = info[0]
			}
			if m := illustrative.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.hasTag, cur.marked = true, m[1]
			}
		}
		prev = line
	}
	if cur != nil {
		return out, fmt.Errorf("%s: a fenced block is never closed", cur)
	}
	return out, sc.Err()
}

// fenceOf returns the fence a line opens (three or more ` or ~), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// TestDocsBlocks holds the convention of docs/development.md: every fenced
// block has a language; a shell block (sh, bash, shell, console) is run or is
// marked illustrative with its reason; a console block's shown output is
// what its commands print.
func TestDocsBlocks(t *testing.T) {
	var run []block
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parse(page, text)
		if err != nil {
			t.Error(err)
		}
		for _, b := range blocks {
			shell := slices.Contains(shells, b.lang)
			switch {
			case b.lang == "":
				t.Errorf("%s: a fenced block without a language: console or sh for commands, text for output or a shape", b)
			case b.hasTag && b.marked == "":
				t.Errorf("%s: illustrative, but says not why: <!-- illustrative: REASON -->", b)
			case shell && !b.hasTag:
				run = append(run, b)
			}
		}
	}
	if len(run) == 0 {
		t.Fatal("no shell block to run: the pages or the parser changed")
	}
	work, env := workspace(t)
	for _, b := range run {
		t.Run(strings.ReplaceAll(b.String(), "/", "_"), func(t *testing.T) {
			if b.lang == "console" {
				runConsole(t, work, env, b)
			} else {
				runScript(t, work, env, b)
			}
		})
	}
}

// workspace copies the repository's tracked files into a temporary folder
// and builds allot into a bin/ beside it, first on PATH.
func workspace(t *testing.T) (string, []string) {
	t.Helper()
	tmp := t.TempDir()
	work, bin := filepath.Join(tmp, "repo"), filepath.Join(tmp, "bin")
	ls, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() { // deleted in the work tree, or a link
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(work, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "allot"), "./cmd/allot")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/allot: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GITHUB_ACTIONS=", "SOURCE_DATE_EPOCH=", "NO_COLOR=1")
	return work, env
}

// runScript runs an sh block with bash -eu in work; it must succeed.
func runScript(t *testing.T, work string, env []string, b block) {
	out, err := shell(work, env, strings.Join(b.lines, "\n"))
	if err != nil {
		t.Errorf("%s: %v\n%s", b, err, out)
	}
}

// runConsole runs each "$ " command of a console block in work and compares
// what it prints (stdout, then stderr) with the lines shown under it; a
// shown line "..." stands for any number of lines.
func runConsole(t *testing.T, work string, env []string, b block) {
	type step struct {
		cmd  string
		want []string
	}
	var steps []step
	for _, l := range b.lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, step{cmd: c})
		} else if len(steps) == 0 {
			t.Fatalf("%s: a console block starts with a command: $ ...", b)
		} else {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
		}
	}
	for _, s := range steps {
		out, err := shell(work, env, s.cmd)
		if err != nil {
			t.Errorf("%s: $ %s: %v\n%s", b, s.cmd, err, out)
			continue
		}
		got := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if !matches(trimAll(s.want), trimAll(got)) {
			t.Errorf("%s: $ %s prints what the page does not show:\n--- shown\n%s\n--- printed\n%s", b, s.cmd, strings.Join(s.want, "\n"), out)
		}
	}
}

// shell runs script with bash (errexit, nounset, pipefail) in dir, bounded
// to five minutes, and returns stdout followed by stderr.
func shell(dir string, env []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}

// trimAll drops trailing blanks of each line and the blank lines at the end.
func trimAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l, " \t")
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// matches reports whether got is want, a line "..." of want standing for
// any number of lines of got.
func matches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matches(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && matches(want[1:], got[1:])
}

// A citation is a Markdown file a Go comment names, or the target of a
// Markdown link; outside is a file that is never in the repository.
var (
	citation = regexp.MustCompile(`(?:\.\./|[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\.md\b`)
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	outside  = regexp.MustCompile(`\bDESIGN\.md\b|\bSTYLE\.md\b|\.\./shared/[^\s)]*\.md\b`)
)

// TestDocsCiteOnlyTheRepository fails on a Go comment or a page that cites a
// file the repository does not hold (a design file beside the clone, a link
// to a page that moved): what the code and the pages rely on ships with them.
func TestDocsCiteOnlyTheRepository(t *testing.T) {
	ls, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00")
	names := map[string]bool{} // base names of the repository's .md files
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			names[filepath.Base(f)] = true
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	checked := 0
	for _, f := range files {
		isGo, isMD := strings.HasSuffix(f, ".go"), strings.HasSuffix(f, ".md")
		if !isGo && !isMD || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		checked++
		for n, line := range strings.Split(string(text), "\n") {
			at := fmt.Sprintf("%s:%d", f, n+1)
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s: cites %s, which is not in the repository: cite the page of docs/ that holds it (docs/contracts.md for the contracts)", at, m)
				continue
			}
			if _, comment, ok := strings.Cut(line, "// "); isGo && ok {
				for _, c := range citation.FindAllString(comment, -1) {
					if !exists(filepath.Join(root, filepath.Dir(f), c)) && !exists(filepath.Join(root, c)) && !names[filepath.Base(c)] {
						t.Errorf("%s: cites %s, which is not in the repository", at, c)
					}
				}
			}
			if isMD {
				for _, m := range link.FindAllStringSubmatch(line, -1) {
					target, _, _ := strings.Cut(m[1], "#")
					if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
						continue
					}
					p := filepath.Join(root, filepath.Dir(f), target)
					if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") || !exists(p) {
						t.Errorf("%s: links %s, which is not in the repository", at, m[1])
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the listing went wrong", checked)
	}
}
