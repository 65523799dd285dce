package workload

import (
	"strconv"
	"time"
)

// timeKind is what a time column of a file holds: every value of one column
// is of one kind.
type timeKind int8

const (
	kindUnseen timeKind = iota
	kindNumber          // seconds from the trace's start
	kindNaive           // dates and times without a zone (all in one zone)
	kindZoned           // dates and times with a zone or offset
)

func (k timeKind) String() string {
	switch k {
	case kindNumber:
		return "numbers of seconds"
	case kindNaive:
		return "dates and times without a time zone"
	}
	return "dates and times with a time zone"
}

// The date-time forms a trace may use: Slurm's and pandas' (HeliosData's
// 2020-06-09 18:41:01), ISO 8601 / RFC 3339, and what spreadsheets export
// when told to write ISO dates. Fractional seconds are allowed after the
// seconds. A day-first or month-first date (06/09/2020) is not: it is
// ambiguous.
var (
	naiveLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006/01/02 15:04:05", "2006/01/02 15:04"}
	zonedLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05 Z07:00", "2006-01-02 15:04:05 -0700",
		"2006-01-02T15:04:05-0700", "2006-01-02 15:04:05-0700", "2006-01-02 15:04:05 UTC", "2006-01-02T15:04:05 UTC"}
)

// parseDateTime returns s as Unix seconds, and whether it names its zone.
// A time without a zone is read as UTC: only differences between the
// file's times count, so any one zone for all of them gives the same result.
func parseDateTime(s string) (float64, timeKind, bool) {
	for _, l := range naiveLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return unixSeconds(t), kindNaive, true
		}
	}
	for _, l := range zonedLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return unixSeconds(t), kindZoned, true
		}
	}
	return 0, kindUnseen, false
}

func unixSeconds(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// clock keeps what the file's time columns hold, and the origin of its
// dated submit times: the first one read, moved to the earliest at the end
// (Reader.Shift).
type clock struct {
	kinds      map[string]timeKind
	set        bool
	origin     float64 // Unix seconds of the first dated submit
	earliest   float64
	latest     float64 // the latest submit, from origin
	latestLine int
}

// noTime is how traces write a time that never came: Slurm's Unknown (a job
// that never started), pandas' NaT and None.
func noTime(s string) bool {
	switch s {
	case "", "NaT", "None", "Unknown", "null", "NULL":
		return true
	}
	return false
}

// instant reads a time column: seconds, or a date and time as Unix seconds
// (dated). ok is false when the value is blank or wrong (wrong is a
// failure of the row).
func (r *row) instant(name string) (v float64, dated, ok bool) {
	s := r.str(name)
	if noTime(s) {
		return 0, false, false
	}
	kind := kindNumber
	if _, err := strconv.ParseFloat(s, 64); err == nil || r.times == nil {
		if v, ok = seconds(s); !ok {
			r.fail("column %s: %q is not a non-negative number of seconds up to 1e9 (about 31 years)%s", name, s, epochHint(s))
			return 0, false, false
		}
	} else if v, kind, ok = parseDateTime(s); !ok {
		r.fail("column %s: %q is neither a number of seconds nor a date and time like 2020-06-09 18:41:01 (ISO 8601, optionally with a zone: 2020-06-09T18:41:01+08:00)", name, s)
		return 0, false, false
	}
	if r.times != nil {
		if seen := r.times.kinds[name]; seen != kindUnseen && seen != kind {
			r.fail("column %s: %q is one of %s, but the rows above hold %s", name, s, kind, seen)
			return 0, false, false
		}
		r.times.kinds[name] = kind
	}
	return v, kind != kindNumber, true
}

// submit reads a job's submit time: seconds from the trace's start, or a
// date and time, counted (until Reader.Shift) from the first one of the file.
func (r *row) submit(name string) float64 {
	v, dated, ok := r.instant(name)
	if !ok || !dated {
		return v
	}
	c := r.times
	if !c.set {
		c.set, c.origin, c.earliest = true, v, v
	}
	c.earliest = min(c.earliest, v)
	rel := v - c.origin
	if rel > MaxSeconds || c.origin-c.earliest > MaxSeconds {
		r.fail("column %s: %s is more than 1e9 seconds (about 31 years) from the file's other submit times", name, r.str(name))
		return 0
	}
	if rel >= c.latest {
		c.latest, c.latestLine = rel, r.line
	}
	return rel
}

// span reads how long a job ran from its start and end columns; ok is false
// when either is blank (the trace records no run).
func (r *row) span(from, to string) (float64, bool) {
	start, dated1, ok1 := r.instant(from)
	end, dated2, ok2 := r.instant(to)
	switch {
	case !ok1 || !ok2:
		return 0, false
	case dated1 != dated2:
		r.fail("columns %s and %s: one is a number of seconds, the other a date and time", from, to)
	case end < start:
		r.fail("column %s: %s is before %s %s (a negative run)", to, r.str(to), from, r.str(from))
	case end-start > MaxSeconds:
		r.fail("columns %s and %s: a run of %.0f s, more than 1e9 (about 31 years)", from, to, end-start)
	default:
		return end - start, true
	}
	return 0, false
}
