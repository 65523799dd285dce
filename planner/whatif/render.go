package whatif

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/allot-dev/allot/internal/markdown"
	"github.com/allot-dev/allot/schema/quantity"
)

// Markdown writes the what-if section of the pull-request comment: the teams that
// would wait longer, in numbers, then every team's figures before and after.
func Markdown(w io.Writer, r *Result) error {
	ew := &strings.Builder{}
	fmt.Fprintf(ew, "#### What-if: %d jobs of %s replayed by the scheduler\n\n", r.Jobs, markdown.Code(r.Workload))
	if r.Before != nil {
		if len(r.Longer) == 0 {
			fmt.Fprintln(ew, "✅ No team whose quota is unchanged would wait longer.")
		}
		for _, l := range r.Longer {
			fmt.Fprintf(ew, "- ⚠️ **%s would wait longer**: %s\n", markdown.Text(l.Team), l.Sentence())
		}
		fmt.Fprintln(ew)
	}
	fmt.Fprintln(ew, "| team | quota use | wait p50 | wait p95 | preemptions | unfinished jobs |")
	fmt.Fprintln(ew, "|---|---:|---:|---:|---:|---:|")
	for _, t := range r.Teams {
		name := markdown.Text(t.Team)
		if t.QuotaChanged {
			name += " ✎"
		}
		fmt.Fprintf(ew, "| %s | %s |\n", name, strings.Join(cells(t.Before, t.After), " | "))
	}
	fmt.Fprintf(ew, "| **fleet** | %s |\n\n", strings.Join(cells(r.Before, r.After), " | "))
	fmt.Fprintln(ew, "<sub>Quota use: GPU-seconds used over the nominal quota's GPU-seconds during the replay (above 100% the team borrowed); fleet: GPU utilization. ✎ quota changed. Waits are of the jobs that started; job durations end jobs only, the scheduler never sees them.</sub>")
	fmt.Fprintln(ew)
	if pools, teams := burstRows(r); len(pools) > 0 {
		fmt.Fprintln(ew, "| burst pool | node-hours | cost |")
		fmt.Fprintln(ew, "|---|---:|---:|")
		for _, row := range pools {
			fmt.Fprintf(ew, "| %s | %s | %s |\n", markdown.Text(row[0]), row[1], row[2])
		}
		var by []string
		for _, t := range teams {
			by = append(by, markdown.Text(t[0])+" "+t[1])
		}
		fmt.Fprintf(ew, "\n<sub>%s%s</sub>\n\n", burstNote, strings.Join(by, ", "))
	}
	_, err := io.WriteString(w, ew.String())
	return err
}

// Text writes the what-if comparison as an aligned terminal table.
func Text(w io.Writer, r *Result) error {
	ew := &strings.Builder{}
	fmt.Fprintf(ew, "What-if: %d jobs of %s replayed by the scheduler\n", r.Jobs, r.Workload)
	for _, l := range r.Longer {
		fmt.Fprintf(ew, "  %s would wait longer: %s\n", l.Team, l.Sentence())
	}
	fmt.Fprintln(ew)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TEAM\tQUOTA USE\tWAIT P50\tWAIT P95\tPREEMPTIONS\tUNFINISHED\t")
	for _, t := range r.Teams {
		name := t.Team
		if t.QuotaChanged {
			name += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", name, strings.Join(cells(t.Before, t.After), "\t"))
	}
	fmt.Fprintf(tw, "fleet\t%s\t\n", strings.Join(cells(r.Before, r.After), "\t"))
	tw.Flush()
	if pools, teams := burstRows(r); len(pools) > 0 {
		fmt.Fprintln(ew)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "BURST POOL\tNODE-HOURS\tCOST\t")
		for _, row := range pools {
			fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
		}
		tw.Flush()
		var by []string
		for _, t := range teams {
			by = append(by, t[0]+" "+t[1])
		}
		fmt.Fprintf(ew, "%s%s\n", burstNote, strings.Join(by, ", "))
	}
	_, err := io.WriteString(w, ew.String())
	return err
}

// burstNote heads the burst rows' teams.
const burstNote = "Burst: nodes beyond the planned size for waiting gangs, billed on demand over the replay. Caused by: "

// burstRows are the burst pools' node-hours and cost (pool, node-hours,
// cost; before → after when there is a before) and the cost each team's
// gangs caused (team, cost; "" is no team's); none when no pool bursts.
func burstRows(r *Result) (pools, teams [][]string) {
	if r.After.BurstUSD == nil && (r.Before == nil || r.Before.BurstUSD == nil) {
		return nil, nil
	}
	pick := func(f *Figures, pool string) (string, string) {
		if f != nil {
			for _, p := range f.BurstPools {
				if p.Pool == pool {
					return fmt.Sprintf("%.1f", p.NodeHours), quantity.USD(p.USD)
				}
			}
		}
		return "0.0", quantity.USD(quantity.Decimal{})
	}
	var names []string
	for _, f := range []*Figures{r.Before, &r.After} {
		if f != nil {
			for _, p := range f.BurstPools {
				if !slices.Contains(names, p.Pool) {
					names = append(names, p.Pool)
				}
			}
		}
	}
	slices.Sort(names)
	for _, n := range names {
		ah, ac := pick(&r.After, n)
		if r.Before == nil {
			pools = append(pools, []string{n, ah, ac})
			continue
		}
		bh, bc := pick(r.Before, n)
		pools = append(pools, []string{n, arrow(bh, ah), arrow(bc, ac)})
	}
	usd := func(f *Figures) string {
		if f == nil || f.BurstUSD == nil {
			return quantity.USD(quantity.Decimal{})
		}
		return quantity.USD(*f.BurstUSD)
	}
	for _, t := range r.Teams {
		if t.After.BurstUSD == nil && (t.Before == nil || t.Before.BurstUSD == nil) {
			continue
		}
		c := usd(&t.After)
		if r.Before != nil {
			c = arrow(usd(t.Before), c)
		}
		teams = append(teams, []string{t.Team, c})
	}
	if len(teams) == 0 {
		teams = [][]string{{"no team", usd(&r.After)}}
	}
	return pools, teams
}

// arrow is "b → a", or a when they are the same.
func arrow(b, a string) string {
	if b == a {
		return a
	}
	return b + " → " + a
}

// Sentence says the longer wait in words with the numbers, e.g.
// "p95 queue wait 4m 10s → 12m (+7m 50s)".
func (l LongerWait) Sentence() string {
	switch l.Metric {
	case "wait_p50_s", "wait_p95_s":
		p := strings.TrimSuffix(strings.TrimPrefix(l.Metric, "wait_"), "_s")
		return fmt.Sprintf("%s queue wait %s → %s (+%s)", p, Duration(l.Before), Duration(l.After), Duration(l.After-l.Before))
	case "unfinished":
		return fmt.Sprintf("jobs left unfinished %.0f → %.0f", l.Before, l.After)
	}
	return fmt.Sprintf("%s %g → %g", l.Metric, l.Before, l.After)
}

// cells formats a team's or the fleet's figures, before → after when there is a
// before.
func cells(b *Figures, a Figures) []string {
	pct := func(f Figures) string { return fmt.Sprintf("%.0f%%", 100*f.Utilization) }
	if a.NominalGPUs == 0 && a.Utilization == 0 {
		pct = func(Figures) string { return "–" }
	}
	cols := []func(Figures) string{
		pct,
		func(f Figures) string { return Duration(f.WaitP50S) },
		func(f Figures) string { return Duration(f.WaitP95S) },
		func(f Figures) string { return fmt.Sprint(f.Preemptions) },
		func(f Figures) string { return fmt.Sprint(f.Unfinished) },
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		switch {
		case b == nil:
			out[i] = c(a)
		case c(*b) == c(a):
			out[i] = c(a)
		default:
			out[i] = c(*b) + " → " + c(a)
		}
	}
	return out
}

// Duration formats seconds for people: 45s, 12m 30s, 3h 05m.
func Duration(s float64) string {
	n := int64(math.Round(s))
	switch {
	case n < 60:
		return fmt.Sprintf("%ds", n)
	case n < 3600 && n%60 == 0:
		return fmt.Sprintf("%dm", n/60)
	case n < 3600:
		return fmt.Sprintf("%dm %02ds", n/60, n%60)
	default:
		m := (n + 30) / 60
		return fmt.Sprintf("%dh %02dm", m/60, m%60)
	}
}
