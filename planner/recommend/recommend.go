package recommend

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/sim"
	"github.com/allot-dev/allot/scheduler/workload"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// Input is what a recommendation is made from.
type Input struct {
	// Workload names the replayed demand, e.g. its file.
	Workload string
	Config   *schema.Config
	Jobs     []workload.Spec
	// Events fail and recover nodes during every replay (optional).
	Events []sim.Event
	// Targets: at most one without a name (the default), at most one per team or tier.
	Targets []Target
	// Options tune the scheduling core; nil means scheduler.DefaultOptions.
	Options *scheduler.Options
	// Parallel is how many replays run at once (default 2).
	Parallel int
	// Exact confirms, for every team and flavor whose quota the target bounds,
	// that one node less misses the target with every other quota as
	// recommended: one replay per team and flavor (in parallel). Without it the
	// check is joint: one node less for all of them in one replay.
	Exact bool
	// CurveSteps is the number of curve points on each side of the
	// recommendation (default 3; negative: no curve).
	CurveSteps int
	// MaxReplays bounds the search (default 200).
	MaxReplays int
	// Progress, if set, is called after every replay with the replays done and
	// an estimate of the total.
	Progress func(done, estimate int)
}

// Result is the recommendation; its JSON is the `allot recommend -o json`
// contract of DESIGN.md.
type Result struct {
	Workload string `json:"workload"`
	Jobs     int    `json:"jobs"`
	// Target is the default target (wait_p95_s null when only teams or tiers have one).
	Target struct {
		WaitP95S *float64 `json:"wait_p95_s"`
	} `json:"target"`
	Targets          []Target         `json:"targets"`
	Teams            []TeamResult     `json:"teams"`
	Pools            []PoolChange     `json:"pools"`
	MonthlyUSDBefore quantity.Decimal `json:"monthly_usd_before"`
	MonthlyUSDAfter  quantity.Decimal `json:"monthly_usd_after"`
	Committed        []Commitment     `json:"committed"`
	Curve            []CurvePoint     `json:"curve"`
	// Usage is the GPU-hours each flavor used, hour by hour, in the replay of the
	// recommended fleet.
	Usage []FlavorUsage `json:"usage"`
	// Replays is the number of simulations the search ran; Converged is false
	// when it stopped at MaxReplays.
	Replays   int  `json:"replays"`
	Converged bool `json:"converged"`
	Exact     bool `json:"exact"`
}

// The bounds of a team's recommended quota.
const (
	// BoundTarget: the least quota in whole nodes that meets the target.
	BoundTarget = "target"
	// BoundNone: the target is met with no quota of the flavor (the team
	// borrows, or has no such jobs).
	BoundNone = "none"
	// BoundUnreachable: the target is missed even at the most the flavor's
	// pools can carry; the quota is that most.
	BoundUnreachable = "unreachable"
)

// TeamResult is one team's quota of one flavor, before and as recommended. A
// wait is null when more than one job in twenty never started.
type TeamResult struct {
	Team             schema.TeamName `json:"team"`
	Flavor           schema.Flavor   `json:"flavor"`
	NominalBefore    int64           `json:"nominal_before"`
	NominalAfter     int64           `json:"nominal_after"`
	WaitP95SBefore   *float64        `json:"wait_p95_s_before"`
	WaitP95SAfter    *float64        `json:"wait_p95_s_after"`
	TargetWaitP95S   float64         `json:"target_wait_p95_s"`
	Bound            string          `json:"bound"`
	UnfinishedBefore int             `json:"unfinished_before"`
	UnfinishedAfter  int             `json:"unfinished_after"`
}

// PoolChange is a pool's size and cost today and for the recommended quotas.
type PoolChange struct {
	Pool             schema.PoolName  `json:"pool"`
	Flavor           schema.Flavor    `json:"flavor"`
	NodesBefore      int64            `json:"nodes_before"`
	NodesAfter       int64            `json:"nodes_after"`
	MonthlyUSDBefore quantity.Decimal `json:"monthly_usd_before"`
	MonthlyUSDAfter  quantity.Decimal `json:"monthly_usd_after"`
}

// CurvePoint is one size of a flavor around the recommendation: the searched
// teams' recommended quotas of the flavor scaled together, the fleet the
// planner sizes for them, its monthly cost (the flavor's pools) and the p95
// wait of the flavor's jobs (null: more than one in twenty never started).
type CurvePoint struct {
	Flavor      schema.Flavor    `json:"flavor"`
	NominalGPUs int64            `json:"nominal_gpus"`
	GPUs        int64            `json:"gpus"`
	MonthlyUSD  quantity.Decimal `json:"monthly_usd"`
	WaitP95S    *float64         `json:"wait_p95_s"`
	Recommended bool             `json:"recommended,omitempty"`
}

// FlavorUsage is a flavor's GPU-hours per hour of the replay.
type FlavorUsage struct {
	Flavor   schema.Flavor `json:"flavor"`
	GPUHours []float64     `json:"gpu_hours"`
}

// Run searches the recommendation. See the package comment and docs/recommend.md.
func Run(in Input) (*Result, error) {
	w, err := newWorld(in)
	if err != nil {
		return nil, err
	}
	s := &searcher{w: w, memo: map[string]*outcome{}, parallel: max(1, in.Parallel), progress: in.Progress, limit: in.MaxReplays}
	if in.Parallel == 0 {
		s.parallel = 2
	}
	if s.limit <= 0 {
		s.limit = 200
	}
	steps := in.CurveSteps
	if steps == 0 {
		steps = 3
	}
	q, before, converged, err := s.search(in.Exact)
	if err != nil {
		return nil, err
	}
	after, err := s.eval(q)
	if err != nil {
		return nil, err
	}
	res := &Result{Workload: in.Workload, Jobs: len(in.Jobs), Targets: slices.Clone(in.Targets), Converged: converged, Exact: in.Exact}
	for _, t := range in.Targets {
		if t.Name == "" {
			v := t.WaitP95S
			res.Target.WaitP95S = &v
		}
	}
	s.fill(res, q, before, after)
	if steps > 0 {
		if res.Curve, err = s.curve(q, steps); err != nil {
			return nil, err
		}
	}
	res.Replays = s.replays
	return res, nil
}

// newWorld checks the input and sets up what every replay shares.
func newWorld(in Input) (*world, error) {
	cfg := in.Config
	if cfg == nil {
		return nil, errors.New("recommend: no configuration")
	}
	if len(in.Targets) == 0 {
		return nil, errors.New("recommend: no target (e.g. wait_p95=15m)")
	}
	w := &world{cfg: cfg, events: in.Events, opts: scheduler.DefaultOptions(), cons: map[pair][]constraint{}, index: map[string]int{}}
	if in.Options != nil {
		w.opts = *in.Options
	}
	var def *float64
	teamT, tierT := map[string]float64{}, map[string]float64{}
	seen := map[string]bool{}
	for _, t := range in.Targets {
		if seen[t.Name] {
			if t.Name == "" {
				return nil, fmt.Errorf("target %s: a second default target", t)
			}
			return nil, fmt.Errorf("target %s: a second target for %s", t, t.Name)
		}
		seen[t.Name] = true
		_, isTeam := cfg.Teams[schema.TeamName(t.Name)]
		_, isTier := cfg.Tiers[schema.TierName(t.Name)]
		switch {
		case t.Name == "":
			v := t.WaitP95S
			def = &v
		case isTeam && isTier:
			return nil, fmt.Errorf("target %s: %s names both a team and a tier", t, t.Name)
		case isTeam:
			teamT[t.Name] = t.WaitP95S
		case isTier:
			tierT[t.Name] = t.WaitP95S
		default:
			return nil, fmt.Errorf("target %s: no team or tier is named %s", t, t.Name)
		}
	}
	w.borrowOnly = map[string]bool{}
	for n, t := range cfg.Tiers {
		w.borrowOnly[string(n)] = t.BorrowOnly
	}
	w.jobs = slices.Clone(in.Jobs)
	for i := range w.jobs {
		w.jobs[i].Flavors = slices.Clone(w.jobs[i].Flavors)
	}
	sim.AssignToConfig(w.jobs, sim.QuotaFromSchema(cfg))
	pools := map[schema.Flavor]bool{}
	for _, p := range cfg.Pools {
		pools[p.Flavor] = true
	}
	pairs := map[pair]bool{}
	for _, n := range cfg.TeamNames() {
		for f := range cfg.Teams[n].Quota {
			if pools[f] {
				pairs[pair{n, f}] = true
			}
		}
	}
	w.info = make([]jobInfo, len(w.jobs))
	for i, j := range w.jobs {
		if _, dup := w.index[j.ID]; dup {
			return nil, fmt.Errorf("job %s listed twice", j.ID)
		}
		w.index[j.ID] = i
		team := schema.TeamName(j.Team)
		if cfg.Teams[team] == nil {
			return nil, fmt.Errorf("job %s: team %q is not declared", j.ID, j.Team)
		}
		ji := jobInfo{team: team, tier: j.Tier, gpus: j.GPUs(), submit: j.Submit, running: j.Duration}
		for _, f := range j.Flavors {
			if pools[schema.Flavor(f)] {
				ji.anyOf = append(ji.anyOf, schema.Flavor(f))
			}
		}
		if len(j.Flavors) == 0 {
			for f := range cfg.Teams[team].Quota {
				if pools[f] {
					ji.anyOf = append(ji.anyOf, f)
				}
			}
			slices.Sort(ji.anyOf)
		}
		if len(j.Flavors) == 1 && len(ji.anyOf) == 1 {
			ji.named = ji.anyOf[0]
			pairs[pair{team, ji.named}] = true
		}
		w.info[i] = ji
	}
	for p := range pairs {
		var cs []constraint
		if v, ok := teamT[string(p.team)]; ok {
			cs = append(cs, constraint{waitS: v})
		} else if def != nil {
			cs = append(cs, constraint{waitS: *def})
		}
		for _, tier := range slices.Sorted(maps.Keys(tierT)) {
			cs = append(cs, constraint{tier: tier, waitS: tierT[tier]})
		}
		if len(cs) > 0 {
			w.pairs = append(w.pairs, p)
			w.cons[p] = cs
		}
	}
	slices.SortFunc(w.pairs, func(a, b pair) int {
		if a.team != b.team {
			return cmp.Compare(a.team, b.team)
		}
		return cmp.Compare(a.flavor, b.flavor)
	})
	if len(w.pairs) == 0 {
		return nil, errors.New("recommend: no team has a quota or a job of a flavor some pool carries")
	}
	return w, nil
}

// searcher runs replays, remembers them and searches the quotas.
type searcher struct {
	w        *world
	memo     map[string]*outcome
	parallel int
	replays  int
	limit    int
	estimate int
	progress func(done, estimate int)
	mu       sync.Mutex
}

// eval replays one vector (or recalls it).
func (s *searcher) eval(v vector) (*outcome, error) {
	outs, err := s.evalAll([]vector{v})
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// evalAll replays the vectors not replayed yet, s.parallel at a time.
func (s *searcher) evalAll(vs []vector) ([]*outcome, error) {
	out := make([]*outcome, len(vs))
	var todo []int
	queued := map[string]bool{}
	for i, v := range vs {
		if o := s.memo[v.key()]; o != nil {
			out[i] = o
		} else if !queued[v.key()] {
			queued[v.key()] = true
			todo = append(todo, i)
		}
	}
	errs := make([]error, len(vs))
	sem := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = s.w.replay(vs[i])
			s.mu.Lock()
			s.replays++
			if s.progress != nil {
				s.progress(s.replays, max(s.estimate, s.replays+1))
			}
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	for _, i := range todo {
		if errs[i] != nil {
			return nil, fmt.Errorf("replaying quotas %s: %w", s.w.describe(vs[i]), errs[i])
		}
		s.memo[vs[i].key()] = out[i]
	}
	for i, v := range vs {
		if out[i] == nil {
			out[i] = s.memo[v.key()]
		}
	}
	return out, nil
}

// describe names a vector's quotas for an error message (the first few).
func (w *world) describe(v vector) string {
	s := ""
	for i, p := range w.pairs {
		if i == 4 {
			return s + fmt.Sprintf(", ... (%d in all)", len(w.pairs))
		}
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s/%s=%d", p.team, p.flavor, v[i])
	}
	return s
}

// unit is the GPUs of one node of flavor f: the least of its pools'.
func (w *world) unit(f schema.Flavor) int64 {
	var u int64
	for _, p := range w.cfg.PoolsOf(f) {
		if u == 0 || p.GPUsPerNode < u {
			u = p.GPUsPerNode
		}
	}
	return max(u, 1)
}

// capUnits is the most nodes' worth of quota the flavor's pools carry at nodes.max.
func (w *world) capUnits(f schema.Flavor) int64 {
	var g int64
	for _, p := range w.cfg.PoolsOf(f) {
		g += planner.Carry(p, p.MaxNodes)
	}
	return g / w.unit(f)
}

// demandUnits bounds where the search starts, per pair, in nodes: the GPUs its
// jobs hold on average over the history (rounded down) and the most they would
// hold at once if each started on arrival (rounded up). Below the mean a team
// queues ever more unless it borrows; the search does not try it, which also
// keeps every trial fleet from drowning in its queue (such replays are slow).
func (w *world) demandUnits() (mean, peak []int64) {
	type edge struct {
		at float64
		d  int64
	}
	edges := map[pair][]edge{}
	for _, ji := range w.info {
		f := ji.named
		if f == "" && len(ji.anyOf) > 0 {
			f = ji.anyOf[0]
		}
		p := pair{ji.team, f}
		edges[p] = append(edges[p], edge{ji.submit, ji.gpus}, edge{ji.submit + ji.running, -ji.gpus})
	}
	first, last := math.Inf(1), math.Inf(-1)
	for _, ji := range w.info {
		first, last = math.Min(first, ji.submit), math.Max(last, ji.submit+ji.running)
	}
	mean, peak = make([]int64, len(w.pairs)), make([]int64, len(w.pairs))
	for i, p := range w.pairs {
		es := edges[p]
		slices.SortFunc(es, func(a, b edge) int {
			if a.at != b.at {
				return cmp.Compare(a.at, b.at)
			}
			return int(a.d - b.d) // ends first
		})
		var cur, most int64
		var gpuSec float64
		for _, e := range es {
			cur += e.d
			most = max(most, cur)
			gpuSec -= float64(e.d) * e.at // an end adds d*end, a start subtracts d*start
		}
		u := w.unit(p.flavor)
		peak[i] = (most + u - 1) / u
		if last > first {
			mean[i] = int64(gpuSec / (last - first) / float64(u))
		}
	}
	return mean, peak
}

// search finds the quotas, in GPUs per pair. It returns them, the outcome of
// today's quotas, and whether it converged within the replay budget.
func (s *searcher) search(exact bool) (vector, *outcome, bool, error) {
	w := s.w
	n := len(w.pairs)
	unit, capU := make([]int64, n), make([]int64, n)
	before := make(vector, n)
	for i, p := range w.pairs {
		unit[i], capU[i] = w.unit(p.flavor), w.capUnits(p.flavor)
		before[i] = w.cfg.Teams[p.team].Quota[p.flavor].Nominal
	}
	// A pair that misses its target even at the most its pools carry keeps
	// today's quota: more quota does not serve it, and holding it at the most
	// would lend the others capacity they would not have.
	unreachable := make([]bool, n)
	gpus := func(u []int64) vector {
		v := make(vector, n)
		for i := range u {
			v[i] = u[i] * unit[i]
			if unreachable[i] {
				v[i] = before[i]
			}
		}
		return v
	}
	lo, hi := w.demandUnits()
	var widest int64
	for i := range hi {
		hi[i] = min(hi[i], capU[i])
		lo[i] = min(lo[i], hi[i])
		widest = max(widest, hi[i])
	}
	s.estimate = 8 + int(math.Ceil(math.Log(float64(widest+1))/math.Log(float64(s.parallel+1))))
	var base *outcome
	// Grow until every pair meets its target, or sits at its cap.
	for {
		vs := []vector{gpus(hi)}
		if base == nil {
			vs = append(vs, before)
		}
		outs, err := s.evalAll(vs)
		if err != nil {
			return nil, nil, false, err
		}
		if base == nil {
			base = outs[1]
		}
		grew := false
		for i, p := range w.pairs {
			if unreachable[i] || outs[0].pass[p] {
				continue
			}
			if hi[i] >= capU[i] {
				unreachable[i], lo[i] = true, capU[i]
				continue
			}
			lo[i], hi[i] = hi[i]+1, min(capU[i], max(2*hi[i], hi[i]+1))
			grew = true
		}
		if !grew {
			break
		}
		if s.replays >= s.limit {
			return gpus(hi), base, false, nil
		}
	}
	// Narrow every pair's range at once: s.parallel replays per round, each
	// trying one point of every open range (every round closes some of it).
	for s.replays < s.limit {
		k := int64(s.parallel)
		var vs []vector
		points := make([][]int64, k)
		open := false
		for j := range k {
			u := make([]int64, n)
			for i := range n {
				u[i] = hi[i]
				if lo[i] < hi[i] {
					u[i] = min(hi[i]-1, lo[i]+(hi[i]-lo[i])*(j+1)/(k+1))
					open = true
				}
			}
			points[j] = u
			vs = append(vs, gpus(u))
		}
		if !open {
			break
		}
		outs, err := s.evalAll(vs)
		if err != nil {
			return nil, nil, false, err
		}
		for i, p := range w.pairs {
			if lo[i] >= hi[i] {
				continue
			}
			nl, nh := lo[i], hi[i]
			for j := range k {
				if outs[j].pass[p] {
					nh = min(nh, points[j][i])
				}
			}
			for j := range k {
				if !outs[j].pass[p] && points[j][i] < nh {
					nl = max(nl, points[j][i]+1)
				}
			}
			lo[i], hi[i] = min(nl, nh), nh
		}
	}
	// The pairs were judged against each other's trial quotas; settle them
	// against each other's final ones: raise what misses, lower what one node
	// less still serves.
	q := slices.Clone(hi)
	tight := make([]bool, n)
	confirmed := make([]bool, n)
	// Teams that trade a node back and forth (one meets its target with a node
	// less only while another has one more) would loop: a state seen thrice ends
	// the search, not converged.
	seen := map[string]int{}
	for s.replays < s.limit {
		if seen[fmt.Sprint(q, tight, confirmed)]++; seen[fmt.Sprint(q, tight, confirmed)] > 2 {
			break
		}
		out, err := s.eval(gpus(q))
		if err != nil {
			return nil, nil, false, err
		}
		raised := false
		for i, p := range w.pairs {
			if unreachable[i] || out.pass[p] {
				continue
			}
			if q[i] >= capU[i] {
				unreachable[i] = true
				continue
			}
			q[i]++
			tight[i], raised = true, true
		}
		if raised {
			clear(confirmed)
			continue
		}
		var cands []int
		for i := range n {
			if !unreachable[i] && !tight[i] && q[i] > 0 {
				cands = append(cands, i)
			}
		}
		if len(cands) > 0 {
			trial := slices.Clone(q)
			for _, i := range cands {
				trial[i]--
			}
			tout, err := s.eval(gpus(trial))
			if err != nil {
				return nil, nil, false, err
			}
			for _, i := range cands {
				if tout.pass[w.pairs[i]] {
					q[i]--
				} else {
					tight[i] = true
				}
			}
			clear(confirmed)
			continue
		}
		if !exact {
			return gpus(q), base, true, nil
		}
		var check []int
		var vs []vector
		for i := range n {
			if !unreachable[i] && q[i] > 0 && !confirmed[i] {
				less := slices.Clone(q)
				less[i]--
				check = append(check, i)
				vs = append(vs, gpus(less))
			}
		}
		if len(check) == 0 {
			return gpus(q), base, true, nil
		}
		s.estimate = max(s.estimate, s.replays+len(check)+1)
		outs, err := s.evalAll(vs)
		if err != nil {
			return nil, nil, false, err
		}
		// Lower one team at a time: two that each meet their target with a node
		// less may not both meet it together.
		lowered := false
		for j, i := range check {
			switch {
			case !outs[j].pass[w.pairs[i]]:
				confirmed[i] = true
			case !lowered:
				q[i]--
				lowered = true
			}
		}
		if lowered {
			clear(confirmed)
		}
	}
	return gpus(q), base, false, nil
}

// fill writes the teams, pools, cost, commitments and use of the result.
func (s *searcher) fill(res *Result, q vector, before, after *outcome) {
	w := s.w
	for i, p := range w.pairs {
		t := TeamResult{Team: p.team, Flavor: p.flavor, NominalBefore: w.cfg.Teams[p.team].Quota[p.flavor].Nominal, NominalAfter: q[i],
			WaitP95SBefore: finite(before.p95[p]), WaitP95SAfter: finite(after.p95[p]), TargetWaitP95S: w.cons[p][0].waitS,
			UnfinishedBefore: before.unfinished[p], UnfinishedAfter: after.unfinished[p], Bound: BoundTarget}
		switch {
		case !after.pass[p]:
			t.Bound = BoundUnreachable
		case q[i] == 0:
			t.Bound = BoundNone
		}
		res.Teams = append(res.Teams, t)
	}
	for _, pp := range before.plan.Pools {
		ap := after.plan.Pool(pp.Pool)
		res.Pools = append(res.Pools, PoolChange{Pool: pp.Pool, Flavor: pp.Flavor, NodesBefore: pp.NodesTarget, NodesAfter: ap.NodesTarget,
			MonthlyUSDBefore: pp.MonthlyUSD, MonthlyUSDAfter: ap.MonthlyUSD})
	}
	res.MonthlyUSDBefore, res.MonthlyUSDAfter = before.plan.TotalMonthlyUSD, after.plan.TotalMonthlyUSD
	res.Committed = commitments(w.cfg, after.plan, after.use)
	if res.Committed == nil {
		res.Committed = []Commitment{}
	}
	for _, f := range slices.Sorted(maps.Keys(after.use.hourly)) {
		h := after.use.hourly[f]
		r := make([]float64, len(h))
		for i, v := range h {
			r[i] = round(v, 3)
		}
		res.Usage = append(res.Usage, FlavorUsage{Flavor: f, GPUHours: r})
	}
	if res.Usage == nil {
		res.Usage = []FlavorUsage{}
	}
}

// finite returns a wait, or nil for never.
func finite(v float64) *float64 {
	if math.IsInf(v, 0) {
		return nil
	}
	return &v
}
