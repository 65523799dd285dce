package planreport

import (
	"fmt"
	"github.com/allot-dev/allot/internal/markdown"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Markdown writes the pull-request comment: a one-line verdict, the approvals and
// findings, what changes per team, cost centre and pool, the envelopes of the
// pools that repair or burst, and the full plan folded in <details>. The first
// line is Marker.
func Markdown(w io.Writer, in Input) error {
	return withTerraform(w, in, comment, terraformMarkdown)
}

func comment(w io.Writer, in Input) error {
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, Marker)
	p, d := in.Plan, in.Diff
	switch {
	case p == nil:
		fmt.Fprintf(ew, "### allot plan: ❌ %s does not load\n\n", markdown.Code(in.Name))
	case d != nil:
		fmt.Fprintf(ew, "### allot plan: %s%s\n\n", errorLead(in.Findings), boldVerdict(Verdict(d)))
		fmt.Fprintln(ew, "| | before | after | delta |")
		fmt.Fprintln(ew, "|---|---:|---:|---:|")
		fmt.Fprintf(ew, "| **Monthly cost** | %s | %s | **%s**%s |\n", quantity.USD(d.Before), quantity.USD(d.After), quantity.SignedUSD(d.Delta), percentOf(d.Delta, d.Before))
		if elastic(in) {
			fmt.Fprintf(ew, "| **Monthly ceiling** (repair and burst at their most) | %s | %s | **%s**%s |\n",
				quantity.USD(d.CeilingBefore), quantity.USD(d.CeilingAfter), quantity.SignedUSD(d.CeilingDelta), percentOf(d.CeilingDelta, d.CeilingBefore))
		}
		fmt.Fprintln(ew)
	default:
		fmt.Fprintf(ew, "### allot plan: %smonthly cost %s\n\n", errorLead(in.Findings), quantity.USD(p.TotalMonthlyUSD))
	}
	if d != nil && len(d.Approvals) > 0 {
		fmt.Fprintln(ew, "**Approvals needed**")
		fmt.Fprintln(ew)
		who, why := approvers(d.Approvals)
		for _, a := range capped(who) {
			reasons := why[a]
			line := strings.Join(capped3(reasons), "; ")
			if len(reasons) > 3 {
				line += fmt.Sprintf("; and %d more", len(reasons)-3)
			}
			fmt.Fprintf(ew, "- [ ] **%s** — %s\n", markdown.Mention(a), markdown.Text(line))
		}
		if len(who) > MaxRows {
			fmt.Fprintf(ew, "- [ ] … %d more approvers: see `allot plan -o json`\n", len(who)-MaxRows)
		}
		fmt.Fprintln(ew)
	}
	writeFindingsMarkdown(ew, in.Findings)
	writeApproximationsMarkdown(ew, in.Findings)
	if in.NotSimulated != "" {
		fmt.Fprintf(ew, "**What-if not simulated**: %s\n\n", markdown.Text(in.NotSimulated))
	}
	if p == nil {
		writeProvenance(ew, in.Provenance)
		return ew.err
	}
	if d != nil {
		if len(d.Quotas) > 0 {
			fmt.Fprintln(ew, "#### Quota changes")
			fmt.Fprintln(ew)
			fmt.Fprintln(ew, "| team | flavor | before | after | delta |")
			fmt.Fprintln(ew, "|---|---|---:|---:|---:|")
			for _, q := range capped(d.Quotas) {
				fmt.Fprintf(ew, "| %s | %s | %d | %d | %+d |\n", markdown.Text(string(q.Team)), markdown.Text(string(q.Flavor)), q.NominalBefore, q.NominalAfter, q.NominalAfter-q.NominalBefore)
			}
			moreRows(ew, len(d.Quotas), "quota changes")
			fmt.Fprintln(ew)
		}
		changed, ccChanged := changedByPR(p, d)
		costTable(ew, "Monthly cost per team", "team", "teams", d.Teams, changed)
		costTable(ew, "Monthly cost per cost centre", "cost centre", "cost centres", d.CostCenters, ccChanged)
		if len(d.Pools) > 0 {
			fmt.Fprintln(ew, "#### Pools")
			fmt.Fprintln(ew)
			fmt.Fprintln(ew, "| pool | flavor | nodes before | nodes after | monthly before | monthly after | delta |")
			fmt.Fprintln(ew, "|---|---|---:|---:|---:|---:|---:|")
			for _, c := range capped(d.Pools) {
				fmt.Fprintf(ew, "| %s | %s | %d | %d | %s | %s | %s |\n", markdown.Text(string(c.Pool)), markdown.Text(string(c.Flavor)), c.NodesBefore, c.NodesAfter,
					quantity.USD(c.MonthlyUSDBefore), quantity.USD(c.MonthlyUSDAfter), quantity.SignedUSD(c.MonthlyUSDAfter.Sub(c.MonthlyUSDBefore)))
			}
			moreRows(ew, len(d.Pools), "pool changes")
			fmt.Fprintln(ew)
		}
		envelopesMarkdown(ew, in)
		slurmMarkdown(ew, in.Slurm)
		if d.Empty() && len(in.Slurm) == 0 {
			fmt.Fprintln(ew, "No quota, pool or cost changes.")
			fmt.Fprintln(ew)
		}
	}

	if d == nil {
		envelopesMarkdown(ew, in)
	}
	if in.WhatIf != nil {
		r, more := boundWhatIf(in.WhatIf)
		if err := whatif.Markdown(ew, r); err != nil {
			return err
		}
		if more > 0 {
			fmt.Fprintf(ew, "<sub>%d more teams' figures are in `allot plan -o json`.</sub>\n\n", more)
		}
	}
	fmt.Fprintf(ew, "<details><summary>Full plan: %d pools, %d teams, %s a month</summary>\n\n", len(p.Pools), len(p.Teams), quantity.USD(p.TotalMonthlyUSD))
	fmt.Fprintln(ew, "| pool | cluster | flavor | nodes | GPUs | committed | monthly |")
	fmt.Fprintln(ew, "|---|---|---|---:|---:|---:|---:|")
	for _, pp := range capped(p.Pools) {
		nodes := fmt.Sprint(pp.NodesTarget)
		if pp.AtMax {
			nodes += " (at max)"
		}
		fmt.Fprintf(ew, "| %s | %s | %s | %s | %d | %d | %s |\n", markdown.Text(string(pp.Pool)), markdown.Text(string(pp.Cluster)), markdown.Text(string(pp.Flavor)), nodes, pp.GPUsTarget, pp.CommittedNodes, quantity.USD(pp.MonthlyUSD))
	}
	moreRows(ew, len(p.Pools), "pools")
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "| team | cost centre | quota | monthly |")
	fmt.Fprintln(ew, "|---|---|---|---:|")
	for _, t := range capped(p.Teams) {
		fmt.Fprintf(ew, "| %s | %s | %s | %s |\n", markdown.Text(string(t.Team)), markdown.Text(orDash(t.CostCenter)), markdown.Text(quotaString(t.Quota)), quantity.USD(t.MonthlyUSD))
	}
	moreRows(ew, len(p.Teams), "teams")
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "| cost centre | teams | monthly |")
	fmt.Fprintln(ew, "|---|---:|---:|")
	for _, c := range capped(p.CostCenters) {
		fmt.Fprintf(ew, "| %s | %d | %s |\n", markdown.Text(c.CostCenter), len(c.Teams), quantity.USD(c.MonthlyUSD))
	}
	moreRows(ew, len(p.CostCenters), "cost centres")
	if !p.UnallocatedMonthlyUSD.Round(2).IsZero() {
		fmt.Fprintf(ew, "| (unallocated) | | %s |\n", quantity.USD(p.UnallocatedMonthlyUSD))
	}
	fmt.Fprintf(ew, "| **total** | | **%s** |\n", quantity.USD(p.TotalMonthlyUSD))
	if elastic(in) {
		fmt.Fprintf(ew, "| **ceiling** (repair and burst at their most) | | **%s** |\n", quantity.USD(p.CeilingMonthlyUSD))
	}
	fmt.Fprint(ew, "\n</details>\n")
	writeProvenance(ew, in.Provenance)
	return ew.err
}

func writeProvenance(w io.Writer, p Provenance) {
	if !p.Empty() {
		fmt.Fprintf(w, "\n<sub>allot plan of %s</sub>\n", provenanceMarkdown(p.String()))
	}
}

// commitHash is a commit's hash in a provenance line.
var commitHash = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// provenanceMarkdown is a provenance line as text, but for its commits'
// hashes, which come from git and which GitHub is meant to link to the
// commits (markdown.Text breaks hashes: free text must not link).
func provenanceMarkdown(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range commitHash.FindAllStringIndex(s, -1) {
		b.WriteString(markdown.Text(s[last:m[0]]))
		b.WriteString(s[m[0]:m[1]])
		last = m[1]
	}
	b.WriteString(markdown.Text(s[last:]))
	return b.String()
}

func boldVerdict(v string) string {
	head, tail, ok := strings.Cut(v, " — ")
	if !ok {
		return "**" + v + "**"
	}
	// The approvers stay mentions: the comment asks them to review.
	if names, ok := strings.CutPrefix(tail, needsApprovalFrom); ok {
		who := strings.Split(names, "; ")
		for i, w := range who {
			who[i] = markdown.Mention(w)
		}
		return "**" + head + "** — " + needsApprovalFrom + strings.Join(who, "; ")
	}
	return "**" + head + "** — " + markdown.Text(tail)
}

// costTable lists the rows the change made (listed) and the rows that moved by
// more than the threshold; the others, whose cost moved only because pooled prices
// were shared differently, are summed up in one line and folded.
func costTable(w io.Writer, title, what, plural string, rows []planner.CostChange, listed map[string]bool) {
	if len(rows) == 0 {
		return
	}
	var shown, moved []planner.CostChange
	var sum quantity.Decimal
	for _, c := range rows {
		if listed[c.Name] || significant(c) {
			shown = append(shown, c)
		} else {
			moved = append(moved, c)
			sum = sum.Add(c.Delta)
		}
	}
	fmt.Fprintf(w, "#### %s\n\n", title)
	if len(shown) > 0 {
		costRows(w, what, shown)
		moreRows(w, len(shown), plural)
		fmt.Fprintln(w)
	}
	if len(moved) == 0 {
		return
	}
	fmt.Fprintf(w, "<details><summary>cost moved to %d other %s by pooled prices: %s in all</summary>\n\n", len(moved), plural, quantity.SignedUSD(sum))
	costRows(w, what, moved)
	moreRows(w, len(moved), plural)
	fmt.Fprint(w, "\n</details>\n\n")
}

func costRows(w io.Writer, what string, rows []planner.CostChange) {
	fmt.Fprintf(w, "| %s | before | after | delta |\n", what)
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, c := range capped(rows) {
		fmt.Fprintf(w, "| %s | %s | %s | %s%s |\n", markdown.Text(c.Name), quantity.USD(c.Before), quantity.USD(c.After), quantity.SignedUSD(c.Delta), percentOf(c.Delta, c.Before))
	}
}

// SignificantPercent is the threshold above which a team's or cost centre's
// cost change is listed in the comment although its quota did not change.
const SignificantPercent = 10

func significant(c planner.CostChange) bool {
	if c.Before.IsZero() {
		return !c.Delta.Round(2).IsZero()
	}
	return c.Delta.Abs().MulInt(100).Cmp(c.Before.Abs().MulInt(SignificantPercent)) > 0
}

// changedByPR returns the teams whose quota the change sets and their cost centres.
func changedByPR(p *planner.Plan, d *planner.Diff) (teams, costCenters map[string]bool) {
	teams, costCenters = map[string]bool{}, map[string]bool{}
	for _, q := range d.Quotas {
		teams[string(q.Team)] = true
	}
	for _, t := range p.Teams {
		if teams[string(t.Team)] {
			cc := t.CostCenter
			if cc == "" {
				cc = planner.NoCostCenter
			}
			costCenters[cc] = true
		}
	}
	return teams, costCenters
}

// MaxRows bounds every table of the comment, so that it stays short (GitHub
// comments are limited to 65,536 characters) for any change in any organisation;
// the JSON and the HTML report have every row.
const MaxRows = 40

// boundWhatIf keeps, of the what-if's per-team rows, those whose quota changed
// or that would wait longer, at most MaxRows of each; more is how many are left out.
func boundWhatIf(r *whatif.Result) (out *whatif.Result, more int) {
	if len(r.Teams) <= MaxRows && len(r.Longer) <= MaxRows {
		return r, 0
	}
	longer := map[string]bool{}
	for _, l := range r.Longer {
		longer[l.Team] = true
	}
	c := *r
	c.Teams = nil
	for _, t := range r.Teams {
		if (t.QuotaChanged || longer[t.Team]) && len(c.Teams) < MaxRows {
			c.Teams = append(c.Teams, t)
		}
	}
	c.Longer = capped(r.Longer)
	return &c, len(r.Teams) - len(c.Teams)
}

// approvers groups the approvals by who, in their order.
func approvers(as []planner.Approval) (who []string, why map[string][]string) {
	why = map[string][]string{}
	for _, a := range as {
		if _, ok := why[a.Who]; !ok {
			who = append(who, a.Who)
		}
		why[a.Who] = append(why[a.Who], a.Why)
	}
	return who, why
}

func capped3(s []string) []string { return s[:min(len(s), 3)] }

func capped[T any](rows []T) []T { return rows[:min(len(rows), MaxRows)] }

func moreRows(w io.Writer, n int, what string) {
	if n > MaxRows {
		fmt.Fprintf(w, "| … %d more %s: see `allot plan -o json` or `allot report` | | | |\n", n-MaxRows, what)
	}
}

// errorLead is what the first line says before the cost when the configuration
// has errors: "✗ 1 error: team-budget — ", or "✗ 3 errors: team-budget, schema — ".
func errorLead(fs schema.Findings) string {
	n := fs.Count(schema.SeverityError)
	if n == 0 {
		return ""
	}
	var rules []string
	for _, f := range fs {
		if f.Severity == schema.SeverityError && !slices.Contains(rules, f.Rule) {
			rules = append(rules, f.Rule)
		}
	}
	s := "errors"
	if n == 1 {
		s = "error"
	}
	if len(rules) > 3 {
		rules = append(rules[:3], "…")
	}
	return fmt.Sprintf("✗ %d %s: %s — ", n, s, markdown.Text(strings.Join(rules, ", ")))
}

func writeFindingsMarkdown(w io.Writer, fs schema.Findings) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "**Findings**: %d error(s), %d warning(s)\n\n", fs.Count(schema.SeverityError), fs.Count(schema.SeverityWarning))
	fmt.Fprintln(w, "| | where | rule | message |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range capped(fs) {
		icon := "⚠️ warning"
		if f.Severity == schema.SeverityError {
			icon = "❌ error"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", icon, markdown.Code(f.Pos.String()), markdown.Text(f.Rule), markdown.Text(f.Message))
	}
	moreRows(w, len(fs), "findings")
	fmt.Fprintln(w)
}

// writeApproximationsMarkdown lists the rules the scheduler runs otherwise
// than the repository writes them, so that the reviewers see what is in
// force: accepted (approximate: true) or not.
func writeApproximationsMarkdown(w io.Writer, fs schema.Findings) {
	as := fs.Approximations()
	if len(as) == 0 {
		return
	}
	accepted := 0
	for _, f := range as {
		if f.Accepted {
			accepted++
		}
	}
	fmt.Fprintf(w, "**Approximations in force**: %d, %d accepted with `approximate: true`; the scheduler runs these rules otherwise than written\n\n", len(as), accepted)
	fmt.Fprintln(w, "| | of | rule | where |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range capped(as) {
		state := "⚠️ not accepted"
		if f.Accepted {
			state = "✅ accepted"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", state, markdown.Text(f.Approximation), markdown.Text(f.Rule), markdown.Code(f.Pos.String()))
	}
	moreRows(w, len(as), "approximations")
	fmt.Fprintln(w)
}

// slurmRows are the Slurm clusters' changes, one row each: cluster, change
// (op and kind), name, what.
func slurmRows(cs []slurm.ClusterChanges) [][4]string {
	var rows [][4]string
	for _, sc := range cs {
		for _, c := range sc.Changes {
			rows = append(rows, [4]string{string(sc.Cluster), c.Op + " " + c.Kind, c.Name, c.Detail})
		}
	}
	return rows
}

// slurmMarkdown lists what the change does to each Slurm cluster's
// accounting: what allot slurm apply runs after the merge.
func slurmMarkdown(w io.Writer, cs []slurm.ClusterChanges) {
	rows := slurmRows(cs)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "#### Slurm accounting")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "What `allot slurm apply` changes on each Slurm cluster once this merges:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| cluster | change | name | what |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range capped(rows) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", markdown.Text(r[0]), r[1], markdown.Text(r[2]), markdown.Text(r[3]))
	}
	moreRows(w, len(rows), "Slurm changes")
	fmt.Fprintln(w)
}
