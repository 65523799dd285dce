package finance

import (
	"fmt"

	"github.com/allot-dev/allot/planner/recommend"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Sizing is the report's section on capacity sized from demand: what
// `allot recommend` found, and per flavor its cost-versus-wait curve.
type Sizing struct {
	Workload      string
	Jobs          int
	Before, After quantity.Decimal
	Curves        []Chart
}

// sizing draws one chart per flavor: a row per size of the curve (its GPUs and
// monthly cost), the bar its p95 wait, the line on each row the default target.
func sizing(r *recommend.Result) *Sizing {
	s := &Sizing{Workload: r.Workload, Jobs: r.Jobs, Before: r.MonthlyUSDBefore, After: r.MonthlyUSDAfter}
	var target *part
	if t := r.Target.WaitP95S; t != nil {
		target = &part{to: *t / 60, class: "m-before", title: "target: p95 wait " + whatif.Duration(*t)}
	}
	var bars []bar
	legend := "p95 wait of the flavor's jobs"
	if r.CurveGridS > 0 {
		legend += fmt.Sprintf(" (replayed on a %gs grid)", r.CurveGridS)
	}
	flush := func(f schema.Flavor) {
		if len(bars) > 0 {
			s.Curves = append(s.Curves, layout("p95 wait at each size, "+string(f), bars, minutes,
				[]Legend{{"f-target", legend}, {"m-before", "target"}}))
		}
		bars = nil
	}
	for i, p := range r.Curve {
		if i > 0 && p.Flavor != r.Curve[i-1].Flavor {
			flush(r.Curve[i-1].Flavor)
		}
		label := fmt.Sprintf("%s: %d GPUs · %s", p.Flavor, p.GPUs, compactUSD(p.MonthlyUSD.Float64()))
		b := bar{label: label, highlight: p.Recommended, marker: target}
		if p.WaitP95S == nil {
			b.value = "never"
			b.title = label + ": more than one job in twenty never started"
		} else {
			b.value = whatif.Duration(*p.WaitP95S)
			b.title = label + ": p95 wait " + b.value
			b.parts = []part{{to: *p.WaitP95S / 60, class: "f-target", title: b.title}}
		}
		if p.Recommended {
			b.value += " ← recommended"
		}
		if p.Why != "" { // the whole reason in the row's title
			b.value += " ↑ why: hover"
			b.title += ", " + p.Why
		}
		bars = append(bars, b)
	}
	if len(r.Curve) > 0 {
		flush(r.Curve[len(r.Curve)-1].Flavor)
	}
	return s
}

func minutes(v float64) string { return fmt.Sprintf("%.0fm", v) }
