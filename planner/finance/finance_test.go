package finance

import (
	"bytes"
	"html"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/evaluate"
	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/policies"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// examples returns the example repository with edits applied: file -> {old, new}.
func examples(t *testing.T, edits map[string][2]string) fs.FS {
	t.Helper()
	src := os.DirFS("../../examples")
	out := fstest.MapFS{}
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		if e, ok := edits[p]; ok {
			if !bytes.Contains(b, []byte(e[0])) {
				t.Fatalf("%s does not contain %q", p, e[0])
			}
			b = bytes.Replace(b, []byte(e[0]), []byte(e[1]), 1)
		}
		out[p] = &fstest.MapFile{Data: b}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// change is the example pull request: robotics' H100 quota 128 -> 160, with
// edits more on the head.
func change(t *testing.T, head map[string][2]string) Input {
	t.Helper()
	base := evaluate.Repository(examples(t, nil), nil)
	if head == nil {
		head = map[string][2]string{}
	}
	head["teams/robotics.cue"] = [2]string{"nominal: 128", "nominal: 160"}
	h := evaluate.Repository(examples(t, head), base.Config)
	if base.Plan == nil || h.Plan == nil {
		t.Fatalf("examples do not load: %v %v", base.Findings, h.Findings)
	}
	d := planner.Compare(base.Plan, h.Plan)
	d.Approvals = policies.Approvals(base.Config, h.Config, d)
	return Input{Input: planreport.Input{Name: "head", Config: h.Config, Plan: h.Plan, Findings: h.Findings,
		BaseName: "origin/main", Base: base.Plan, Diff: d}, BaseConfig: base.Config}
}

func alone(t *testing.T) Input {
	t.Helper()
	r := evaluate.Repository(examples(t, nil), nil)
	return Input{Input: planreport.Input{Name: "examples", Config: r.Config, Plan: r.Plan, Findings: r.Findings}}
}

func sum[T any](rows []T, f func(T) quantity.Decimal) quantity.Decimal {
	var s quantity.Decimal
	for _, r := range rows {
		s = s.Add(f(r))
	}
	return s
}

// TestMoneyAddsUp: every breakdown of the report adds up to the plan's total to
// the exact cent, before and after, and each pool's committed and on-demand parts
// add up to the planner's cost of the pool.
func TestMoneyAddsUp(t *testing.T) {
	for name, in := range map[string]Input{"alone": alone(t), "change": change(t, nil)} {
		t.Run(name, func(t *testing.T) {
			r := Build(in)
			eq := func(what string, got, want quantity.Decimal) {
				t.Helper()
				if got.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", what, got, want)
				}
			}
			after := func(c CostRow) quantity.Decimal { return c.After }
			before := func(c CostRow) quantity.Decimal { return c.Before }
			eq("total", r.Total, in.Plan.TotalMonthlyUSD)
			eq("teams' costs", sum(r.Teams, after), r.Total)
			eq("cost centres' costs + unallocated", sum(r.CostCenters, after).Add(in.Plan.UnallocatedMonthlyUSD), r.Total)
			eq("pools' costs", sum(r.Pools, func(p PoolRow) quantity.Decimal { return p.Spend.Total() }), r.Total)
			eq("committed + on demand", r.Spend.Total(), r.Total)
			for i, p := range r.Pools {
				eq(p.Pool+" committed + on demand", p.Spend.Total(), in.Plan.Pools[i].MonthlyUSD)
			}
			if in.Base == nil {
				if r.HasBase() || r.Verdict != "" || !r.TotalBefore.IsZero() {
					t.Errorf("a report without a base shows a change: %q %s", r.Verdict, r.TotalBefore)
				}
				return
			}
			eq("teams before", sum(r.Teams, before), in.Base.TotalMonthlyUSD)
			eq("pools before", sum(r.Pools, func(p PoolRow) quantity.Decimal { return p.Before }), in.Base.TotalMonthlyUSD)
			eq("spend before", r.SpendBefore.Total(), in.Base.TotalMonthlyUSD)
			eq("delta", r.Delta, in.Diff.Delta)
		})
	}
}

// TestCommittedAndOnDemand checks the split of the example pools by hand: 730
// hours of committed nodes at their price, the rest at the on-demand price.
func TestCommittedAndOnDemand(t *testing.T) {
	r := Build(change(t, nil))
	got := map[string][2]string{}
	for _, p := range r.Pools {
		got[p.Pool] = [2]string{quantity.USD(p.Spend.Committed), quantity.USD(p.Spend.OnDemand)}
	}
	want := map[string][2]string{
		"dgx-h100": {"$1,027,840.00", "$0.00"}, // 64 x 22.00 x 730, all committed
		"gke-h100": {"$324,704.00", "$0.00"},   // 8 committed x 55.60 x 730
		"eks-p5":   {"$0.00", "$522,329.60"},   // 13 x 55.04 x 730
		"eks-p4d":  {"$0.00", "$641,232.00"},   // 40 x 21.96 x 730
		"gke-a100": {"$0.00", "$42,905.02"},    // 2 x 29.387 x 730
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("committed, on demand per pool (-want +got):\n%s", d)
	}
	if r.Spend.CommittedNodes != 72 || r.Spend.CommittedShare() != "52.9%" || r.Spend.OnDemandShare() != "47.1%" {
		t.Errorf("spend %+v, committed %s, on demand %s", r.Spend, r.Spend.CommittedShare(), r.Spend.OnDemandShare())
	}
}

// TestTheChangeIsMarked: what the change edits is marked (robotics, its cost
// centre, the pool that grows, the flavor), and nothing else; finance is among
// the approvals.
func TestTheChangeIsMarked(t *testing.T) {
	r := Build(change(t, nil))
	marked := func(rows []CostRow) []string {
		var out []string
		for _, c := range rows {
			if c.Changed {
				out = append(out, c.Name)
			}
		}
		return out
	}
	if got := marked(r.Teams); !slices.Equal(got, []string{"robotics"}) {
		t.Errorf("teams marked %v", got)
	}
	if got := marked(r.CostCenters); !slices.Equal(got, []string{"CC-1042"}) {
		t.Errorf("cost centres marked %v", got)
	}
	for _, p := range r.Pools {
		if grew := p.Nodes != p.NodesBefore; grew != (p.Pool == "eks-p5") {
			t.Errorf("pool %s: %d -> %d nodes", p.Pool, p.NodesBefore, p.Nodes)
		}
	}
	i := slices.IndexFunc(r.Teams, func(c CostRow) bool { return c.Name == "robotics" })
	if q := r.Teams[i].Quota; q != "h100-80gb 128 → 160" {
		t.Errorf("robotics' quota reads %q", q)
	}
	i = slices.IndexFunc(r.Flavors, func(f FlavorRow) bool { return f.Flavor == "h100-80gb" })
	if f := r.Flavors[i]; f.NominalBefore != 624 || f.Nominal != 656 || f.MaxGPUs != 1152 || f.Headroom != 496 {
		t.Errorf("h100-80gb %+v", f)
	}
	if !slices.ContainsFunc(r.Approvals, func(a planner.Approval) bool { return a.Role == planner.RoleFinance }) {
		t.Errorf("approvals %+v lack finance", r.Approvals)
	}
}

// TestTeamsAndPoolsThatComeAndGo: a team the change adds was nothing before, and
// one it removes stays in the report at nothing after, so the columns still add
// up.
func TestTeamsAndPoolsThatComeAndGo(t *testing.T) {
	in := change(t, map[string][2]string{"teams/speech.cue": {"speech: {", "voice: {"}})
	r := Build(in)
	rows := map[string]CostRow{}
	for _, c := range r.Teams {
		rows[c.Name] = c
	}
	if v := rows["voice"]; !v.Before.IsZero() || v.After.IsZero() || !v.Changed {
		t.Errorf("voice (added) %+v", v)
	}
	if s := rows["speech"]; s.Before.IsZero() || !s.After.IsZero() || !s.Changed || s.Quota != "a100-40gb 48 → 0" {
		t.Errorf("speech (removed) %+v", s)
	}
	if got := sum(r.Teams, func(c CostRow) quantity.Decimal { return c.Before }); got.Cmp(in.Base.TotalMonthlyUSD) != 0 {
		t.Errorf("teams before add up to %s, want %s", got, in.Base.TotalMonthlyUSD)
	}
}

// TestChartsStayInTheirAxes: every bar and marker lies on the plot, the scale
// ends on a tick at or above the largest value, and the team chart ranks the
// most expensive first.
func TestChartsStayInTheirAxes(t *testing.T) {
	r := Build(change(t, nil))
	for _, c := range []Chart{r.TeamChart, r.PoolChart, r.SpendChart, r.FlavorChart} {
		t.Run(c.Title, func(t *testing.T) {
			if len(c.Rows) == 0 || len(c.Ticks) < 2 || c.Ticks[0].X != c.PlotX || c.Ticks[len(c.Ticks)-1].X != c.PlotX+c.PlotW {
				t.Fatalf("%d rows, ticks %+v, plot %v..%v", len(c.Rows), c.Ticks, c.PlotX, c.PlotX+c.PlotW)
			}
			for _, row := range c.Rows {
				for _, rect := range row.Rects {
					if rect.X < c.PlotX || rect.W <= 0 || rect.X+rect.W > c.PlotX+c.PlotW+0.1 || rect.Y < 0 || rect.Y2() > c.AxisY {
						t.Errorf("row %s: rect %+v off the plot", row.Label, rect)
					}
				}
				if m := row.Marker; m != nil && (m.X < c.PlotX || m.X > c.PlotX+c.PlotW) {
					t.Errorf("row %s: marker %+v off the plot", row.Label, m)
				}
			}
		})
	}
	var order []string
	for _, row := range r.TeamChart.Rows {
		order = append(order, row.Label)
	}
	if want := []string{"nlp", "robotics", "search", "vision", "ads", "speech", "platform"}; !slices.Equal(order, want) {
		t.Errorf("team chart order %v, want %v", order, want)
	}
	if got := r.TeamChart.Ticks[len(r.TeamChart.Ticks)-1].Label; got != "$1M" {
		t.Errorf("team chart ends at %s, want $1M", got)
	}
}

func TestNiceStep(t *testing.T) {
	for raw, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.1: 2, 2.2: 2.5, 3: 5, 7: 10, 215_000: 250_000, 960: 1000} {
		if got := niceStep(raw); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", raw, got, want)
		}
	}
	for v, want := range map[float64]string{0: "$0", 750: "$750", 250_000: "$250k", 1_500_000: "$1.5M", 2_000_000: "$2M", 12_500: "$12.5k"} {
		if got := compactUSD(v); got != want {
			t.Errorf("compactUSD(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestHTMLIsSelfContainedAndEscaped: the page loads nothing (no script, link,
// import or URL), free text such as a cost centre is escaped, and the same
// report gives the same bytes.
func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	in := change(t, map[string][2]string{"teams/ads.cue": {`costCenter: "CC-2044"`, `costCenter: "<script>alert(1)</script> & co"`}})
	in.Name = `<img src=x onerror="alert(1)">`
	var a, b bytes.Buffer
	if err := HTML(&a, Build(in)); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&b, Build(in)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two renders of one report differ")
	}
	page := a.String()
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script`), regexp.MustCompile(`(?i)<link`), regexp.MustCompile(`(?i)<img`),
		regexp.MustCompile(`(?i)@import`), regexp.MustCompile(`(?i)url\(`), regexp.MustCompile(`(?i)<[^>]*\s(src|href|on[a-z]+)=`), regexp.MustCompile(`(?i)https?:`),
	} {
		if loc := bad.FindStringIndex(page); loc != nil {
			t.Errorf("the page has %s: %q", bad, page[max(0, loc[0]-60):min(len(page), loc[1]+60)])
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt; &amp; co", "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;", "<svg viewBox=", "Cost per team"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// TestHTMLWhatIf: the what-if section names the teams that would wait longer
// and shows before → after.
func TestHTMLWhatIf(t *testing.T) {
	in := change(t, nil)
	in.WhatIf = &whatif.Result{Workload: "jobs.csv", Jobs: 3,
		Before: &whatif.Figures{Utilization: 0.5, WaitP95S: 60}, After: whatif.Figures{Utilization: 0.6, WaitP95S: 600},
		Teams: []whatif.Team{
			{Team: "robotics", QuotaChanged: true, Before: &whatif.Figures{NominalGPUs: 128, Utilization: 0.9}, After: whatif.Figures{NominalGPUs: 160, Utilization: 0.8}},
			{Team: "search", Before: &whatif.Figures{NominalGPUs: 96, WaitP95S: 100, Preemptions: 1}, After: whatif.Figures{NominalGPUs: 96, WaitP95S: 400, Preemptions: 1}},
		},
		Longer: []whatif.LongerWait{{Team: "search", Metric: "wait_p95_s", Before: 100, After: 400}},
	}
	r := Build(in)
	want := []WhatIfRow{
		{Team: "robotics", QuotaChanged: true, QuotaUse: "90% → 80%", WaitP50: "0s", WaitP95: "0s", Preempted: "0", Unfinished: "0", Burst: "–"},
		{Team: "search", WaitsLonger: true, QuotaUse: "0%", WaitP50: "0s", WaitP95: "1m 40s → 6m 40s", Preempted: "1", Unfinished: "0", Burst: "–"},
		{Team: "fleet", QuotaUse: "50% → 60%", WaitP50: "0s", WaitP95: "1m → 10m", Preempted: "0", Unfinished: "0", Burst: "–"},
	}
	if d := cmp.Diff(want, r.WhatIf.Teams); d != "" {
		t.Errorf("what-if rows (-want +got):\n%s", d)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	text := html.UnescapeString(b.String())
	for _, s := range []string{"search: p95 queue wait 1m 40s → 6m 40s (+5m)", "3 jobs of <code>jobs.csv</code>", "quota changed"} {
		if !strings.Contains(text, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
}

// TestHTMLWhatIfBurst: when a pool bursts in the replay, the what-if
// table shows the burst GPU-hours and cost each team's gangs caused, and
// the fleet's; without burst the column is not there.
func TestHTMLWhatIfBurst(t *testing.T) {
	in := change(t, nil)
	cost, fleetCost := quantity.MustParse("10.35"), quantity.MustParse("20.7")
	in.WhatIf = &whatif.Result{Workload: "jobs.csv", Jobs: 3,
		After: whatif.Figures{BurstGPUHours: 16, BurstUSD: &fleetCost},
		Teams: []whatif.Team{
			{Team: "robotics", After: whatif.Figures{NominalGPUs: 128}},
			{Team: "search", After: whatif.Figures{NominalGPUs: 96, BurstGPUHours: 8, BurstUSD: &cost}},
		},
	}
	r := Build(in)
	var got []string
	for _, row := range r.WhatIf.Teams {
		got = append(got, row.Team+": "+row.Burst)
	}
	if want := []string{"robotics: –", "search: 8.0 GPU-h · $10.35", "fleet: 16.0 GPU-h · $20.70"}; !r.WhatIf.HasBurst || !slices.Equal(got, want) {
		t.Errorf("burst %v: %q, want %q", r.WhatIf.HasBurst, got, want)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if text := html.UnescapeString(b.String()); !strings.Contains(text, "Burst nodes caused") || !strings.Contains(text, "8.0 GPU-h · $10.35") {
		t.Error("the page lacks the burst column")
	}
	in.WhatIf.After, in.WhatIf.Teams[1].After = whatif.Figures{}, whatif.Figures{NominalGPUs: 96}
	b.Reset()
	if err := HTML(&b, Build(in)); err != nil || strings.Contains(b.String(), "Burst nodes caused") {
		t.Errorf("without burst: %v, the page has the burst column", err)
	}
}

// TestHTMLOfAConfigurationThatDoesNotLoad shows the findings and no figures.
func TestHTMLOfAConfigurationThatDoesNotLoad(t *testing.T) {
	res := evaluate.Repository(examples(t, map[string][2]string{"pools.cue": {"gpusPerNode: 8", "gpusPerNod: 8"}}), nil)
	r := Build(Input{Input: planreport.Input{Name: "broken", Findings: res.Findings}})
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if r.Loaded || !strings.Contains(page, "does not load") || !strings.Contains(page, "unknown-field") || strings.Contains(page, "Cost per team") {
		t.Errorf("loaded %v; page:\n%s", r.Loaded, page[strings.Index(page, "<main>"):])
	}
	if res.Findings.Count(schema.SeverityError) == 0 {
		t.Fatal("the broken examples have no errors")
	}
}

// The burst the managers metered is billed per pool and team at the pool's
// on-demand price; a pool the repository does not declare is left out.
func TestBurstMeteredIsBilled(t *testing.T) {
	in := change(t, nil)
	var name schema.PoolName
	for n := range in.Config.Pools {
		if name == "" || n < name {
			name = n
		}
	}
	p := in.Config.Pools[name]
	since, at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	in.Burst = []BurstMetered{
		{Pool: name, Team: "search", NodeSeconds: 2 * 3600 * 3, Since: since, At: at}, // 6 node-hours
		{Pool: name, Team: "", NodeSeconds: 1800, Since: since, At: at},
		{Pool: "not-declared", Team: "search", NodeSeconds: 3600, Since: since, At: at},
	}
	r := Build(in)
	if r.Burst == nil || len(r.Burst.Rows) != 2 {
		t.Fatalf("burst %+v; want the two rows of %s", r.Burst, name)
	}
	row := r.Burst.Rows[1]
	wantCost := p.Price.OnDemandPerNodeHour.MulInt(6)
	if row.Team != "search" || row.NodeHours.String() != "6" || row.GPUHours.String() != quantity.Int(6*p.GPUsPerNode).String() || row.CostUSD.String() != wantCost.String() {
		t.Errorf("search's row %+v; want 6 node-hours, %d GPU-hours, %s", row, 6*p.GPUsPerNode, wantCost)
	}
	total := wantCost.Add(p.Price.OnDemandPerNodeHour.Quo(quantity.Int(2)))
	if r.Burst.CostUSD.String() != total.String() || wantCost.IsZero() {
		t.Errorf("total %s; want %s (a non-zero price)", r.Burst.CostUSD, total)
	}
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if text := html.UnescapeString(b.String()); !strings.Contains(text, `<section id="burst">`) || !strings.Contains(text, quantity.USD(wantCost)) || strings.Contains(text, "not-declared") {
		t.Error("the page lacks the burst section, its cost, or bills an undeclared pool")
	}
	in.Burst = nil
	if r := Build(in); r.Burst != nil {
		t.Errorf("nothing metered: burst %+v", r.Burst)
	}
}
