package planreport

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema/quantity"
)

// Text writes the plan as aligned terminal tables.
func Text(w io.Writer, in Input) error { return withTerraform(w, in, text, terraformText) }

// withTerraform writes the report with body, then, when there is one, the
// Terraform summary with section after an empty line.
func withTerraform(w io.Writer, in Input, body func(io.Writer, Input) error, section func(io.Writer, *TerraformPlan)) error {
	if err := body(w, in); err != nil || in.Terraform == nil {
		return err
	}
	ew := &errWriter{w: w}
	fmt.Fprintln(ew)
	section(ew, in.Terraform)
	return ew.err
}

func text(w io.Writer, in Input) error {
	ew := &errWriter{w: w}
	if in.Plan == nil {
		fmt.Fprintf(ew, "%s does not load: no plan.\n", in.Name)
		writeFindingsText(ew, in)
		return ew.err
	}
	p := in.Plan
	fmt.Fprintf(ew, "Plan of %s: %d pools, %d teams, total %s a month\n\n", in.Name, len(p.Pools), len(p.Teams), quantity.USD(p.TotalMonthlyUSD))

	t := newTable("POOL", "CLUSTER", "FLAVOR", "NODES", "GPUS", "COMMITTED", "MONTHLY").alignRight(3, 4, 5, 6)
	for _, pp := range p.Pools {
		nodes := fmt.Sprint(pp.NodesTarget)
		if pp.AtMax {
			nodes += " (at max)"
		}
		t.add(string(pp.Pool), string(pp.Cluster), string(pp.Flavor), nodes, fmt.Sprint(pp.GPUsTarget), fmt.Sprint(pp.CommittedNodes), quantity.USD(pp.MonthlyUSD))
	}
	t.write(ew)
	envelopesText(ew, in)
	fmt.Fprintln(ew)

	t = newTable("TEAM", "COST CENTER", "QUOTA", "MONTHLY").alignRight(3)
	for _, tp := range p.Teams {
		t.add(string(tp.Team), orDash(tp.CostCenter), quotaString(tp.Quota), quantity.USD(tp.MonthlyUSD))
	}
	t.write(ew)
	fmt.Fprintln(ew)

	t = newTable("COST CENTER", "TEAMS", "MONTHLY").alignRight(1, 2)
	for _, c := range p.CostCenters {
		t.add(c.CostCenter, fmt.Sprint(len(c.Teams)), quantity.USD(c.MonthlyUSD))
	}
	if !p.UnallocatedMonthlyUSD.Round(2).IsZero() {
		t.add("(unallocated)", "", quantity.USD(p.UnallocatedMonthlyUSD))
	}
	t.add("TOTAL", "", quantity.USD(p.TotalMonthlyUSD))
	if elastic(in) {
		t.add("CEILING", "", quantity.USD(p.CeilingMonthlyUSD))
	}
	t.write(ew)

	if d := in.Diff; d != nil {
		fmt.Fprintf(ew, "\nAgainst %s: %s\n", in.BaseName, Verdict(d))
		if len(d.Quotas) > 0 {
			fmt.Fprintln(ew)
			t = newTable("TEAM", "FLAVOR", "BEFORE", "AFTER", "DELTA").alignRight(2, 3, 4)
			for _, q := range d.Quotas {
				t.add(string(q.Team), string(q.Flavor), fmt.Sprint(q.NominalBefore), fmt.Sprint(q.NominalAfter), fmt.Sprintf("%+d", q.NominalAfter-q.NominalBefore))
			}
			t.write(ew)
		}
		if len(d.Pools) > 0 {
			fmt.Fprintln(ew)
			t = newTable("POOL", "NODES BEFORE", "NODES AFTER", "MONTHLY DELTA").alignRight(1, 2, 3)
			for _, c := range d.Pools {
				t.add(string(c.Pool), fmt.Sprint(c.NodesBefore), fmt.Sprint(c.NodesAfter), quantity.SignedUSD(c.MonthlyUSDAfter.Sub(c.MonthlyUSDBefore)))
			}
			t.write(ew)
		}
		if len(in.Slurm) > 0 {
			fmt.Fprintln(ew)
			t = newTable("SLURM CLUSTER", "CHANGE", "NAME", "WHAT")
			for _, r := range slurmRows(in.Slurm) {
				t.add(r[:]...)
			}
			t.write(ew)
		}
		if len(d.Approvals) > 0 {
			fmt.Fprintln(ew)
		}
		for _, a := range d.Approvals {
			fmt.Fprintf(ew, "needs approval: %s — %s\n", a.Who, a.Why)
		}
	}
	if in.WhatIf != nil {
		fmt.Fprintln(ew)
		if err := whatif.Text(ew, in.WhatIf); err != nil {
			return err
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
// "Monthly cost +$96,360.00 (+7.1%) — needs finance approval", or, for a
// change that widens a pool's envelope, "Monthly cost unchanged at
// $58,400.00, ceiling +$584,000.00 — needs approval from finance".
func Verdict(d *planner.Diff) string {
	var s string
	switch {
	case d.Delta.Round(2).IsZero():
		s = "Monthly cost unchanged at " + quantity.USD(d.After)
	default:
		s = "Monthly cost " + quantity.SignedUSD(d.Delta) + percentOf(d.Delta, d.Before)
	}
	if ceilingMoves(d) {
		s += ", ceiling " + quantity.SignedUSD(d.CeilingDelta)
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
	if len(who) > maxVerdictApprovers {
		who = append(who[:maxVerdictApprovers], fmt.Sprintf("%d more", len(who)-maxVerdictApprovers))
	}
	return s + " — " + needsApprovalFrom + strings.Join(who, "; ")
}

// needsApprovalFrom starts the part of a verdict that names the approvers.
const needsApprovalFrom = "needs approval from "

// maxVerdictApprovers bounds the verdict line; the approvals list has them all.
const maxVerdictApprovers = 5

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
