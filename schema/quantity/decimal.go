package quantity

import (
	"fmt"
	"math/big"
	"strings"
)

// Decimal is an exact, immutable number. The zero value is 0. Arithmetic is exact
// (rational); rounding happens only where a caller asks for it.
type Decimal struct{ r *big.Rat }

// Parse reads a decimal literal such as "21.96", "-3" or "1e3" exactly.
func Parse(s string) (Decimal, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	return Decimal{r}, nil
}

// MustParse is Parse for constants; it panics on a malformed literal.
func MustParse(s string) Decimal {
	d, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return d
}

// Int returns n as a Decimal.
func Int(n int64) Decimal { return Decimal{new(big.Rat).SetInt64(n)} }

// Frac returns a/b; b must not be 0.
func Frac(a, b int64) Decimal { return Decimal{big.NewRat(a, b)} }

func (d Decimal) rat() *big.Rat {
	if d.r == nil {
		return new(big.Rat)
	}
	return d.r
}

// Add returns d+e.
func (d Decimal) Add(e Decimal) Decimal { return Decimal{new(big.Rat).Add(d.rat(), e.rat())} }

// Sub returns d-e.
func (d Decimal) Sub(e Decimal) Decimal { return Decimal{new(big.Rat).Sub(d.rat(), e.rat())} }

// Mul returns d*e.
func (d Decimal) Mul(e Decimal) Decimal { return Decimal{new(big.Rat).Mul(d.rat(), e.rat())} }

// MulInt returns d*n.
func (d Decimal) MulInt(n int64) Decimal { return d.Mul(Int(n)) }

// Quo returns d/e, or 0 when e is 0 (callers guard divisions that matter).
func (d Decimal) Quo(e Decimal) Decimal {
	if e.Sign() == 0 {
		return Decimal{}
	}
	return Decimal{new(big.Rat).Quo(d.rat(), e.rat())}
}

// Neg returns -d.
func (d Decimal) Neg() Decimal { return Decimal{new(big.Rat).Neg(d.rat())} }

// Abs returns |d|.
func (d Decimal) Abs() Decimal { return Decimal{new(big.Rat).Abs(d.rat())} }

// Cmp compares d and e: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int { return d.rat().Cmp(e.rat()) }

// Sign returns -1, 0 or +1.
func (d Decimal) Sign() int { return d.rat().Sign() }

// IsZero reports whether d is 0.
func (d Decimal) IsZero() bool { return d.Sign() == 0 }

// Ceil returns the smallest integer >= d. It saturates outside int64.
func (d Decimal) Ceil() int64 {
	r := d.rat()
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int)) // floor for positive denominators
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return saturate(q)
}

// Floor returns the largest integer <= d. It saturates outside int64.
func (d Decimal) Floor() int64 {
	r := d.rat()
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean division: floor for a positive divisor
	return saturate(q)
}

func saturate(q *big.Int) int64 {
	if q.IsInt64() {
		return q.Int64()
	}
	if q.Sign() < 0 {
		return -1 << 63
	}
	return 1<<63 - 1
}

// Round returns d rounded to places decimal places, halves away from zero.
func (d Decimal) Round(places int) Decimal {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places)), nil)
	r := new(big.Rat).Mul(d.rat(), new(big.Rat).SetInt(scale))
	num := new(big.Int).Abs(r.Num())
	q, m := new(big.Int).QuoRem(num, r.Denom(), new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if r.Sign() < 0 {
		q.Neg(q)
	}
	return Decimal{new(big.Rat).SetFrac(q, scale)}
}

// Cents returns d rounded to whole cents, as an integer number of cents.
func (d Decimal) Cents() int64 {
	r := d.Round(2).rat()
	c := new(big.Rat).Mul(r, big.NewRat(100, 1))
	return saturate(c.Num()) // exact: c is an integer after rounding
}

// FromCents returns c/100.
func FromCents(c int64) Decimal { return Frac(c, 100) }

// Float64 returns the nearest float64, for display and ratios only.
func (d Decimal) Float64() float64 {
	f, _ := d.rat().Float64()
	return f
}

// String prints d exactly when it has a finite decimal expansion of at most 12
// places, and rounded to 12 places otherwise; trailing zeros are dropped.
func (d Decimal) String() string {
	return trimZeros(d.rat().FloatString(12))
}

// Fixed prints d rounded to places decimal places (halves away from zero).
func (d Decimal) Fixed(places int) string {
	return d.Round(places).rat().FloatString(places)
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// MarshalJSON writes d as a JSON number (see String).
func (d Decimal) MarshalJSON() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalJSON reads a JSON number or string exactly.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	v, err := Parse(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// USD formats an amount of money as "$1,234,567.89" ("-$12.00" when negative).
func USD(d Decimal) string {
	s := d.Abs().Fixed(2)
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	sign := ""
	if d.Round(2).Sign() < 0 {
		sign = "-"
	}
	return sign + "$" + b.String() + "." + frac
}

// SignedUSD formats a delta with an explicit sign: "+$1,200.00", "-$3.50", "$0.00".
func SignedUSD(d Decimal) string {
	if d.Round(2).Sign() > 0 {
		return "+" + USD(d)
	}
	return USD(d)
}
