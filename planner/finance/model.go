package finance

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/planner/recommend"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Input is what a report shows: the plan's input, and the base's configuration,
// whose prices split the base's cost into committed and on-demand.
type Input struct {
	planreport.Input
	BaseConfig *schema.Config
	// Metered, when given, is what the teams used (the Teams' status): the
	// report sets it beside what their quota costs.
	Metered []Metered
	// Recommendation, when given, is what `allot recommend` found: the report
	// draws its cost-versus-wait curves.
	Recommendation *recommend.Result
	// Burst, when given, is the burst the pools' managers metered (the
	// Pools' status): the report bills it per team.
	Burst []BurstMetered
}

// Report is the finance report's content, every figure computed. Money is exact;
// the renderer rounds it to the cent.
type Report struct {
	Name     string
	BaseName string // empty without a base
	// Provenance is the commits and date the report was made from, e.g.
	// "commit 1a2b3c4d5e6f (base 0f9e8d7c6b5a), 2026-11-23T22:00:00Z"; empty when unknown.
	Provenance string
	Loaded     bool   // false: the configuration does not load, only Findings
	Verdict    string // the diff in one line; empty without a base

	Total, TotalBefore, Delta quantity.Decimal
	Spend, SpendBefore        Spend
	// HasSpendBefore: the base's configuration was given, so its cost splits too.
	HasSpendBefore bool

	Approvals []planner.Approval
	Findings  schema.Findings

	Teams       []CostRow
	CostCenters []CostRow
	Pools       []PoolRow
	Flavors     []FlavorRow

	TeamChart, PoolChart, SpendChart, FlavorChart Chart

	WhatIf *WhatIf
	// Sizing is capacity sized from demand, when a recommendation was given.
	Sizing *Sizing
	// Showback is quota against use, when the usage was given.
	Showback *Showback
	// Burst is the burst the managers held, billed, when it was given.
	Burst *Burst
}

// TeamCount is the number of teams (the unallocated row is none).
func (r *Report) TeamCount() int {
	return len(slices.DeleteFunc(slices.Clone(r.Teams), func(c CostRow) bool { return c.Name == Unallocated }))
}

// HasBase says whether the report compares with a base.
func (r *Report) HasBase() bool { return r.BaseName != "" }

// Spend splits a monthly cost into committed nodes (paid whether used or not)
// and on-demand nodes.
type Spend struct {
	Committed, OnDemand           quantity.Decimal
	CommittedNodes, OnDemandNodes int64
}

// Total is committed plus on-demand.
func (s Spend) Total() quantity.Decimal { return s.Committed.Add(s.OnDemand) }

// CommittedShare is the committed part of the total, in percent (one decimal).
func (s Spend) CommittedShare() string { return share(s.Committed, s.Total()) }

// OnDemandShare is the on-demand part of the total, in percent (one decimal).
func (s Spend) OnDemandShare() string { return share(s.OnDemand, s.Total()) }

// CostRow is one team's or cost centre's monthly cost, before and after.
type CostRow struct {
	Name string
	// Detail is the cost centre of a team, or the teams of a cost centre.
	Detail string
	Quota  string // a team's quota, e.g. "a100-40gb 48 · h100-80gb 64"
	// Budget is a team's monthly budget and the share of it the cost takes.
	Budget, BudgetUse string
	OverBudget        bool
	Before, After     quantity.Decimal
	// Changed marks what the change edits: a team whose quota changes (or that
	// comes or goes), a cost centre with such a team.
	Changed bool
}

// Delta is After minus Before.
func (c CostRow) Delta() quantity.Decimal { return c.After.Sub(c.Before) }

// PoolRow is one pool's size and cost, split into committed and on-demand.
type PoolRow struct {
	Pool, Cluster, Flavor string
	Nodes, NodesBefore    int64
	GPUs                  int64
	AtMax                 bool
	Spend                 Spend
	Before                quantity.Decimal
}

// Delta is the pool's monthly cost after minus before.
func (p PoolRow) Delta() quantity.Decimal { return p.Spend.Total().Sub(p.Before) }

// FlavorRow compares a flavor's quota with its pools' capacity.
type FlavorRow struct {
	Flavor                  string
	Nominal, NominalBefore  int64
	TargetGPUs, MaxGPUs     int64
	UnplacedGPUs            int64
	Pools                   string
	Headroom                int64 // MaxGPUs - Nominal: quota that could still be granted
	HasBefore, QuotaOverMax bool
	UseOfTarget             string // Nominal over TargetGPUs, in percent
}

// WhatIf is the replay of a workload against the base and the change.
type WhatIf struct {
	Workload string
	Jobs     int
	HasBase  bool
	// HasBurst: a pool bursts in a replay; the rows then say what burst
	// nodes their gangs caused.
	HasBurst bool
	Longer   []string // one sentence per team that would wait longer
	Teams    []WhatIfRow
}

// WhatIfRow is one team's (or the fleet's) replayed figures; each cell is
// "before → after" when they differ.
type WhatIfRow struct {
	Team                                              string
	QuotaChanged, WaitsLonger                         bool
	QuotaUse, WaitP50, WaitP95, Preempted, Unfinished string
	// Burst is the burst GPU-hours and their cost the team's gangs caused.
	Burst string
}

// Unallocated names the row of cost no quota asks for.
const Unallocated = "(unallocated)"

// Build computes the report of in.
func Build(in Input) *Report {
	r := &Report{Name: in.Name, Provenance: in.Provenance.String(), Findings: in.Findings, Loaded: in.Plan != nil}
	if in.Diff != nil && in.Base != nil {
		r.BaseName = cmp.Or(in.BaseName, "base")
		r.Verdict = planreport.Verdict(in.Diff)
		r.Approvals = in.Diff.Approvals
	}
	if !r.Loaded {
		return r
	}
	base := in.Base
	if !r.HasBase() {
		base = nil
	}
	r.Total = in.Plan.TotalMonthlyUSD
	if base != nil {
		r.TotalBefore, r.Delta = base.TotalMonthlyUSD, in.Plan.TotalMonthlyUSD.Sub(base.TotalMonthlyUSD)
	}
	r.Teams = teamRows(in.Config, in.Plan, base)
	r.CostCenters = costCenterRows(in.Plan, base, r.Teams)
	r.Pools, r.Spend = poolRows(in.Config, in.Plan)
	if base != nil {
		for i := range r.Pools {
			if b := base.Pool(schema.PoolName(r.Pools[i].Pool)); b != nil {
				r.Pools[i].NodesBefore, r.Pools[i].Before = b.NodesTarget, b.MonthlyUSD
			}
		}
		if in.BaseConfig != nil {
			_, r.SpendBefore = poolRows(in.BaseConfig, base)
			r.HasSpendBefore = true
		}
	}
	r.Flavors = flavorRows(in.Plan, base)
	r.charts()
	if in.Recommendation != nil {
		r.Sizing = sizing(in.Recommendation)
	}
	if in.WhatIf != nil {
		r.WhatIf = whatIfRows(in.WhatIf)
	}
	r.Showback = showback(in.Plan, in.Metered)
	r.Burst = burst(in.Config, in.Burst)
	return r
}

func teamRows(cfg *schema.Config, p, base *planner.Plan) []CostRow {
	names := map[string]bool{}
	for _, t := range p.Teams {
		names[string(t.Team)] = true
	}
	if base != nil {
		for _, t := range base.Teams {
			names[string(t.Team)] = true
		}
	}
	var rows []CostRow
	for _, n := range slices.Sorted(maps.Keys(names)) {
		row := CostRow{Name: n}
		var quota, quotaBefore map[schema.Flavor]int64
		if t := p.Team(schema.TeamName(n)); t != nil {
			row.After, row.Detail, quota = t.MonthlyUSD, cmp.Or(t.CostCenter, planner.NoCostCenter), t.Quota
		}
		if base != nil {
			if t := base.Team(schema.TeamName(n)); t != nil {
				row.Before, quotaBefore = t.MonthlyUSD, t.Quota
				row.Detail = cmp.Or(row.Detail, cmp.Or(t.CostCenter, planner.NoCostCenter))
			}
			row.Changed = !maps.Equal(quota, quotaBefore)
		}
		row.Quota = quotaText(quota, quotaBefore, base != nil)
		if t := cfg.Teams[schema.TeamName(n)]; t != nil && t.BudgetMonthlyUSD != nil {
			b := *t.BudgetMonthlyUSD
			row.Budget = quantity.USD(b)
			row.BudgetUse = share(row.After, b)
			row.OverBudget = row.After.Cmp(b) > 0
		}
		rows = append(rows, row)
	}
	unallocated := CostRow{Name: Unallocated, After: p.UnallocatedMonthlyUSD}
	if base != nil {
		unallocated.Before = base.UnallocatedMonthlyUSD
	}
	if !unallocated.After.Round(2).IsZero() || !unallocated.Before.Round(2).IsZero() {
		rows = append(rows, unallocated)
	}
	return rows
}

// quotaText lists a team's quota per flavor, "before → after" where it changes.
func quotaText(after, before map[schema.Flavor]int64, compare bool) string {
	flavors := map[schema.Flavor]bool{}
	for f := range after {
		flavors[f] = true
	}
	if compare {
		for f := range before {
			flavors[f] = true
		}
	}
	var parts []string
	for _, f := range slices.Sorted(maps.Keys(flavors)) {
		if compare && before[f] != after[f] {
			parts = append(parts, fmt.Sprintf("%s %d → %d", f, before[f], after[f]))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d", f, after[f]))
		}
	}
	return strings.Join(parts, " · ")
}

func costCenterRows(p, base *planner.Plan, teams []CostRow) []CostRow {
	type cc struct {
		teams         []string
		before, after quantity.Decimal
	}
	by := map[string]*cc{}
	add := func(plan *planner.Plan, after bool) {
		for _, c := range plan.CostCenters {
			e := by[c.CostCenter]
			if e == nil {
				e = &cc{}
				by[c.CostCenter] = e
			}
			for _, t := range c.Teams {
				if !slices.Contains(e.teams, string(t)) {
					e.teams = append(e.teams, string(t))
				}
			}
			if after {
				e.after = c.MonthlyUSD
			} else {
				e.before = c.MonthlyUSD
			}
		}
	}
	add(p, true)
	if base != nil {
		add(base, false)
	}
	var rows []CostRow
	for _, name := range slices.Sorted(maps.Keys(by)) {
		e := by[name]
		slices.Sort(e.teams)
		row := CostRow{Name: name, Detail: strings.Join(e.teams, ", "), Before: e.before, After: e.after}
		row.Changed = slices.ContainsFunc(teams, func(t CostRow) bool { return t.Changed && slices.Contains(e.teams, t.Name) })
		rows = append(rows, row)
	}
	return rows
}

// poolRows splits each pool's cost as the planner computes it: 730 hours of
// committed nodes at the committed price, whether used or not, and of the nodes
// above them at the on-demand price.
func poolRows(cfg *schema.Config, p *planner.Plan) ([]PoolRow, Spend) {
	var rows []PoolRow
	var total Spend
	for _, pp := range p.Pools {
		row := PoolRow{Pool: string(pp.Pool), Cluster: string(pp.Cluster), Flavor: string(pp.Flavor),
			Nodes: pp.NodesTarget, GPUs: pp.GPUsTarget, AtMax: pp.AtMax}
		s := Spend{OnDemandNodes: pp.OnDemandNodes, CommittedNodes: pp.CommittedNodes}
		if pool := cfg.Pools[pp.Pool]; pool != nil {
			s.OnDemand = pool.Price.OnDemandPerNodeHour.MulInt(pp.OnDemandNodes * planner.HoursPerMonth)
		}
		// Whatever is not on demand is committed: the split adds up to the pool's
		// cost exactly, the planner's figure.
		s.Committed = pp.MonthlyUSD.Sub(s.OnDemand)
		row.Spend = s
		rows = append(rows, row)
		total.Committed, total.OnDemand = total.Committed.Add(s.Committed), total.OnDemand.Add(s.OnDemand)
		total.CommittedNodes, total.OnDemandNodes = total.CommittedNodes+s.CommittedNodes, total.OnDemandNodes+s.OnDemandNodes
	}
	return rows, total
}

func flavorRows(p, base *planner.Plan) []FlavorRow {
	var rows []FlavorRow
	for _, f := range p.Flavors {
		row := FlavorRow{Flavor: string(f.Flavor), Nominal: f.NominalGPUs, TargetGPUs: f.TargetGPUs, MaxGPUs: f.MaxGPUs,
			UnplacedGPUs: f.UnplacedGPUs, Headroom: f.MaxGPUs - f.NominalGPUs, QuotaOverMax: f.NominalGPUs > f.MaxGPUs}
		var pools []string
		for _, n := range f.Pools {
			pools = append(pools, string(n))
		}
		row.Pools = strings.Join(pools, ", ")
		if base != nil {
			row.HasBefore = true
			if bf := base.Flavor(f.Flavor); bf != nil {
				row.NominalBefore = bf.NominalGPUs
			}
		}
		row.UseOfTarget = share(quantity.Int(f.NominalGPUs), quantity.Int(f.TargetGPUs))
		rows = append(rows, row)
	}
	return rows
}

func whatIfRows(res *whatif.Result) *WhatIf {
	w := &WhatIf{Workload: res.Workload, Jobs: res.Jobs, HasBase: res.Before != nil}
	longer := map[string]bool{}
	for _, l := range res.Longer {
		w.Longer = append(w.Longer, l.Team+": "+l.Sentence())
		longer[l.Team] = true
	}
	for _, t := range res.Teams {
		row := figuresRow(t.Before, t.After)
		row.Team, row.QuotaChanged, row.WaitsLonger = t.Team, t.QuotaChanged, longer[t.Team]
		w.Teams = append(w.Teams, row)
	}
	fleet := figuresRow(res.Before, res.After)
	fleet.Team = "fleet"
	w.Teams = append(w.Teams, fleet)
	w.HasBurst = res.After.BurstUSD != nil || res.Before != nil && res.Before.BurstUSD != nil
	return w
}

func figuresRow(before *whatif.Figures, after whatif.Figures) WhatIfRow {
	cell := func(f func(whatif.Figures) string) string {
		a := f(after)
		if before == nil || f(*before) == a {
			return a
		}
		return f(*before) + " → " + a
	}
	use := func(f whatif.Figures) string {
		if f.NominalGPUs == 0 && f.Utilization == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", 100*f.Utilization)
	}
	return WhatIfRow{
		QuotaUse:   cell(use),
		WaitP50:    cell(func(f whatif.Figures) string { return whatif.Duration(f.WaitP50S) }),
		WaitP95:    cell(func(f whatif.Figures) string { return whatif.Duration(f.WaitP95S) }),
		Preempted:  cell(func(f whatif.Figures) string { return fmt.Sprint(f.Preemptions) }),
		Unfinished: cell(func(f whatif.Figures) string { return fmt.Sprint(f.Unfinished) }),
		Burst:      cell(burstCell),
	}
}

// burstCell is a replay's burst GPU-hours and their cost ("–": none).
func burstCell(f whatif.Figures) string {
	if f.BurstUSD == nil || f.BurstGPUHours == 0 && f.BurstUSD.IsZero() {
		return "–"
	}
	return fmt.Sprintf("%.1f GPU-h · %s", f.BurstGPUHours, quantity.USD(*f.BurstUSD))
}

// share is part over whole in percent with one decimal, "" when whole is zero.
func share(part, whole quantity.Decimal) string {
	if whole.IsZero() {
		return ""
	}
	return part.MulInt(100).Quo(whole).Fixed(1) + "%"
}

// charts lays out the report's charts from its rows.
func (r *Report) charts() {
	before := Legend{"m-before", "before the change"}
	teams := slices.Clone(r.Teams)
	slices.SortStableFunc(teams, func(a, b CostRow) int { return b.After.Cmp(a.After) })
	var bars []bar
	for _, t := range teams {
		class := "s-team"
		if t.Name == Unallocated {
			class = "s-unallocated"
		}
		b := bar{label: t.Name, value: quantity.USD(t.After), highlight: t.Changed,
			parts: []part{{to: t.After.Float64(), class: class, title: t.Name + ": " + quantity.USD(t.After) + " a month"}}}
		if r.HasBase() {
			b.marker = &part{to: t.Before.Float64(), class: "m-before", title: t.Name + " before: " + quantity.USD(t.Before)}
		}
		bars = append(bars, b)
	}
	legend := []Legend{{"s-team", "monthly cost"}}
	if r.HasBase() {
		legend = append(legend, before)
	}
	r.TeamChart = layout("Monthly cost per team", bars, compactUSD, legend)

	spendLegend := []Legend{{"s-committed", "committed"}, {"s-ondemand", "on demand"}}
	spendBar := func(label string, s Spend) bar {
		return bar{label: label, value: quantity.USD(s.Total()), parts: stack(
			[]float64{s.Committed.Float64(), s.OnDemand.Float64()}, []string{"s-committed", "s-ondemand"},
			[]string{label + " committed: " + quantity.USD(s.Committed), label + " on demand: " + quantity.USD(s.OnDemand)})}
	}
	bars = nil
	for _, p := range r.Pools {
		b := spendBar(p.Pool, p.Spend)
		if r.HasBase() {
			b.marker = &part{to: p.Before.Float64(), class: "m-before", title: p.Pool + " before: " + quantity.USD(p.Before)}
		}
		b.highlight = r.HasBase() && p.Nodes != p.NodesBefore
		bars = append(bars, b)
	}
	legend = spendLegend
	if r.HasBase() {
		legend = append(legend, before)
	}
	r.PoolChart = layout("Monthly cost per pool, committed and on demand", bars, compactUSD, legend)

	bars = nil
	if r.HasSpendBefore {
		bars = append(bars, spendBar("before", r.SpendBefore))
	}
	label := "monthly"
	if r.HasBase() {
		label = "after"
	}
	bars = append(bars, spendBar(label, r.Spend))
	r.SpendChart = layout("Committed and on-demand spend", bars, compactUSD, spendLegend)

	bars = nil
	for _, f := range r.Flavors {
		b := bar{label: f.Flavor, value: fmt.Sprintf("%d / %d GPUs", f.Nominal, f.TargetGPUs), highlight: f.HasBefore && f.Nominal != f.NominalBefore,
			parts: []part{
				{to: float64(f.MaxGPUs), class: "f-max", title: fmt.Sprintf("%s at nodes.max: %d GPUs", f.Flavor, f.MaxGPUs)},
				{to: float64(f.TargetGPUs), inset: 0.18, class: "f-target", title: fmt.Sprintf("%s planned capacity: %d GPUs", f.Flavor, f.TargetGPUs)},
				{to: float64(f.Nominal), inset: 0.34, class: "f-quota", title: fmt.Sprintf("%s nominal quota: %d GPUs", f.Flavor, f.Nominal)},
			}}
		if f.HasBefore {
			b.marker = &part{to: float64(f.NominalBefore), class: "m-before", title: fmt.Sprintf("%s quota before: %d GPUs", f.Flavor, f.NominalBefore)}
		}
		bars = append(bars, b)
	}
	legend = []Legend{{"f-quota", "nominal quota"}, {"f-target", "planned capacity"}, {"f-max", "capacity at nodes.max"}}
	if r.HasBase() {
		legend = append(legend, Legend{"m-before", "quota before the change"})
	}
	r.FlavorChart = layout("Quota and capacity per flavor, GPUs", bars, gpuTick, legend)
}
