// Package quantity owns exact numbers: Decimal, a rational-backed decimal for money,
// prices and fractions, so that node counts and dollars carry no float artefacts.
package quantity
