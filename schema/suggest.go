package schema

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/token"
)

type cueTokenPos = token.Pos

var (
	fieldsOnce sync.Once
	fieldsDef  cue.Value
)

// allowedFields returns the fields the definitions allow at parent, where map
// levels (names of pools, teams, flavors) match any name.
func allowedFields(parent []string) []string {
	fieldsOnce.Do(func() {
		def, err := compileDefinitions(cuecontext.New())
		if err == nil {
			fieldsDef = def
		}
	})
	v := fieldsDef
	if !v.Exists() {
		return nil
	}
	for _, seg := range parent {
		next := v.LookupPath(cue.MakePath(cue.Str(seg)))
		if !next.Exists() {
			next = v.LookupPath(cue.MakePath(cue.AnyString))
		}
		if !next.Exists() {
			return nil
		}
		v = next
	}
	var out []string
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	for it.Next() {
		out = append(out, it.Selector().Unquoted())
	}
	slices.Sort(out)
	return out
}

func unknownFieldMessage(fieldPath []string) string {
	if len(fieldPath) == 0 {
		return "field not allowed"
	}
	name := fieldPath[len(fieldPath)-1]
	parent := fieldPath[:len(fieldPath)-1]
	where := "at the top level"
	if len(parent) > 0 {
		where = "in " + strings.Join(parent, ".")
	}
	msg := fmt.Sprintf("unknown field %q %s", name, where)
	allowed := allowedFields(parent)
	if best := Closest(name, allowed); best != "" {
		return msg + fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(allowed) > 0 {
		return msg + "; allowed: " + strings.Join(allowed, ", ")
	}
	return msg
}

// Closest returns the candidate nearest to s by edit distance, if it is near enough
// to be a plausible typo, or "".
func Closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
