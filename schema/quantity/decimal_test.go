package quantity

import "testing"

func TestArithmeticIsExact(t *testing.T) {
	// 0.1 + 0.2 is the classic float artefact; 0.1*3 must equal 0.3 exactly.
	a := MustParse("0.1").Add(MustParse("0.2"))
	if a.Cmp(MustParse("0.3")) != 0 {
		t.Fatalf("0.1+0.2 = %s, want 0.3", a)
	}
	// 730 h * 21.96 $/h = 16030.8 exactly.
	if got := MustParse("21.96").MulInt(730).String(); got != "16030.8" {
		t.Fatalf("730*21.96 = %s", got)
	}
}

func TestCeilFloor(t *testing.T) {
	for s, want := range map[string][2]int64{
		"0": {0, 0}, "1": {1, 1}, "1.000000001": {2, 1}, "-1.5": {-1, -2}, "7.999": {8, 7},
	} {
		d := MustParse(s)
		if d.Ceil() != want[0] || d.Floor() != want[1] {
			t.Errorf("%s: ceil %d floor %d, want %v", s, d.Ceil(), d.Floor(), want)
		}
	}
	// In float64, 100*1.1 = 110.00000000000001 and its ceiling is 111; exactly it is 110.
	if got := Int(100).Mul(MustParse("1.1")).Ceil(); got != 110 {
		t.Fatalf("ceil(100*1.1) = %d, want 110", got)
	}
}

func TestRoundAndFormat(t *testing.T) {
	for _, tc := range []struct {
		in, fixed, usd string
	}{
		{"0.005", "0.01", "$0.01"},
		{"-0.005", "-0.01", "-$0.01"},
		{"1234567.891", "1234567.89", "$1,234,567.89"},
		{"100", "100.00", "$100.00"},
		{"999.995", "1000.00", "$1,000.00"},
	} {
		d := MustParse(tc.in)
		if got := d.Fixed(2); got != tc.fixed {
			t.Errorf("Fixed(%s) = %s, want %s", tc.in, got, tc.fixed)
		}
		if got := USD(d); got != tc.usd {
			t.Errorf("USD(%s) = %s, want %s", tc.in, got, tc.usd)
		}
	}
	if got := Frac(1, 3).String(); got != "0.333333333333" {
		t.Errorf("1/3 = %s", got)
	}
	if got := SignedUSD(Int(96360)); got != "+$96,360.00" {
		t.Errorf("SignedUSD = %s", got)
	}
	if got := MustParse("12.345").Cents(); got != 1235 {
		t.Errorf("Cents = %d", got)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var d Decimal
	if err := d.UnmarshalJSON([]byte("29.387")); err != nil {
		t.Fatal(err)
	}
	b, _ := d.MarshalJSON()
	if string(b) != "29.387" {
		t.Fatalf("got %s", b)
	}
	if err := d.UnmarshalJSON([]byte(`"x"`)); err == nil {
		t.Fatal("want an error for a non-number")
	}
}
