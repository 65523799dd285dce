package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema/quantity"
)

// Text writes the plan as aligned terminal tables.
func Text(w io.Writer, in Input) error {
	ew := &errWriter{w: w}
	if in.Plan == nil {
		fmt.Fprintf(ew, "%s does not load: no plan.\n", in.Name)
		writeFindingsText(ew, in)
		return ew.err
	}
	p := in.Plan
	fmt.Fprintf(ew, "Plan of %s: %d pools, %d teams, total %s a month\n\n", in.Name, len(p.Pools), len(p.Teams), quantity.USD(p.TotalMonthlyUSD))

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "POOL\tCLUSTER\tFLAVOR\tNODES\tGPUS\tCOMMITTED\tMONTHLY\t")
	for _, pp := range p.Pools {
		note := ""
		if pp.AtMax {
			note = " (at max)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d%s\t%d\t%d\t%s\t\n", pp.Pool, pp.Cluster, pp.Flavor, pp.NodesTarget, note, pp.GPUsTarget, pp.CommittedNodes, quantity.USD(pp.MonthlyUSD))
	}
	tw.Flush()
	fmt.Fprintln(ew)

	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TEAM\tCOST CENTER\tQUOTA\tMONTHLY\t")
	for _, t := range p.Teams {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", t.Team, orDash(t.CostCenter), quotaString(t.Quota), quantity.USD(t.MonthlyUSD))
	}
	tw.Flush()
	fmt.Fprintln(ew)

	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "COST CENTER\tTEAMS\tMONTHLY\t")
	for _, c := range p.CostCenters {
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", c.CostCenter, len(c.Teams), quantity.USD(c.MonthlyUSD))
	}
	if !p.UnallocatedMonthlyUSD.Round(2).IsZero() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", "(unallocated)", "", quantity.USD(p.UnallocatedMonthlyUSD))
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t\n", "TOTAL", "", quantity.USD(p.TotalMonthlyUSD))
	tw.Flush()

	if d := in.Diff; d != nil {
		fmt.Fprintf(ew, "\nAgainst %s: %s\n", in.BaseName, Verdict(d))
		if len(d.Quotas) > 0 {
			tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "TEAM\tFLAVOR\tBEFORE\tAFTER\tDELTA\t")
			for _, q := range d.Quotas {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%+d\t\n", q.Team, q.Flavor, q.NominalBefore, q.NominalAfter, q.NominalAfter-q.NominalBefore)
			}
			tw.Flush()
		}
		if len(d.Pools) > 0 {
			tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "POOL\tNODES BEFORE\tNODES AFTER\tMONTHLY DELTA\t")
			for _, c := range d.Pools {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", c.Pool, c.NodesBefore, c.NodesAfter, quantity.SignedUSD(c.MonthlyUSDAfter.Sub(c.MonthlyUSDBefore)))
			}
			tw.Flush()
		}
		for _, a := range d.Approvals {
			fmt.Fprintf(ew, "needs approval: %s — %s\n", a.Who, a.Why)
		}
	}
	writeFindingsText(ew, in)
	return ew.err
}

func writeFindingsText(w io.Writer, in Input) {
	if len(in.Findings) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d error(s), %d warning(s):\n", in.Findings.Count("error"), in.Findings.Count("warning"))
	for _, f := range in.Findings {
		fmt.Fprintln(w, f.String())
	}
}

// Verdict is the one-line summary of a diff, e.g.
// "Monthly cost +$96,360.00 (+7.1%) — needs finance approval".
func Verdict(d *planner.Diff) string {
	var s string
	switch {
	case d.Delta.Round(2).IsZero():
		s = "Monthly cost unchanged at " + quantity.USD(d.After)
	default:
		s = "Monthly cost " + quantity.SignedUSD(d.Delta) + percentOf(d.Delta, d.Before)
	}
	var who []string
	for _, a := range d.Approvals {
		if !slices.Contains(who, a.Who) {
			who = append(who, a.Who)
		}
	}
	if len(who) == 0 {
		return s + " — no approval needed"
	}
	return s + " — needs approval from " + strings.Join(who, "; ")
}

func percentOf(delta, before quantity.Decimal) string {
	if before.IsZero() {
		return ""
	}
	p := delta.MulInt(100).Quo(before)
	sign := ""
	if p.Round(1).Sign() > 0 {
		sign = "+"
	}
	return fmt.Sprintf(" (%s%s%%)", sign, p.Fixed(1))
}

func quotaString[F ~string](q map[F]int64) string {
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, fmt.Sprintf("%s:%d", f, q[f]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter remembers the first write error so that report code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}
