package recommend

import (
	"fmt"
	"github.com/allot-dev/allot/internal/markdown"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema/quantity"
)

// table is a rendering of the result's sections as rows of cells, shared by
// the text and Markdown writers.
type table struct {
	title string
	head  []string
	rows  [][]string
	note  string
}

func (r *Result) tables() []table {
	teams := table{title: "Quotas", head: []string{"team", "flavor", "nominal GPUs", "wait p95", "target", "bound"},
		note: "Wait p95 of the team's jobs of the flavor, today → with the recommended quotas; \"never\": more than one job in twenty never started."}
	for _, t := range r.Teams {
		teams.rows = append(teams.rows, []string{string(t.Team), string(t.Flavor), change(fmt.Sprint(t.NominalBefore), fmt.Sprint(t.NominalAfter)),
			change(wait(t.WaitP95SBefore), wait(t.WaitP95SAfter)), whatif.Duration(t.TargetWaitP95S), t.Bound})
	}
	pools := table{title: "Pools", head: []string{"pool", "flavor", "nodes", "monthly"}}
	burst := r.BurstUSDBefore != nil && r.BurstUSDAfter != nil
	if burst {
		pools.head = append(pools.head, "burst (replay)")
		pools.note = "Burst: the node-hours of burst nodes and their on-demand cost in the replay of the workload (over its span, not a month)."
	}
	for _, p := range r.Pools {
		row := []string{string(p.Pool), string(p.Flavor), change(fmt.Sprint(p.NodesBefore), fmt.Sprint(p.NodesAfter)),
			change(quantity.USD(p.MonthlyUSDBefore), quantity.USD(p.MonthlyUSDAfter))}
		switch b := p.Burst; {
		case b != nil:
			row = append(row, change(fmt.Sprintf("%.1f node-h %s", b.NodeHoursBefore, quantity.USD(b.USDBefore)), fmt.Sprintf("%.1f node-h %s", b.NodeHoursAfter, quantity.USD(b.USDAfter))))
		case burst:
			row = append(row, "")
		}
		pools.rows = append(pools.rows, row)
	}
	total := []string{"total", "", "", change(quantity.USD(r.MonthlyUSDBefore), quantity.USD(r.MonthlyUSDAfter))}
	if burst {
		total = append(total, change(quantity.USD(*r.BurstUSDBefore), quantity.USD(*r.BurstUSDAfter)))
	}
	pools.rows = append(pools.rows, total)
	out := []table{teams, pools}
	if t, ok := r.burstTable(); ok {
		out = append(out, t)
	}
	if len(r.Committed) > 0 {
		c := table{title: "Committed nodes", head: []string{"pool", "committed", "break-even use", "monthly (replayed use)", "saved"},
			note: "Priced on the replayed use of the recommended fleet: committed nodes every hour, on-demand nodes while busy (and nodes.min always). A committed node pays off above the break-even use."}
		for _, m := range r.Committed {
			c.rows = append(c.rows, []string{string(m.Pool), change(fmt.Sprint(m.CommittedNodesBefore), fmt.Sprint(m.CommittedNodesAfter)),
				fmt.Sprintf("%.0f%%", 100*m.BreakEvenUtilization), change(quantity.USD(m.MonthlyUSDBefore), quantity.USD(m.MonthlyUSDAfter)), quantity.USD(m.MonthlyUSDSaved)})
		}
		out = append(out, c)
	}
	if len(r.Curve) > 0 {
		c := table{title: "Cost against wait", head: []string{"flavor", "nominal GPUs", "capacity GPUs", "monthly", "wait p95", ""},
			note: "The searched teams' recommended quotas of one flavor scaled together; monthly cost of the flavor's pools; wait p95 of the flavor's jobs." + r.curveGrid()}
		for _, p := range r.Curve {
			var marks []string
			if p.Recommended {
				marks = append(marks, "← recommended")
			}
			if p.Why != "" {
				marks = append(marks, "↑ longer: see below")
				c.note += fmt.Sprintf("\n%s at %d GPUs: %s %s.", p.Flavor, p.GPUs, wait(p.WaitP95S), p.Why)
			}
			c.rows = append(c.rows, []string{string(p.Flavor), fmt.Sprint(p.NominalGPUs), fmt.Sprint(p.GPUs), quantity.USD(p.MonthlyUSD), wait(p.WaitP95S), strings.Join(marks, " ")})
		}
		out = append(out, c)
	}
	return out
}

// burstTable weighs each burst pool's planned nodes against fewer nodes and
// its burst (PoolChange.BurstOption); false when no pool has an option.
func (r *Result) burstTable() (table, bool) {
	t := table{title: "Burst instead of fixed nodes", head: []string{"pool", "fixed nodes", "burst (replay)", "expected monthly", "targets", ""},
		note: "Expected monthly: the fleet's fixed monthly cost plus the replay's burst cost spread over a month. The fewer nodes are those the pool's headroom and spare nodes add above its quotas (at most burst.maxNodes): lower them to plan the chosen size."}
	chosen := func(yes bool) string {
		if yes {
			return "← chosen"
		}
		return ""
	}
	for _, p := range r.Pools {
		o := p.BurstOption
		if o == nil {
			continue
		}
		planned := ""
		if p.Burst != nil {
			planned = fmt.Sprintf("%.1f node-h %s", p.Burst.NodeHoursAfter, quantity.USD(p.Burst.USDAfter))
		}
		met := "met"
		if !o.MeetsTargets {
			met = "missed: " + strings.Join(o.Missed, ", ")
		}
		t.rows = append(t.rows,
			[]string{string(p.Pool), fmt.Sprint(p.NodesAfter), planned, quantity.USD(o.ExpectedMonthlyUSDPlanned), "as recommended", chosen(!o.Chosen)},
			[]string{string(p.Pool), fmt.Sprintf("%d (%d fewer)", o.Nodes, o.FewerNodes), fmt.Sprintf("%.1f node-h %s", o.BurstNodeHours, quantity.USD(o.BurstUSD)),
				quantity.USD(o.ExpectedMonthlyUSD), met, chosen(o.Chosen)})
	}
	return t, len(t.rows) > 0
}

func (r *Result) headline() string {
	var ts []string
	for _, t := range r.Targets {
		ts = append(ts, t.String())
	}
	times := fmt.Sprintf("%d times", r.Replays)
	if r.CoarseReplays > 0 {
		times = fmt.Sprintf("%d times (%d on a %s grid)", r.Replays, r.CoarseReplays, gridDuration(r.GridS))
	}
	s := fmt.Sprintf("%d jobs of %s replayed %s for %s", r.Jobs, r.Workload, times, strings.Join(ts, ", "))
	switch {
	case r.Converged:
	case r.Stopped == StoppedTrade:
		s += " (the search stopped where teams trade a node back and forth — one meets its target with a node less only while another has one more: not every quota is the least)"
	default:
		s += " (the search stopped at its replay budget: not every quota is the least)"
	}
	return s
}

// curveGrid says, when the curve was replayed on a grid, that its waits are
// those of the grid.
func (r *Result) curveGrid() string {
	if r.CurveGridS <= 0 {
		return ""
	}
	return fmt.Sprintf(" Replayed on the search's %s grid (arrivals and ends on whole steps): close to, not the same as, exact waits.", gridDuration(r.CurveGridS))
}

func gridDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (r *Result) costLine() string {
	return fmt.Sprintf("Monthly cost %s → %s (%s)", quantity.USD(r.MonthlyUSDBefore), quantity.USD(r.MonthlyUSDAfter),
		quantity.SignedUSD(r.MonthlyUSDAfter.Sub(r.MonthlyUSDBefore)))
}

// burstLines say, per pool whose burst option is chosen, what it saves.
func (r *Result) burstLines() []string {
	var out []string
	for _, p := range r.Pools {
		if o := p.BurstOption; o != nil && o.Chosen {
			out = append(out, fmt.Sprintf("Pool %s: burst instead of %d fixed node(s), %s → %s expected a month (see below)",
				p.Pool, o.FewerNodes, quantity.USD(o.ExpectedMonthlyUSDPlanned), quantity.USD(o.ExpectedMonthlyUSD)))
		}
	}
	return out
}

// Text writes the recommendation as aligned terminal tables.
func Text(w io.Writer, r *Result) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Recommendation: %s\n%s\n", r.headline(), r.costLine())
	for _, l := range r.burstLines() {
		fmt.Fprintln(b, l)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(b, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.head, "\t")))
		for _, row := range t.rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
		if t.note != "" {
			fmt.Fprintln(b, t.note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown writes the recommendation as Markdown tables.
func Markdown(w io.Writer, r *Result) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "### Recommendation\n\n%s.\n\n**%s**\n", markdown.Text(r.headline()), r.costLine())
	for _, l := range r.burstLines() {
		fmt.Fprintf(b, "\n%s\n", markdown.Text(l))
	}
	for _, t := range r.tables() {
		fmt.Fprintf(b, "\n#### %s\n\n| %s |\n|", t.title, strings.Join(t.head, " | "))
		for range t.head {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, row := range t.rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = markdown.Text(c)
			}
			fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
		}
		if t.note != "" {
			fmt.Fprintf(b, "\n<sub>%s</sub>\n", markdown.Text(t.note))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func change(before, after string) string {
	if before == after {
		return after
	}
	return before + " → " + after
}

func wait(s *float64) string {
	if s == nil {
		return "never"
	}
	return whatif.Duration(*s)
}
