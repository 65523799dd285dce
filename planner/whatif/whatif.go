package whatif

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Thresholds under which a longer wait is not reported: a wait must grow by at
// least MinWaitIncreaseS seconds and by MinWaitIncreaseFraction of what it was.
const (
	MinWaitIncreaseS        = 60.0
	MinWaitIncreaseFraction = 0.10
)

// Input is what a what-if compares.
type Input struct {
	// Workload names the replayed demand, e.g. its file.
	Workload string
	Jobs     []workload.Spec
	// Events fail and recover nodes during both replays (optional).
	Events []sim.Event
	// Base is the configuration the change starts from; nil simulates Head alone.
	Base *schema.Config
	Head *schema.Config
	// Options tune the scheduling core; the zero value means scheduler.DefaultOptions.
	Options *scheduler.Options
}

// Result is the comparison of the two replays. Before is nil (and every team's
// Before too) when there was no base.
type Result struct {
	Workload string       `json:"workload"`
	Jobs     int          `json:"jobs"`
	Before   *Figures     `json:"before,omitempty"`
	After    Figures      `json:"after"`
	Teams    []Team       `json:"teams"`
	Longer   []LongerWait `json:"waits_longer"`
}

// Figures are one replay's numbers, for the fleet or one team. Utilization is, for
// a team, the GPU-seconds it used over its nominal quota's GPU-seconds during the
// replay (above 1 means it borrowed), and for the fleet the simulator's
// gpu_utilization. Waits are of the jobs that started.
type Figures struct {
	Jobs        int     `json:"jobs"`
	Unfinished  int     `json:"unfinished"`
	NominalGPUs int64   `json:"nominal_gpus"`
	GPUSeconds  float64 `json:"gpu_seconds"`
	Utilization float64 `json:"utilization"`
	WaitP50S    float64 `json:"wait_p50_s"`
	WaitP95S    float64 `json:"wait_p95_s"`
	Preemptions int     `json:"preemptions"`
	// BurstGPUHours and BurstUSD are the burst nodes' GPU-hours and their
	// on-demand cost that the team's gangs caused (the fleet's: all of
	// them), when a pool declares burst (sim.BurstReport).
	BurstGPUHours float64           `json:"burst_gpu_hours,omitempty"`
	BurstUSD      *quantity.Decimal `json:"burst_usd,omitempty"`
	// BurstPools are, for the fleet, each burst pool's node-hours and cost.
	BurstPools []BurstPool `json:"burst_pools,omitempty"`
}

// BurstPool is what one pool's burst nodes held and cost in a replay.
type BurstPool struct {
	Pool      string           `json:"pool"`
	NodeHours float64          `json:"node_hours"`
	USD       quantity.Decimal `json:"usd"`
}

// Team is one team's figures before and after. QuotaChanged is set for the teams
// whose nominal quota the change edits.
type Team struct {
	Team         string   `json:"team"`
	QuotaChanged bool     `json:"quota_changed"`
	Before       *Figures `json:"before,omitempty"`
	After        Figures  `json:"after"`
}

// LongerWait is a team whose queue wait grows: Metric is "wait_p50_s" or
// "wait_p95_s", or "unfinished" when fewer of its jobs complete.
type LongerWait struct {
	Team   string  `json:"team"`
	Metric string  `json:"metric"`
	Before float64 `json:"before"`
	After  float64 `json:"after"`
}

// Run replays in.Jobs against both configurations and compares them.
func Run(in Input) (*Result, error) {
	if in.Head == nil {
		return nil, fmt.Errorf("what-if: no configuration to simulate")
	}
	opts := scheduler.DefaultOptions()
	if in.Options != nil {
		opts = *in.Options
	}
	after, err := replay(in.Head, in, opts)
	if err != nil {
		return nil, fmt.Errorf("simulating the proposed configuration: %w", err)
	}
	res := &Result{Workload: in.Workload, Jobs: len(in.Jobs), After: after.fleet}
	var before *side
	if in.Base != nil {
		b, err := replay(in.Base, in, opts)
		if err != nil {
			return nil, fmt.Errorf("simulating the base configuration: %w", err)
		}
		before = &b
		res.Before = &b.fleet
	}
	changed := quotaChanges(in.Base, in.Head)
	seen := map[string]bool{}
	for n := range after.teams {
		seen[n] = true
	}
	if before != nil {
		for n := range before.teams {
			seen[n] = true
		}
	}
	names := slices.Sorted(maps.Keys(seen))
	for _, n := range names {
		t := Team{Team: n, QuotaChanged: changed[n], After: after.teams[n]}
		if before != nil {
			b := before.teams[n]
			t.Before = &b
			if !t.QuotaChanged {
				res.Longer = append(res.Longer, longer(n, b, t.After)...)
			}
		}
		res.Teams = append(res.Teams, t)
	}
	if res.Longer == nil {
		res.Longer = []LongerWait{}
	}
	return res, nil
}

// longer lists how team n waits longer from b to a.
func longer(n string, b, a Figures) []LongerWait {
	var out []LongerWait
	for _, m := range []struct {
		name          string
		before, after float64
	}{{"wait_p50_s", b.WaitP50S, a.WaitP50S}, {"wait_p95_s", b.WaitP95S, a.WaitP95S}} {
		if grew := m.after - m.before; grew >= MinWaitIncreaseS && grew >= MinWaitIncreaseFraction*m.before {
			out = append(out, LongerWait{Team: n, Metric: m.name, Before: m.before, After: m.after})
		}
	}
	if a.Unfinished > b.Unfinished {
		out = append(out, LongerWait{Team: n, Metric: "unfinished", Before: float64(b.Unfinished), After: float64(a.Unfinished)})
	}
	return out
}

// side is one replay's figures.
type side struct {
	fleet Figures
	teams map[string]Figures
}

func replay(cfg *schema.Config, in Input, opts scheduler.Options) (side, error) {
	si := sim.FromRepository(cfg, fleet.Layout(cfg, planner.Build(cfg).NodesTargets()))
	q := si.Quota
	jobs := slices.Clone(in.Jobs)
	for i := range jobs {
		jobs[i].Flavors = slices.Clone(jobs[i].Flavors)
	}
	sim.AssignToConfig(jobs, q)
	si.Jobs, si.Events = jobs, in.Events
	core, err := sim.NewCore(q, si.Nodes, opts)
	if err != nil {
		return side{}, err
	}
	rep, err := sim.Run(core, si, sim.Options{})
	if err != nil {
		return side{}, err
	}
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 {
		return side{}, fmt.Errorf("invariants broken: %d gang, %d quota, %d topology violations", s.GangViolations, s.QuotaViolations, s.TopologyViolations)
	}
	return summarize(rep, q), nil
}

// summarize derives the fleet's and each team's figures from a sim report.
func summarize(rep *sim.Report, q scheduler.Config) side {
	s := rep.Summary
	out := side{
		fleet: Figures{Jobs: s.Jobs, Unfinished: s.Unschedulable, Utilization: s.GPUUtilization, WaitP50S: s.WaitP50S, WaitP95S: s.WaitP95S, Preemptions: s.Preemptions},
		teams: map[string]Figures{},
	}
	for _, t := range q.Teams {
		var n int64
		for _, fq := range t.Quota {
			n += fq.Nominal
		}
		out.teams[string(t.Name)] = Figures{NominalGPUs: n}
		out.fleet.NominalGPUs += n
	}
	waits := map[string][]float64{}
	for _, j := range rep.Jobs {
		f := out.teams[j.Team]
		f.Jobs++
		f.Preemptions += j.Preempted
		if j.End == nil {
			f.Unfinished++
		}
		if j.WaitS != nil {
			waits[j.Team] = append(waits[j.Team], *j.WaitS)
		}
		out.teams[j.Team] = f
	}
	for _, t := range rep.Teams {
		f := out.teams[t.Team]
		f.GPUSeconds = t.GPUSeconds
		out.fleet.GPUSeconds += t.GPUSeconds
		if f.NominalGPUs > 0 && s.MakespanS > 0 {
			f.Utilization = round(t.GPUSeconds/(float64(f.NominalGPUs)*s.MakespanS), 4)
		}
		out.teams[t.Team] = f
	}
	for n, w := range waits {
		f := out.teams[n]
		f.WaitP50S, f.WaitP95S = sim.Percentile(w, 0.50), sim.Percentile(w, 0.95)
		out.teams[n] = f
	}
	out.fleet.GPUSeconds = round(out.fleet.GPUSeconds, 3)
	if b := rep.Burst; b != nil {
		for _, t := range b.Teams {
			if f, ok := out.teams[t.Team]; ok { // "": nobody's, the fleet's only
				f.BurstGPUHours, f.BurstUSD = t.GPUHours, &t.CostUSD
				out.teams[t.Team] = f
			}
		}
		for _, p := range b.Pools {
			out.fleet.BurstGPUHours += p.GPUHours
			out.fleet.BurstPools = append(out.fleet.BurstPools, BurstPool{Pool: p.Pool, NodeHours: p.NodeHours, USD: p.CostUSD})
		}
		out.fleet.BurstGPUHours = round(out.fleet.BurstGPUHours, 3)
		out.fleet.BurstUSD = &b.CostUSD
	}
	return out
}

// quotaChanges names the teams whose nominal quota differs between base and head.
func quotaChanges(base, head *schema.Config) map[string]bool {
	out := map[string]bool{}
	if base == nil {
		return out
	}
	nominal := func(c *schema.Config, n schema.TeamName) map[schema.Flavor]int64 {
		m := map[schema.Flavor]int64{}
		if t := c.Teams[n]; t != nil {
			for f, q := range t.Quota {
				if q.Nominal != 0 {
					m[f] = q.Nominal
				}
			}
		}
		return m
	}
	for _, c := range []*schema.Config{base, head} {
		for n := range c.Teams {
			b, h := nominal(base, n), nominal(head, n)
			if len(b) != len(h) {
				out[string(n)] = true
				continue
			}
			for f, v := range b {
				if h[f] != v {
					out[string(n)] = true
				}
			}
		}
	}
	return out
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
