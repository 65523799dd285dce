package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Markdown writes the pull-request comment: a one-line verdict, the approvals and
// findings, what changes per team, cost centre and pool, and the full plan folded
// in <details>. The first line is Marker.
func Markdown(w io.Writer, in Input) error {
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, Marker)
	p, d := in.Plan, in.Diff
	switch {
	case p == nil:
		fmt.Fprintf(ew, "### allot plan: ❌ `%s` does not load\n\n", in.Name)
	case d != nil:
		fmt.Fprintf(ew, "### allot plan: %s\n\n", boldVerdict(Verdict(d)))
		fmt.Fprintln(ew, "| | before | after | delta |")
		fmt.Fprintln(ew, "|---|---:|---:|---:|")
		fmt.Fprintf(ew, "| **Monthly cost** | %s | %s | **%s**%s |\n\n", quantity.USD(d.Before), quantity.USD(d.After), quantity.SignedUSD(d.Delta), percentOf(d.Delta, d.Before))
	default:
		fmt.Fprintf(ew, "### allot plan: monthly cost %s\n\n", quantity.USD(p.TotalMonthlyUSD))
	}
	if d != nil && len(d.Approvals) > 0 {
		fmt.Fprintln(ew, "**Approvals needed**")
		fmt.Fprintln(ew)
		for _, a := range d.Approvals {
			fmt.Fprintf(ew, "- [ ] **%s** — %s\n", md(a.Who), md(a.Why))
		}
		fmt.Fprintln(ew)
	}
	writeFindingsMarkdown(ew, in.Findings)
	if p == nil {
		return ew.err
	}
	if d != nil {
		if len(d.Quotas) > 0 {
			fmt.Fprintln(ew, "#### Quota changes")
			fmt.Fprintln(ew)
			fmt.Fprintln(ew, "| team | flavor | before | after | delta |")
			fmt.Fprintln(ew, "|---|---|---:|---:|---:|")
			for _, q := range d.Quotas {
				fmt.Fprintf(ew, "| %s | %s | %d | %d | %+d |\n", md(string(q.Team)), md(string(q.Flavor)), q.NominalBefore, q.NominalAfter, q.NominalAfter-q.NominalBefore)
			}
			fmt.Fprintln(ew)
		}
		costTable(ew, "Monthly cost per team", "team", d.Teams)
		costTable(ew, "Monthly cost per cost centre", "cost centre", d.CostCenters)
		if len(d.Pools) > 0 {
			fmt.Fprintln(ew, "#### Pools")
			fmt.Fprintln(ew)
			fmt.Fprintln(ew, "| pool | flavor | nodes before | nodes after | monthly before | monthly after | delta |")
			fmt.Fprintln(ew, "|---|---|---:|---:|---:|---:|---:|")
			for _, c := range d.Pools {
				fmt.Fprintf(ew, "| %s | %s | %d | %d | %s | %s | %s |\n", md(string(c.Pool)), md(string(c.Flavor)), c.NodesBefore, c.NodesAfter,
					quantity.USD(c.MonthlyUSDBefore), quantity.USD(c.MonthlyUSDAfter), quantity.SignedUSD(c.MonthlyUSDAfter.Sub(c.MonthlyUSDBefore)))
			}
			fmt.Fprintln(ew)
		}
		if d.Empty() {
			fmt.Fprintln(ew, "No quota, pool or cost changes.")
			fmt.Fprintln(ew)
		}
	}

	if in.WhatIf != nil {
		if err := whatif.Markdown(ew, in.WhatIf); err != nil {
			return err
		}
	}
	fmt.Fprintf(ew, "<details><summary>Full plan: %d pools, %d teams, %s a month</summary>\n\n", len(p.Pools), len(p.Teams), quantity.USD(p.TotalMonthlyUSD))
	fmt.Fprintln(ew, "| pool | cluster | flavor | nodes | GPUs | committed | monthly |")
	fmt.Fprintln(ew, "|---|---|---|---:|---:|---:|---:|")
	for _, pp := range p.Pools {
		nodes := fmt.Sprint(pp.NodesTarget)
		if pp.AtMax {
			nodes += " (at max)"
		}
		fmt.Fprintf(ew, "| %s | %s | %s | %s | %d | %d | %s |\n", md(string(pp.Pool)), md(string(pp.Cluster)), md(string(pp.Flavor)), nodes, pp.GPUsTarget, pp.CommittedNodes, quantity.USD(pp.MonthlyUSD))
	}
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "| team | cost centre | quota | monthly |")
	fmt.Fprintln(ew, "|---|---|---|---:|")
	for _, t := range p.Teams {
		fmt.Fprintf(ew, "| %s | %s | %s | %s |\n", md(string(t.Team)), md(orDash(t.CostCenter)), md(quotaString(t.Quota)), quantity.USD(t.MonthlyUSD))
	}
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "| cost centre | teams | monthly |")
	fmt.Fprintln(ew, "|---|---:|---:|")
	for _, c := range p.CostCenters {
		fmt.Fprintf(ew, "| %s | %d | %s |\n", md(c.CostCenter), len(c.Teams), quantity.USD(c.MonthlyUSD))
	}
	if !p.UnallocatedMonthlyUSD.Round(2).IsZero() {
		fmt.Fprintf(ew, "| (unallocated) | | %s |\n", quantity.USD(p.UnallocatedMonthlyUSD))
	}
	fmt.Fprintf(ew, "| **total** | | **%s** |\n\n</details>\n", quantity.USD(p.TotalMonthlyUSD))
	return ew.err
}

func boldVerdict(v string) string {
	head, tail, ok := strings.Cut(v, " — ")
	if !ok {
		return "**" + v + "**"
	}
	return "**" + head + "** — " + md(tail)
}

func costTable(w io.Writer, title, what string, rows []planner.CostChange) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "#### %s\n\n", title)
	fmt.Fprintf(w, "| %s | before | after | delta |\n", what)
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, c := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s%s |\n", md(c.Name), quantity.USD(c.Before), quantity.USD(c.After), quantity.SignedUSD(c.Delta), percentOf(c.Delta, c.Before))
	}
	fmt.Fprintln(w)
}

func writeFindingsMarkdown(w io.Writer, fs schema.Findings) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "**Findings**: %d error(s), %d warning(s)\n\n", fs.Count(schema.SeverityError), fs.Count(schema.SeverityWarning))
	fmt.Fprintln(w, "| | where | rule | message |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range fs {
		icon := "⚠️ warning"
		if f.Severity == schema.SeverityError {
			icon = "❌ error"
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s |\n", icon, f.Pos, md(f.Rule), md(f.Message))
	}
	fmt.Fprintln(w)
}

// md escapes text for a Markdown table cell.
func md(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
