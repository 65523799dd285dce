package recommend

import (
	"errors"
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
)

// ErrInvariant is returned when a replay breaks an invariant of the scheduling
// core (a partial gang, a quota or a required topology level): a bug, not bad input.
var ErrInvariant = errors.New("invariants broken")

// pair is a team's quota of one flavor: what the search sizes.
type pair struct {
	team   schema.TeamName
	flavor schema.Flavor
}

// jobInfo is what the search knows of a job before any replay: its pair when
// it names one flavor, else the flavors it might run on.
type jobInfo struct {
	team  schema.TeamName
	tier  string
	named schema.Flavor   // the one flavor the job asks for, or ""
	anyOf []schema.Flavor // the flavors a job that never ran is counted against
	// anyFlavor: the job names no flavor, so it might have run on any its team
	// has a quota of in the configuration replayed (which a search may add).
	anyFlavor bool
	gpus      int64
	submit    float64
	running   float64 // duration
	// run numbers the job's team and tier among the world's (world.runs).
	run int
}

// world is the fixed part of every replay: the configuration, the jobs
// (assigned to its teams and tiers once) and the pairs searched.
type world struct {
	cfg   *schema.Config
	jobs  []workload.Spec
	info  []jobInfo
	index map[string]int // job ID -> position in jobs
	// runs counts the teams and tiers of the jobs (jobInfo.run).
	runs   int
	events []sim.Event
	opts   scheduler.Options
	pairs  []pair
	cons   map[pair][]constraint
	// gridS > 0: the jobs and events are on a grid of gridS seconds (the coarse search's world).
	gridS float64
	// borrowOnly tiers: their jobs always run on borrowed capacity, so no quota
	// of their team serves them; only a target of their own tier judges them.
	borrowOnly map[string]bool
}

// vector is a nominal quota in GPUs per searched pair (in w.pairs order).
type vector []int64

func (v vector) key() string { return fmt.Sprint([]int64(v)) }

// outcome is what one replay says about each pair, the fleet it ran and what
// the committed-node analysis needs of it.
type outcome struct {
	plan *planner.Plan
	// waits per pair: of all its jobs (+Inf for one that never started), and per tier.
	p95  map[pair]float64
	pass map[pair]bool
	// margin per pair: the least, over its targets, of (target - p95) / target.
	margin    map[pair]float64
	flavorP95 map[schema.Flavor]float64
	// per flavor, of the jobs its p95 is over: how many, and their preemptions
	flavorJobs, flavorPreempted map[schema.Flavor]int
	unfinished                  map[pair]int
	// use is what the committed-node analysis reads of the answer's replay:
	// measured on exact replays only (a grid's outcome never is the answer's).
	use *usage
	// burst is what the burst pools held and cost (nil: none declares it).
	burst *sim.BurstReport
	// spanS is the replay's makespan: what a burst cost is spread over.
	spanS float64
}

// config returns w.cfg with the pairs' nominal quotas set to v.
func (w *world) config(v vector) *schema.Config {
	c := *w.cfg
	c.Teams = maps.Clone(w.cfg.Teams)
	cloned := map[schema.TeamName]bool{}
	for i, p := range w.pairs {
		t := c.Teams[p.team]
		if !cloned[p.team] {
			tc := *t
			tc.Quota = maps.Clone(t.Quota)
			t, cloned[p.team] = &tc, true
			c.Teams[p.team] = t
		}
		q, had := t.Quota[p.flavor]
		if !had && v[i] == 0 {
			// No quota entry means the team may not use the flavor at all; an entry
			// of 0 would let it borrow. Keep the repository's meaning.
			continue
		}
		q.Nominal = v[i]
		t.Quota[p.flavor] = q
	}
	return &c
}

// replay runs the jobs against the configuration with quotas v.
func (w *world) replay(v vector) (*outcome, error) { return w.replayFewer(v, "", 0) }

// replayFewer is replay with pool planned fewer nodes than its plan gives
// (see burstOption): only the fleet changes, the plan reported does not.
func (w *world) replayFewer(v vector, pool schema.PoolName, fewer int64) (*outcome, error) {
	cfg := w.config(v)
	plan := planner.Build(cfg)
	targets := plan.NodesTargets()
	if fewer > 0 {
		targets[pool] -= fewer
	}
	layout := fleet.Layout(cfg, targets)
	in := sim.FromRepository(cfg, layout) // as allot sim replays the changed repository
	in.Jobs, in.Events = w.jobs, w.events
	core, err := sim.NewCore(in.Quota, in.Nodes, w.opts)
	if err != nil {
		return nil, err
	}
	rep, err := sim.Run(core, in, sim.Options{})
	if err != nil {
		return nil, err
	}
	if s := rep.Summary; s.GangViolations+s.QuotaViolations+s.TopologyViolations > 0 {
		return nil, fmt.Errorf("%w: %d gang, %d quota, %d topology violations", ErrInvariant, s.GangViolations, s.QuotaViolations, s.TopologyViolations)
	}
	return w.judge(cfg, plan, layout, rep), nil
}

// judge derives the pairs' waits and verdicts from a replay of cfg.
func (w *world) judge(cfg *schema.Config, plan *planner.Plan, layout []fleet.Node, rep *sim.Report) *outcome {
	flavorOf := make(map[string]schema.Flavor, len(layout))
	for _, n := range layout {
		flavorOf[n.Name] = n.Flavor
	}
	// A burst node is in no layout: its pool's burst added it, named as the
	// pool's nodes are (fleet.NodeName).
	flavorAt := func(node string) schema.Flavor {
		if f, ok := flavorOf[node]; ok {
			return f
		}
		var f schema.Flavor
		for _, name := range slices.Sorted(maps.Keys(cfg.Pools)) {
			if p := cfg.Pools[name]; p.Burst != nil {
				if _, ok := fleet.NodeIndex(name, node); ok {
					f = p.Flavor
					break
				}
			}
		}
		flavorOf[node] = f
		return f
	}
	type key struct {
		p    pair
		tier string
	}
	waits := map[key]*[]float64{}
	list := func(k key) *[]float64 {
		l := waits[k]
		if l == nil {
			l = new([]float64)
			waits[k] = l
		}
		return l
	}
	byFlavor := map[schema.Flavor][]float64{}
	preempted := map[schema.Flavor]int{}
	teamFlavors := map[schema.TeamName][]schema.Flavor{}
	unfinished := map[pair]int{}
	// A team and tier's jobs mostly run on one flavor: each keeps the lists
	// its last wait went to, found again without hashing three names.
	type lists struct {
		flavor    schema.Flavor
		all, tier *[]float64
	}
	last := make([]lists, w.runs)
	add := func(ji *jobInfo, f schema.Flavor, s float64) {
		l := &last[ji.run]
		if l.tier == nil || l.flavor != f {
			p := pair{ji.team, f}
			*l = lists{flavor: f, tier: list(key{p, ji.tier})}
			if !w.borrowOnly[ji.tier] {
				l.all = list(key{p, ""})
			}
		}
		if l.all != nil {
			*l.all = append(*l.all, s)
		}
		*l.tier = append(*l.tier, s)
	}
	for k, j := range rep.Jobs {
		// The report lists the jobs in submission order, as w.jobs usually is.
		i := k
		if i >= len(w.jobs) || w.jobs[i].ID != j.ID {
			var ok bool
			if i, ok = w.index[j.ID]; !ok {
				continue
			}
		}
		ji := &w.info[i]
		if j.WaitS != nil && len(j.Nodes) > 0 {
			f := ji.named
			if f == "" {
				f = flavorAt(j.Nodes[0])
			}
			add(ji, f, *j.WaitS)
			if !w.borrowOnly[ji.tier] {
				byFlavor[f] = append(byFlavor[f], *j.WaitS)
				preempted[f] += j.Preempted
			}
			continue
		}
		might := ji.anyOf
		if ji.anyFlavor {
			might = mightUse(cfg, ji.team, teamFlavors)
		}
		for _, f := range might {
			add(ji, f, math.Inf(1))
			unfinished[pair{ji.team, f}]++
			if !w.borrowOnly[ji.tier] {
				byFlavor[f] = append(byFlavor[f], math.Inf(1))
			}
		}
	}
	get := func(k key) []float64 {
		if l := waits[k]; l != nil {
			return *l
		}
		return nil
	}
	out := &outcome{plan: plan, p95: map[pair]float64{}, pass: map[pair]bool{}, margin: map[pair]float64{}, flavorP95: map[schema.Flavor]float64{},
		flavorJobs: map[schema.Flavor]int{}, flavorPreempted: preempted, unfinished: unfinished}
	for _, p := range w.pairs {
		out.p95[p] = p95(get(key{p, ""}))
		ok, margin := true, math.Inf(1)
		for _, c := range w.cons[p] {
			v := p95(get(key{p, c.tier}))
			if v > c.waitS {
				ok = false
			}
			if c.waitS > 0 {
				margin = min(margin, (c.waitS-v)/c.waitS)
			}
		}
		out.pass[p], out.margin[p] = ok, margin
	}
	for f, ws := range byFlavor {
		out.flavorP95[f], out.flavorJobs[f] = p95(ws), len(ws)
	}
	if w.gridS == 0 {
		out.use = measure(layout, rep)
	}
	out.burst, out.spanS = rep.Burst, rep.Summary.MakespanS
	return out
}

// mightUse is the flavors a job of team that names none might have run on
// in cfg: those the team has a quota of that some pool carries, sorted
// (remembered in memo).
func mightUse(cfg *schema.Config, team schema.TeamName, memo map[schema.TeamName][]schema.Flavor) []schema.Flavor {
	fs, ok := memo[team]
	if !ok {
		for f := range cfg.Teams[team].Quota {
			if len(cfg.PoolsOf(f)) > 0 {
				fs = append(fs, f)
			}
		}
		slices.Sort(fs)
		memo[team] = fs
	}
	return fs
}

// p95 is the nearest-rank 95th percentile (0 for no jobs); +Inf when more than
// one job in twenty never started.
func p95(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	i := int(math.Ceil(0.95*float64(len(xs)))) - 1
	v := xs[max(0, min(i, len(xs)-1))]
	if math.IsInf(v, 1) {
		return v
	}
	return math.Round(v*1000) / 1000
}
