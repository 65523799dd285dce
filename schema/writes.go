package schema

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue/ast"
)

// A Write is one declaration of a user file that sets part of the
// configuration, told from the file's own syntax, as deep as ownership needs:
// a top-level field, and under teams one team. CUE unifies the files of a
// package, so any file can set any field; the writes say which file sets what.
type Write struct {
	Pos Pos
	// Path is the part set: ["pools"], ["teams", "nlp"], ["#Defaults"].
	Path []string
	// Construct, when not empty, names a declaration whose reach the file
	// alone does not tell (a comprehension, a pattern constraint, a computed
	// label, an embedded expression, "..."): it may set anything under Path,
	// everything when Path is empty.
	Construct string
}

// What names the part w sets, for messages: "pools", "teams.nlp", or the
// construct and where it is.
func (w Write) What() string {
	p := strings.Join(w.Path, ".")
	switch {
	case w.Construct == "":
		return p
	case p == "":
		return w.Construct + " at the top level"
	}
	return fmt.Sprintf("%s under %s", w.Construct, p)
}

// writesOf returns the writes of the files, in file order. Declarations that
// set nothing (package, imports, let clauses, attributes, comments) are left
// out: imports and lets are the file's own.
func writesOf(files []*ast.File) []Write {
	var out []Write
	for _, f := range files {
		out = appendWrites(out, f.Decls, nil)
	}
	return out
}

// writeDepth reports whether the writes under path are told apart: only a
// team's fields belong to someone other than the top-level field's owner.
func writeDepth(path []string) bool { return len(path) == 1 && path[0] == "teams" }

func appendWrites(out []Write, decls []ast.Decl, prefix []string) []Write {
	opaque := func(d ast.Node, what string) {
		out = append(out, Write{Pos: posOf(d.Pos()), Path: prefix, Construct: what})
	}
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.LetClause, *ast.Attribute, *ast.CommentGroup:
		case *ast.Field:
			name, _, err := ast.LabelName(d.Label)
			if err != nil {
				opaque(d, "a field with a computed or pattern label")
				continue
			}
			path := append(prefix[:len(prefix):len(prefix)], name)
			if s, ok := d.Value.(*ast.StructLit); ok && writeDepth(path) {
				out = appendWrites(out, s.Elts, path)
				continue
			}
			if writeDepth(path) {
				out = append(out, Write{Pos: posOf(d.Pos()), Path: path, Construct: "an expression"})
				continue
			}
			out = append(out, Write{Pos: posOf(d.Pos()), Path: path})
		case *ast.EmbedDecl:
			if s, ok := d.Expr.(*ast.StructLit); ok {
				out = appendWrites(out, s.Elts, prefix)
				continue
			}
			opaque(d, "an embedded value")
		case *ast.Comprehension:
			opaque(d, "a comprehension")
		case *ast.Ellipsis:
			opaque(d, "'...'")
		default:
			opaque(d, fmt.Sprintf("a declaration (%T)", d))
		}
	}
	return out
}
