package schema

import (
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// Index maps the path of every field written in the user's files to the places
// it is written, so that findings point at the line the author must change. A field
// set in two files has two places.
type Index struct {
	places map[string][]Pos
}

func newIndex() *Index { return &Index{places: map[string][]Pos{}} }

func pathKey(path []string) string { return strings.Join(path, "\x00") }

// Lookup returns the first place of path, or of its nearest written ancestor.
func (ix *Index) Lookup(path ...string) Pos {
	for n := len(path); n > 0; n-- {
		if ps := ix.places[pathKey(path[:n])]; len(ps) > 0 {
			return ps[0]
		}
	}
	return Pos{}
}

// All returns every place path is written, in file order.
func (ix *Index) All(path ...string) []Pos { return ix.places[pathKey(path)] }

// addFile records the fields of one parsed file. Fields under dynamic or pattern
// labels, and those produced by comprehensions, are not indexed: lookups fall back
// to the nearest written ancestor.
func (ix *Index) addFile(f *ast.File) {
	ix.addDecls(f.Decls, nil)
}

func (ix *Index) addDecls(decls []ast.Decl, prefix []string) {
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(d.Label)
			if err != nil {
				continue
			}
			path := append(append(make([]string, 0, len(prefix)+1), prefix...), name)
			ix.places[pathKey(path)] = append(ix.places[pathKey(path)], posOf(d.Label.Pos()))
			switch v := d.Value.(type) {
			case *ast.StructLit:
				ix.addDecls(v.Elts, path)
			case *ast.ListLit:
				// List elements are indexed by their position: "tiers", "2".
				for i, e := range v.Elts {
					key := pathKey(append(path[:len(path):len(path)], strconv.Itoa(i)))
					ix.places[key] = append(ix.places[key], posOf(e.Pos()))
				}
			}
		case *ast.EmbedDecl:
			if s, ok := d.Expr.(*ast.StructLit); ok {
				ix.addDecls(s.Elts, prefix)
			}
		}
	}
}

func posOf(p token.Pos) Pos {
	if !p.IsValid() {
		return Pos{}
	}
	return Pos{File: p.Filename(), Line: p.Line(), Col: p.Column()}
}
