package schema

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// RuleLimit is the rule of a finding that a repository exceeds one of the
// bounds below, or of its evaluation (source.Evaluator).
const RuleLimit = "limit"

// Bounds of what the loading process (the CLI's, the manager's) reads and
// parses before any evaluation. A real capacity repository holds kilobytes in
// a few dozen files, two or three folders deep, nested a dozen levels.
const (
	// MaxSourceBytes bounds the .cue files of a repository, together.
	MaxSourceBytes = 16 << 20
	// MaxSourceFiles bounds the number of .cue files read.
	MaxSourceFiles = 10_000
	// MaxEntries bounds the files and folders looked at, .cue or not.
	MaxEntries = 100_000
	// MaxFolderDepth bounds how deep the folders of a repository nest.
	MaxFolderDepth = 32
	// MaxNesting bounds how deep a file's syntax nests (fields, structs, lists
	// and expressions, each a level; the examples nest 13).
	MaxNesting = 100
	// MaxNumberLength bounds the characters of a number literal.
	MaxNumberLength = 64
	// MaxExponent bounds the exponent of a number literal (CUE reads 1e100001
	// as 1).
	MaxExponent = 1000
)

// errStop ends a walk.
var errStop = errors.New("stop")

// WalkSources calls visit for every .cue file of fsys that belongs to the
// package, in lexical order (cue.mod, hidden and _-prefixed files and
// folders, and CUE tool files are skipped), with its contents. A folder is
// read in batches, so one of millions of entries is never held whole. What
// cannot be read (rule syntax), and a repository beyond MaxEntries,
// MaxFolderDepth, MaxSourceFiles or MaxSourceBytes (rule RuleLimit), is a
// finding at the file or folder; the walk ends at the first bound exceeded,
// having read nothing past it. Load walks with it, and so does whoever reads
// a repository into memory before loading it (the manager's checkout), so
// that the bounds hold before anything is read whole.
func WalkSources(fsys fs.FS, visit func(p string, src []byte)) Findings {
	var findings Findings
	cannotRead := func(p string, err error) {
		findings = append(findings, Finding{Severity: SeverityError, Rule: RuleSyntax, Pos: Pos{File: p},
			Message: fmt.Sprintf("cannot read: %v", err)})
	}
	limit := func(p, format string, args ...any) error {
		findings = append(findings, Finding{Severity: SeverityError, Rule: RuleLimit, Pos: Pos{File: p},
			Message: fmt.Sprintf(format, args...)})
		return errStop
	}
	entries, files, total := 0, 0, 0
	var walkDir func(dir string, depth int) error
	walkDir = func(dir string, depth int) error {
		if depth > MaxFolderDepth {
			return limit(dir, "folders nest more than %d levels deep", MaxFolderDepth)
		}
		names, dirs, err := readDir(fsys, dir, MaxEntries-entries)
		entries += len(names)
		switch {
		case errors.Is(err, errTooMany):
			return limit(dir, "the repository holds more than %d files and folders", MaxEntries)
		case err != nil:
			cannotRead(dir, err)
			return nil
		}
		for _, name := range names {
			p := path.Join(dir, name)
			if dirs[name] {
				if name == "cue.mod" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					continue
				}
				if err := walkDir(p, depth+1); err != nil {
					return err
				}
				continue
			}
			if path.Ext(name) != ".cue" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_tool.cue") {
				continue
			}
			if files++; files > MaxSourceFiles {
				return limit(p, "the repository holds more than %d .cue files", MaxSourceFiles)
			}
			src, err := readAtMost(fsys, p, MaxSourceBytes-total)
			total += len(src)
			switch {
			case errors.Is(err, errTooMany):
				return limit(p, "the repository's .cue files hold more than %d MiB", MaxSourceBytes>>20)
			case err != nil:
				cannotRead(p, err)
				continue
			}
			visit(p, src)
		}
		return nil
	}
	_ = walkDir(".", 0)
	return findings
}

// errTooMany says a read went past its bound.
var errTooMany = errors.New("too many")

// readDir returns the names of the entries of dir, sorted, and which of them
// are folders; more than max entries is errTooMany.
func readDir(fsys fs.FS, dir string, max int) ([]string, map[string]bool, error) {
	f, err := fsys.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rd, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, nil, &fs.PathError{Op: "readdir", Path: dir, Err: errors.New("not implemented")}
	}
	var names []string
	dirs := map[string]bool{}
	for {
		batch, err := rd.ReadDir(1024)
		for _, e := range batch {
			names = append(names, e.Name())
			if e.IsDir() {
				dirs[e.Name()] = true
			}
		}
		if len(names) > max {
			return names, nil, errTooMany
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	slices.Sort(names)
	return names, dirs, nil
}

// readAtMost reads the file p, or the first max+1 bytes and errTooMany when
// it holds more than max: a huge file is never read whole.
func readAtMost(fsys fs.FS, p string, max int) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > int64(max) {
		return nil, errTooMany
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // its path is the file's on disk, not the repository's
		}
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	if len(b) > max {
		return b, errTooMany
	}
	return b, nil
}

// checkSyntax returns the findings of a parsed file beyond MaxNesting or with
// a number literal beyond MaxNumberLength or MaxExponent, at their positions:
// found before indexing (which costs the square of the nesting) and before
// CUE evaluates a 16-million-digit number or misreads an exponent.
func checkSyntax(f *ast.File) Findings {
	var findings Findings
	depth, deep := 0, false
	ast.Walk(f, func(n ast.Node) bool {
		if depth >= MaxNesting {
			if !deep {
				deep = true
				findings = append(findings, Finding{Severity: SeverityError, Rule: RuleLimit, Pos: posOf(n.Pos()),
					Message: fmt.Sprintf("nests more than %d levels deep (fields, structs, lists and expressions)", MaxNesting)})
			}
			return false
		}
		if lit, ok := n.(*ast.BasicLit); ok && (lit.Kind == token.INT || lit.Kind == token.FLOAT) {
			if msg := checkNumber(lit.Value); msg != "" {
				findings = append(findings, Finding{Severity: SeverityError, Rule: RuleLimit, Pos: posOf(lit.Pos()), Message: msg})
			}
		}
		depth++
		return true
	}, func(ast.Node) { depth-- })
	return findings
}

// checkNumber says what is wrong with a number literal, or "".
func checkNumber(lit string) string {
	if len(lit) > MaxNumberLength {
		return fmt.Sprintf("a number of %d characters; at most %d", len(lit), MaxNumberLength)
	}
	s := strings.ToLower(strings.ReplaceAll(lit, "_", ""))
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0b") || strings.HasPrefix(s, "0o") {
		return ""
	}
	i := strings.IndexByte(s, 'e')
	if i < 0 {
		return ""
	}
	exp := strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")
	digits := len(exp) - len(strings.TrimLeft(exp, "0123456789"))
	n := 0
	for _, c := range exp[:digits] {
		if n = n*10 + int(c-'0'); n > MaxExponent {
			return fmt.Sprintf("%s: an exponent beyond ±%d", lit, MaxExponent)
		}
	}
	return ""
}
