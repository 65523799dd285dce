// Package policies owns the organisation's rules over a capacity repository: each
// rule has a stable name and a severity and reports findings at the line to change.
// Rules that look at one object at a time are CUE (rules.cue, embedded); rules that
// span objects (references, sums per flavor, budgets) are Go. The package also
// decides who must approve a change.
package policies
