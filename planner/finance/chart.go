package finance

import (
	"fmt"
	"math"
	"strings"
)

// Chart is a horizontal bar chart laid out for inline SVG, in the coordinates of
// its viewBox: one row per bar, each bar a series of rectangles, an optional
// marker line (a value before the change) and a value at the end of the row.
type Chart struct {
	Title            string
	Width, Height    float64
	PlotX, PlotW     float64 // where the bars start and how wide the scale is
	LabelX, ValueX   float64 // where row labels end and values start
	AxisY, AxisTextY float64
	Rows             []ChartRow
	Ticks            []Tick
	Legend           []Legend
}

// ChartRow is one bar.
type ChartRow struct {
	Label, Value, Title string
	Y, TextY            float64
	Highlight           bool
	Rects               []Rect
	Marker              *Rect // a vertical line at X from Y to Y2

}

// Rect is one rectangle of a bar.
type Rect struct {
	X, Y, W, H   float64
	Class, Title string
}

// Y2 is the bottom of the rectangle.
func (r Rect) Y2() float64 { return round1(r.Y + r.H) }

// Tick is a value on the axis.
type Tick struct {
	X     float64
	Label string
}

// Legend names a series by its CSS class.
type Legend struct{ Class, Label string }

// bar is a row before layout: parts from a value to a value, drawn in order;
// inset trims a part's height on each side (a fraction of the bar's height), so
// that parts may lie on top of each other.
type bar struct {
	label, value, title string
	highlight           bool
	parts               []part
	marker              *part // at its to value
}

type part struct {
	from, to     float64
	inset        float64
	class, title string
}

// stack turns values into parts laid end to end.
func stack(values []float64, classes, titles []string) []part {
	var out []part
	var at float64
	for i, v := range values {
		out = append(out, part{from: at, to: at + v, class: classes[i], title: titles[i]})
		at += v
	}
	return out
}

// Layout of every chart, in viewBox units (the SVG scales to the page's width).
const (
	chartWidth = 1080.0
	rowHeight  = 28.0
	barHeight  = 18.0
	chartTop   = 6.0
	axisHeight = 22.0
	// The label and value columns are as wide as their longest text (textWidth),
	// within these bounds; a longer label is cut with an ellipsis (the row's
	// title keeps it whole). The plot keeps at least the rest.
	minLabelWidth, maxLabelWidth = 80.0, 0.3 * chartWidth
	minValueWidth, maxValueWidth = 60.0, 0.25 * chartWidth
	textGap                      = 10.0 // between a column's text and the plot
	fontSize                     = 12.5 // svg text in report.css
	maxTitleRunes                = 160
)

// layout scales the bars to a round maximum and places them: the label column
// as wide as the longest label, the value column as the longest value.
func layout(title string, bars []bar, tickLabel func(float64) string, legend []Legend) Chart {
	labelW, valueW := minLabelWidth, minValueWidth
	for _, b := range bars {
		labelW = max(labelW, math.Min(maxLabelWidth, textWidth(b.label)+textGap))
		valueW = max(valueW, math.Min(maxValueWidth, textWidth(b.value)+textGap))
	}
	labelW, valueW = math.Ceil(labelW), math.Ceil(valueW)
	if rs := []rune(title); len(rs) > maxTitleRunes { // an accessible name, not a page
		title = string(rs[:maxTitleRunes]) + "…"
	}
	c := Chart{Title: title, Width: chartWidth, PlotX: labelW, PlotW: chartWidth - labelW - valueW, Legend: legend,
		LabelX: labelW - textGap, ValueX: chartWidth - valueW + textGap}
	var top float64
	for _, b := range bars {
		for _, p := range b.parts {
			top = math.Max(top, p.to)
		}
		if b.marker != nil {
			top = math.Max(top, b.marker.to)
		}
	}
	step := niceStep(top / 4)
	top = math.Max(step, math.Ceil(top/step)*step)
	x := func(v float64) float64 { return round1(c.PlotX + v/top*c.PlotW) }
	for i, b := range bars {
		y := chartTop + float64(i)*rowHeight
		row := ChartRow{Label: fit(b.label, labelW-textGap), Value: fit(b.value, valueW-textGap), Title: b.title, Highlight: b.highlight, Y: y, TextY: round1(y + barHeight/2 + 4.5)}
		if row.Title == "" && (row.Label != b.label || row.Value != b.value) {
			row.Title = b.label + ": " + b.value
		}
		for _, p := range b.parts {
			if p.to <= p.from {
				continue
			}
			inset := p.inset * barHeight
			row.Rects = append(row.Rects, Rect{X: x(p.from), Y: round1(y + inset), W: round1(x(p.to) - x(p.from)), H: round1(barHeight - 2*inset), Class: p.class, Title: p.title})
		}
		if m := b.marker; m != nil {
			row.Marker = &Rect{X: x(m.to), Y: round1(y - 3), H: barHeight + 6, Class: m.class, Title: m.title}
		}
		c.Rows = append(c.Rows, row)
	}
	c.AxisY = chartTop + float64(len(bars))*rowHeight
	for v := 0.0; v <= top+step/2; v += step {
		c.Ticks = append(c.Ticks, Tick{X: x(v), Label: tickLabel(v)})
	}
	c.AxisTextY = c.AxisY + 15
	c.Height = c.AxisY + axisHeight
	return c
}

// textWidth bounds the width of s drawn at fontSize in viewBox units, bold or
// not, in the fonts report.css names: each character at the widest advance of
// its class in DejaVu Sans Bold (the widest of them), any other than ASCII at
// 1.25 em (wider than a CJK ideograph or an arrow). An overestimate only
// widens a column; it never lets text leave the chart.
func textWidth(s string) float64 {
	var em float64
	for _, r := range s {
		switch {
		case strings.ContainsRune("mwMW@%", r):
			em += 1.11
		case r >= 'A' && r <= 'Z', strings.ContainsRune("&#+<=>~^", r):
			em += 0.88
		case r < 0x80:
			em += 0.72
		default:
			em += 1.25
		}
	}
	return em * fontSize
}

// fit returns s, or as much of it as fits in width with an ellipsis.
func fit(s string, width float64) string {
	if textWidth(s) <= width {
		return s
	}
	rs := []rune(s)
	for len(rs) > 0 && textWidth(string(rs))+textWidth("…") > width {
		rs = rs[:len(rs)-1]
	}
	return string(rs) + "…"
}

// niceStep rounds a step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// compactUSD labels an axis: $0, $750k, $1.5M.
func compactUSD(v float64) string {
	switch {
	case v >= 1e6:
		return "$" + trimZero(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case v >= 1e3:
		return "$" + trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return fmt.Sprintf("$%.0f", v)
}

func gpuTick(v float64) string { return fmt.Sprintf("%.0f", v) }

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
