package schema

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Severity says whether a finding blocks a change.
type Severity string

// Severities, most severe first.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Pos is a position in a user file, relative to the repository root. The zero Pos
// means "no position" (e.g. a finding about the repository as a whole).
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// IsValid reports whether p names a file.
func (p Pos) IsValid() bool { return p.File != "" }

func (p Pos) String() string {
	if !p.IsValid() {
		return "-"
	}
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Finding is one problem found in a capacity repository.
type Finding struct {
	Severity Severity
	// Rule is a stable name, e.g. "schema", "unknown-cluster", "team-budget".
	Rule    string
	Pos     Pos
	Message string
	// Related are further places the finding involves (the other side of a conflict).
	Related []Pos
	// Approximation names the object ("tier batch", "team vision", "pool
	// a100") of a rule a scheduler only approximates, a warning saying how;
	// Accepted: the object says approximate: true. Strict makes the others
	// errors.
	Approximation string
	Accepted      bool
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s: %s", f.Pos, f.Severity, f.Rule, f.Message)
}

// Findings is a list of findings.
type Findings []Finding

// HasErrors reports whether any finding is an error.
func (fs Findings) HasErrors() bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity == SeverityError })
}

// Count returns the number of findings of severity s.
func (fs Findings) Count(s Severity) int {
	n := 0
	for _, f := range fs {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Sort orders findings by file, line, column, rule and message, and drops exact
// duplicates, so that output is deterministic.
func (fs Findings) Sort() Findings {
	out := slices.Clone(fs)
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(
			boolCmp(a.Pos.IsValid(), b.Pos.IsValid()),
			strings.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Col, b.Pos.Col),
			strings.Compare(a.Rule, b.Rule),
			strings.Compare(a.Message, b.Message),
		)
	})
	return slices.CompactFunc(out, func(a, b Finding) bool {
		return a.Pos == b.Pos && a.Rule == b.Rule && a.Message == b.Message && a.Severity == b.Severity
	})
}

// boolCmp puts findings with a position before those without.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// Approximation is a warning that a scheduler only approximates a rule of
// the tier, team or pool named (kind "tier", "team" or "pool"), at pos;
// accepted when the object says approximate: true.
func (c *Config) Approximation(rule string, pos Pos, kind, name, msg string) Finding {
	f := Finding{Severity: SeverityWarning, Rule: rule, Pos: pos, Message: msg, Approximation: kind + " " + name}
	switch kind {
	case "tier":
		f.Accepted = c.Tiers[TierName(name)] != nil && c.Tiers[TierName(name)].Approximate
	case "team":
		f.Accepted = c.Teams[TeamName(name)] != nil && c.Teams[TeamName(name)].Approximate
	case "pool":
		f.Accepted = c.Pools[PoolName(name)] != nil && c.Pools[PoolName(name)].Approximate
	}
	if f.Accepted {
		f.Message += fmt.Sprintf(" (accepted: %s says approximate: true)", f.Approximation)
	}
	return f
}

// Strict returns fs with each approximation its object does not accept made
// an error that says how to accept it.
func (fs Findings) Strict() Findings {
	out := slices.Clone(fs)
	for i, f := range out {
		if f.Approximation != "" && !f.Accepted && f.Severity == SeverityWarning {
			out[i].Severity = SeverityError
			out[i].Message += fmt.Sprintf(" (strict: accept it with approximate: true on %s)", f.Approximation)
		}
	}
	return out
}

// Approximations returns the approximations of fs, accepted or not.
func (fs Findings) Approximations() Findings {
	var out Findings
	for _, f := range fs {
		if f.Approximation != "" {
			out = append(out, f)
		}
	}
	return out
}
