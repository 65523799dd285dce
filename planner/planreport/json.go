package planreport

import (
	"encoding/json"
	"io"
	"maps"
	"slices"

	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/planner/whatif"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// money is a Decimal rounded to the cent in JSON.
type money quantity.Decimal

func (m money) MarshalJSON() ([]byte, error) {
	return []byte(quantity.Decimal(m).Round(2).String()), nil
}

type jsonPlan struct {
	Pools                 []jsonPool       `json:"pools"`
	Teams                 []jsonTeam       `json:"teams"`
	CostCenters           []jsonCostCenter `json:"cost_centers"`
	Flavors               []jsonFlavor     `json:"flavors"`
	TotalMonthlyUSD       money            `json:"total_monthly_usd"`
	UnallocatedMonthlyUSD money            `json:"unallocated_monthly_usd"`
	CeilingMonthlyUSD     money            `json:"ceiling_monthly_usd"`
	Findings              []jsonFinding    `json:"findings"`
	Diff                  *jsonDiff        `json:"diff,omitempty"`
	WhatIf                *whatif.Result   `json:"whatif,omitempty"`
	Terraform             *TerraformPlan   `json:"terraform,omitempty"`
	// Slurm is each Slurm cluster's accounting changes against the base.
	Slurm []slurm.ClusterChanges `json:"slurm,omitempty"`
}

type jsonPool struct {
	Pool           string `json:"pool"`
	Cluster        string `json:"cluster"`
	Flavor         string `json:"flavor"`
	GPUsPerNode    int64  `json:"gpus_per_node"`
	NodesTarget    int64  `json:"nodes_target"`
	GPUsTarget     int64  `json:"gpus_target"`
	MonthlyUSD     money  `json:"monthly_usd"`
	AssignedGPUs   int64  `json:"assigned_gpus"`
	CommittedNodes int64  `json:"committed_nodes"`
	OnDemandNodes  int64  `json:"on_demand_nodes"`
	AtMax          bool   `json:"at_max"`
	// ReplacementNodes (with --observed) are part of nodes_target.
	ReplacementNodes int64 `json:"replacement_nodes,omitempty"`
	// Envelope: how far repair and burst may take the pool, and its cost ceiling.
	Envelope jsonEnvelope `json:"envelope"`
}

// jsonEnvelope is a pool's planner.Envelope.
type jsonEnvelope struct {
	FixedNodes        int64 `json:"fixed_nodes"`
	ReplacementNodes  int64 `json:"replacement_nodes"`
	BurstNodes        int64 `json:"burst_nodes"`
	MostNodes         int64 `json:"most_nodes"`
	CeilingMonthlyUSD money `json:"ceiling_monthly_usd"`
}

type jsonTeam struct {
	Team       string           `json:"team"`
	CostCenter string           `json:"cost_center"`
	Quota      map[string]int64 `json:"quota"`
	MonthlyUSD money            `json:"monthly_usd"`
}

type jsonCostCenter struct {
	CostCenter string   `json:"cost_center"`
	Teams      []string `json:"teams"`
	MonthlyUSD money    `json:"monthly_usd"`
}

type jsonFlavor struct {
	Flavor       string `json:"flavor"`
	NominalGPUs  int64  `json:"nominal_gpus"`
	TargetGPUs   int64  `json:"target_gpus"`
	MaxGPUs      int64  `json:"max_gpus"`
	UnplacedGPUs int64  `json:"unplaced_gpus"`
}

type jsonFinding struct {
	Severity string `json:"severity"`
	Rule     string `json:"rule"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	Message  string `json:"message"`
	// Approximation names the tier, team or pool whose rule the scheduler
	// only approximates; Accepted: it says approximate: true.
	Approximation string `json:"approximation,omitempty"`
	Accepted      bool   `json:"accepted,omitempty"`
}

type jsonDiff struct {
	Teams            []jsonQuotaChange `json:"teams"`
	Pools            []jsonPoolChange  `json:"pools"`
	TeamCosts        []jsonCostChange  `json:"team_costs"`
	CostCenterCosts  []jsonCostChange  `json:"cost_center_costs"`
	MonthlyUSDBefore money             `json:"monthly_usd_before"`
	MonthlyUSDAfter  money             `json:"monthly_usd_after"`
	MonthlyUSDDelta  money             `json:"monthly_usd_delta"`
	Approvals        []jsonApproval    `json:"approvals"`
	// The plans' ceiling_monthly_usd, before and after.
	CeilingMonthlyUSDBefore money `json:"ceiling_monthly_usd_before"`
	CeilingMonthlyUSDAfter  money `json:"ceiling_monthly_usd_after"`
	CeilingMonthlyUSDDelta  money `json:"ceiling_monthly_usd_delta"`
}

type jsonQuotaChange struct {
	Team          string `json:"team"`
	Flavor        string `json:"flavor"`
	NominalBefore int64  `json:"nominal_before"`
	NominalAfter  int64  `json:"nominal_after"`
}

type jsonPoolChange struct {
	Pool             string `json:"pool"`
	NodesBefore      int64  `json:"nodes_before"`
	NodesAfter       int64  `json:"nodes_after"`
	MonthlyUSDBefore money  `json:"monthly_usd_before"`
	MonthlyUSDAfter  money  `json:"monthly_usd_after"`
	// The pool's envelope ceiling, before and after.
	CeilingMonthlyUSDBefore money `json:"ceiling_monthly_usd_before"`
	CeilingMonthlyUSDAfter  money `json:"ceiling_monthly_usd_after"`
}

type jsonCostChange struct {
	Name   string `json:"name"`
	Before money  `json:"monthly_usd_before"`
	After  money  `json:"monthly_usd_after"`
	Delta  money  `json:"monthly_usd_delta"`
}

type jsonApproval struct {
	Who  string `json:"who"`
	Why  string `json:"why"`
	Role string `json:"role"`
}

// Findings converts findings to their JSON form.
func jsonFindings(fs schema.Findings) []jsonFinding {
	out := make([]jsonFinding, 0, len(fs))
	for _, f := range fs {
		out = append(out, jsonFinding{Severity: string(f.Severity), Rule: f.Rule, File: f.Pos.File, Line: f.Pos.Line, Col: f.Pos.Col, Message: f.Message,
			Approximation: f.Approximation, Accepted: f.Accepted})
	}
	return out
}

// JSON writes the plan as docs/contracts.md's `allot plan -o json` contract (plus
// compatible extensions). A configuration that did not load has empty lists and
// its findings.
func JSON(w io.Writer, in Input) error {
	out := jsonPlan{Pools: []jsonPool{}, Teams: []jsonTeam{}, CostCenters: []jsonCostCenter{}, Flavors: []jsonFlavor{}, Findings: jsonFindings(in.Findings)}
	if p := in.Plan; p != nil {
		for _, pp := range p.Pools {
			out.Pools = append(out.Pools, jsonPool{Pool: string(pp.Pool), Cluster: string(pp.Cluster), Flavor: string(pp.Flavor),
				GPUsPerNode: pp.GPUsPerNode, NodesTarget: pp.NodesTarget, GPUsTarget: pp.GPUsTarget, MonthlyUSD: money(pp.MonthlyUSD),
				AssignedGPUs: pp.AssignedGPUs, CommittedNodes: pp.CommittedNodes, OnDemandNodes: pp.OnDemandNodes, AtMax: pp.AtMax, ReplacementNodes: pp.ReplacementNodes,
				Envelope: jsonEnvelope{FixedNodes: pp.Envelope.FixedNodes, ReplacementNodes: pp.Envelope.ReplacementNodes, BurstNodes: pp.Envelope.BurstNodes,
					MostNodes: pp.Envelope.MostNodes, CeilingMonthlyUSD: money(pp.Envelope.CeilingMonthlyUSD)}})
		}
		for _, t := range p.Teams {
			q := map[string]int64{}
			for _, f := range slices.Sorted(maps.Keys(t.Quota)) {
				q[string(f)] = t.Quota[f]
			}
			out.Teams = append(out.Teams, jsonTeam{Team: string(t.Team), CostCenter: t.CostCenter, Quota: q, MonthlyUSD: money(t.MonthlyUSD)})
		}
		for _, c := range p.CostCenters {
			teams := make([]string, 0, len(c.Teams))
			for _, t := range c.Teams {
				teams = append(teams, string(t))
			}
			out.CostCenters = append(out.CostCenters, jsonCostCenter{CostCenter: c.CostCenter, Teams: teams, MonthlyUSD: money(c.MonthlyUSD)})
		}
		for _, f := range p.Flavors {
			out.Flavors = append(out.Flavors, jsonFlavor{Flavor: string(f.Flavor), NominalGPUs: f.NominalGPUs, TargetGPUs: f.TargetGPUs, MaxGPUs: f.MaxGPUs, UnplacedGPUs: f.UnplacedGPUs})
		}
		out.TotalMonthlyUSD, out.UnallocatedMonthlyUSD, out.CeilingMonthlyUSD = money(p.TotalMonthlyUSD), money(p.UnallocatedMonthlyUSD), money(p.CeilingMonthlyUSD)
	}
	if d := in.Diff; d != nil {
		jd := &jsonDiff{Teams: []jsonQuotaChange{}, Pools: []jsonPoolChange{}, TeamCosts: []jsonCostChange{}, CostCenterCosts: []jsonCostChange{},
			Approvals: []jsonApproval{}, MonthlyUSDBefore: money(d.Before), MonthlyUSDAfter: money(d.After), MonthlyUSDDelta: money(d.Delta),
			CeilingMonthlyUSDBefore: money(d.CeilingBefore), CeilingMonthlyUSDAfter: money(d.CeilingAfter), CeilingMonthlyUSDDelta: money(d.CeilingDelta)}
		for _, q := range d.Quotas {
			jd.Teams = append(jd.Teams, jsonQuotaChange{Team: string(q.Team), Flavor: string(q.Flavor), NominalBefore: q.NominalBefore, NominalAfter: q.NominalAfter})
		}
		for _, p := range d.Pools {
			jd.Pools = append(jd.Pools, jsonPoolChange{Pool: string(p.Pool), NodesBefore: p.NodesBefore, NodesAfter: p.NodesAfter,
				MonthlyUSDBefore: money(p.MonthlyUSDBefore), MonthlyUSDAfter: money(p.MonthlyUSDAfter),
				CeilingMonthlyUSDBefore: money(p.CeilingMonthlyUSDBefore), CeilingMonthlyUSDAfter: money(p.CeilingMonthlyUSDAfter)})
		}
		for _, c := range d.Teams {
			jd.TeamCosts = append(jd.TeamCosts, jsonCostChange{c.Name, money(c.Before), money(c.After), money(c.Delta)})
		}
		for _, c := range d.CostCenters {
			jd.CostCenterCosts = append(jd.CostCenterCosts, jsonCostChange{c.Name, money(c.Before), money(c.After), money(c.Delta)})
		}
		for _, a := range d.Approvals {
			jd.Approvals = append(jd.Approvals, jsonApproval{a.Who, a.Why, string(a.Role)})
		}
		out.Diff = jd
	}
	out.WhatIf, out.Terraform, out.Slurm = in.WhatIf, in.Terraform, in.Slurm
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
