package finance

import (
	"bytes"
	"strings"
	"testing"

	"github.com/allot-dev/allot/planner/recommend"
	"github.com/allot-dev/allot/schema/quantity"
)

// TestCostAgainstWaitChart: given a recommendation, the report draws one chart
// per flavor, a row per size with its GPUs and cost, the recommended one
// highlighted, the target on every row, a wait that is never as "never".
func TestCostAgainstWaitChart(t *testing.T) {
	in := alone(t)
	target := 900.0
	w := func(v float64) *float64 { return &v }
	in.Recommendation = &recommend.Result{Workload: "history.csv", Jobs: 240, MonthlyUSDBefore: quantity.Int(100), MonthlyUSDAfter: quantity.Int(90),
		Curve: []recommend.CurvePoint{
			{Flavor: "a100-40gb", GPUs: 64, MonthlyUSD: quantity.Int(1000), WaitP95S: nil},
			{Flavor: "a100-40gb", GPUs: 72, MonthlyUSD: quantity.Int(1100), WaitP95S: w(1500), Recommended: false},
			{Flavor: "a100-40gb", GPUs: 80, MonthlyUSD: quantity.Int(1200), WaitP95S: w(600), Recommended: true},
			{Flavor: "h100-80gb", GPUs: 512, MonthlyUSD: quantity.Int(9000), WaitP95S: w(60), Recommended: true},
		}}
	in.Recommendation.Target.WaitP95S = &target
	r := Build(in)
	if r.Sizing == nil || len(r.Sizing.Curves) != 2 {
		t.Fatalf("sizing %+v: want two charts", r.Sizing)
	}
	a := r.Sizing.Curves[0]
	if len(a.Rows) != 3 || !a.Rows[2].Highlight || a.Rows[0].Highlight {
		t.Fatalf("a100 rows %+v: want 3, the last highlighted", a.Rows)
	}
	if a.Rows[0].Value != "never" || len(a.Rows[0].Rects) != 0 {
		t.Errorf("a wait of never: value %q, %d bars", a.Rows[0].Value, len(a.Rows[0].Rects))
	}
	for _, row := range a.Rows {
		if row.Marker == nil {
			t.Errorf("row %q has no target line", row.Label)
		}
	}
	if a.Rows[1].Rects[0].W <= a.Rows[2].Rects[0].W {
		t.Errorf("25m bar (%g) not longer than 10m bar (%g)", a.Rows[1].Rects[0].W, a.Rows[2].Rects[0].W)
	}
	var page bytes.Buffer
	if err := HTML(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<section id="sizing">`, "a100-40gb: 72 GPUs · $1.1k", "10m ← recommended", "history.csv"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
