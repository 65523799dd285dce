package planreport

import (
	"fmt"
	"io"

	"github.com/allot-dev/allot/internal/markdown"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// envelopeRow is one pool's envelope as a report shows it: the head's
// envelope and monthly cost, and with a base the change of its ceiling.
type envelopeRow struct {
	pool       schema.PoolName
	env        planner.Envelope
	monthlyUSD quantity.Decimal
	// ceilingDelta is the ceiling's change against the base (with a diff).
	ceilingDelta quantity.Decimal
}

// envelopeRows are the pools that declare repair or burst in the plan or, with
// a diff, in the base (a pool whose envelope the change removes shows its
// ceiling falling), in the plan's order then the base's. A pool that declares
// neither has its planned size as its envelope: the pool tables show it.
func envelopeRows(in Input) []envelopeRow {
	var rows []envelopeRow
	seen := map[schema.PoolName]bool{}
	add := func(pp planner.PoolPlan, head *planner.PoolPlan) {
		if seen[pp.Pool] || !pp.Envelope.Elastic {
			return
		}
		seen[pp.Pool] = true
		var r envelopeRow
		r.pool = pp.Pool
		if head != nil {
			r.env, r.monthlyUSD = head.Envelope, head.MonthlyUSD
		}
		if in.Diff != nil && in.Base != nil {
			var before quantity.Decimal
			if b := in.Base.Pool(pp.Pool); b != nil {
				before = b.Envelope.CeilingMonthlyUSD
			}
			r.ceilingDelta = r.env.CeilingMonthlyUSD.Sub(before)
		}
		rows = append(rows, r)
	}
	for _, pp := range in.Plan.Pools {
		add(pp, &pp)
	}
	if in.Diff != nil && in.Base != nil {
		for _, pp := range in.Base.Pools {
			add(pp, in.Plan.Pool(pp.Pool))
		}
	}
	return rows
}

// elastic reports whether a pool of in's plan or base declares repair or
// burst: then the reports show ceilings.
func elastic(in Input) bool {
	for _, p := range []*planner.Plan{in.Plan, in.Base} {
		if p == nil {
			continue
		}
		for _, pp := range p.Pools {
			if pp.Envelope.Elastic {
				return true
			}
		}
	}
	return false
}

// ceilingMoves reports whether the change moves the cost ceiling otherwise
// than the cost: it widens or narrows an envelope, which the verdict then says.
func ceilingMoves(d *planner.Diff) bool {
	return d.CeilingDelta.Round(2).Cmp(d.Delta.Round(2)) != 0
}

// envelopesText writes the envelope table of the text report.
func envelopesText(w io.Writer, in Input) {
	rows := envelopeRows(in)
	if len(rows) == 0 {
		return
	}
	header := []string{"POOL", "FIXED", "+REPLACEMENT", "+BURST", "MOST NODES", "MONTHLY", "CEILING"}
	if in.Diff != nil {
		header = append(header, "CEILING DELTA")
	}
	t := newTable(header...).alignRight(1, 2, 3, 4, 5, 6, 7)
	for _, r := range rows {
		cells := []string{string(r.pool), fmt.Sprint(r.env.FixedNodes), fmt.Sprint(r.env.ReplacementNodes), fmt.Sprint(r.env.BurstNodes),
			fmt.Sprint(r.env.MostNodes), quantity.USD(r.monthlyUSD), quantity.USD(r.env.CeilingMonthlyUSD)}
		if in.Diff != nil {
			cells = append(cells, quantity.SignedUSD(r.ceilingDelta))
		}
		t.add(cells...)
	}
	fmt.Fprintln(w)
	t.write(w)
}

// envelopesMarkdown writes the comment's envelope section: what each pool
// that repairs or bursts may grow to without another review, and what it may
// cost then.
func envelopesMarkdown(w io.Writer, in Input) {
	rows := envelopeRows(in)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "#### Envelopes")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "How far repair and burst may take each pool past its planned (fixed) size, within `nodes.max`, and the most it may cost a month then:")
	fmt.Fprintln(w)
	if in.Diff != nil {
		fmt.Fprintln(w, "| pool | fixed | + replacement | + burst | most nodes | monthly | ceiling | ceiling delta |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	} else {
		fmt.Fprintln(w, "| pool | fixed | + replacement | + burst | most nodes | monthly | ceiling |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	}
	for _, r := range capped(rows) {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s |", markdown.Text(string(r.pool)), r.env.FixedNodes, r.env.ReplacementNodes, r.env.BurstNodes,
			r.env.MostNodes, quantity.USD(r.monthlyUSD), quantity.USD(r.env.CeilingMonthlyUSD))
		if in.Diff != nil {
			fmt.Fprintf(w, " %s |", quantity.SignedUSD(r.ceilingDelta))
		}
		fmt.Fprintln(w)
	}
	moreRows(w, len(rows), "envelopes")
	fmt.Fprintln(w)
}
