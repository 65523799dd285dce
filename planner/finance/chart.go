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
	labelWidth = 170.0
	valueWidth = 150.0
	rowHeight  = 28.0
	barHeight  = 18.0
	chartTop   = 6.0
	axisHeight = 22.0
)

// layout scales the bars to a round maximum and places them.
func layout(title string, bars []bar, tickLabel func(float64) string, legend []Legend) Chart {
	c := Chart{Title: title, Width: chartWidth, PlotX: labelWidth, PlotW: chartWidth - labelWidth - valueWidth, Legend: legend,
		LabelX: labelWidth - 10, ValueX: chartWidth - valueWidth + 10}
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
		row := ChartRow{Label: b.label, Value: b.value, Title: b.title, Highlight: b.highlight, Y: y, TextY: round1(y + barHeight/2 + 4.5)}
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
