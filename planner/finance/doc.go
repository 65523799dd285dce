// Package finance owns the finance report: a view of a plan, its diff against a
// base and its what-if, built as a value (Build) and written as one self-contained
// HTML page (HTML) with its CSS and inline SVG charts, no script and nothing
// fetched when it is opened. Money stays exact until it is shown, to the cent.
package finance
