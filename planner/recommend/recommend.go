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
	// GridS, in seconds, is the grid of the coarse search: the ranges are
	// searched and settled on the history with its arrivals, node events and
	// ends moved onto this grid (far fewer event times: cheaper replays), and
	// only the settling from that answer is replayed exactly. 0 chooses it (a
	// fifteenth of the smallest target, and only when the grid has at most a
	// quarter of the history's event times); negative: no coarse search.
	GridS float64
}

// Result is the recommendation; its JSON is the `allot recommend -o json`
// contract of docs/contracts.md.
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
	// BurstUSDBefore and BurstUSDAfter are what the burst nodes cost in the
	// replays of the workload today and with the recommended quotas (over
	// the workload's span, not a month), when a pool declares burst.
	BurstUSDBefore *quantity.Decimal `json:"burst_usd_before,omitempty"`
	BurstUSDAfter  *quantity.Decimal `json:"burst_usd_after,omitempty"`
	Committed      []Commitment      `json:"committed"`
	Curve          []CurvePoint      `json:"curve"`
	// Usage is the GPU-hours each flavor used, hour by hour, in the replay of the
	// recommended fleet.
	Usage []FlavorUsage `json:"usage"`
	// Replays is the number of simulations the search ran (CoarseReplays of
	// them on the history moved onto a grid of GridS seconds; 0: no coarse
	// search); Converged is false when it stopped before every quota was
	// settled, Stopped says where: StoppedBudget or StoppedTrade.
	Replays       int     `json:"replays"`
	CoarseReplays int     `json:"coarse_replays"`
	GridS         float64 `json:"grid_s"`
	// CurveGridS is the grid the curve was replayed on (0: exactly).
	CurveGridS float64 `json:"curve_grid_s"`
	Converged  bool    `json:"converged"`
	Stopped    string  `json:"stopped,omitempty"`
	Exact      bool    `json:"exact"`
}

// Why a search stopped before it converged.
const (
	// StoppedBudget: at MaxReplays.
	StoppedBudget = "budget"
	// StoppedTrade: where teams trade a node back and forth (one meets its
	// target with a node less only while another has one more), a state
	// seen a third time.
	StoppedTrade = "trade"
)

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
	// Burst is what the pool's burst nodes held and cost in the replays,
	// when it declares burst.
	Burst *PoolBurst `json:"burst,omitempty"`
	// BurstOption weighs fewer fixed nodes plus its burst against the
	// planned nodes, when its headroom or spare nodes leave burst some to
	// stand in for.
	BurstOption *BurstOption `json:"burst_option,omitempty"`
}

// PoolBurst is a pool's burst node-hours and their on-demand cost in the
// replay of the workload (over its span, not a month), today and with the
// recommended quotas (sim.BurstReport).
type PoolBurst struct {
	NodeHoursBefore float64          `json:"node_hours_before"`
	NodeHoursAfter  float64          `json:"node_hours_after"`
	USDBefore       quantity.Decimal `json:"usd_before"`
	USDAfter        quantity.Decimal `json:"usd_after"`
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
	// Preemptions of the flavor's jobs in the replay of this size.
	Preemptions int `json:"preemptions"`
	// Why, when the wait is longer than at the next smaller size, says why.
	Why  string `json:"why,omitempty"`
	jobs int    // the jobs the p95 is over
}

// FlavorUsage is a flavor's GPU-hours per hour of the replay.
type FlavorUsage struct {
	Flavor   schema.Flavor `json:"flavor"`
	GPUHours []float64     `json:"gpu_hours"`
}

// Run searches the recommendation. See the package comment and docs/recommend.md.
func Run(in Input) (*Result, error) {
	w, err := newWorld(in, 0)
	if err != nil {
		return nil, err
	}
	b := &budget{limit: in.MaxReplays, progress: in.Progress}
	if b.limit <= 0 {
		b.limit = 200
	}
	parallel := max(1, in.Parallel)
	if in.Parallel == 0 {
		parallel = 2
	}
	s := newSearcher(w, parallel, b)
	var coarse *searcher
	if g := w.grid(in.GridS); g > 0 {
		cw, err := newWorld(in, g)
		if err != nil {
			return nil, err
		}
		coarse = newSearcher(cw, parallel, b)
	}
	steps := in.CurveSteps
	if steps == 0 {
		steps = 3
	}
	q, before, converged, err := s.search(in.Exact, coarse)
	if err != nil {
		return nil, err
	}
	after, err := s.eval(q)
	if err != nil {
		return nil, err
	}
	res := &Result{Workload: in.Workload, Jobs: len(in.Jobs), Targets: slices.Clone(in.Targets), Converged: converged, Exact: in.Exact}
	switch {
	case converged:
	case b.spent():
		res.Stopped = StoppedBudget
	default:
		res.Stopped = StoppedTrade
	}
	for _, t := range in.Targets {
		if t.Name == "" {
			v := t.WaitP95S
			res.Target.WaitP95S = &v
		}
	}
	s.fill(res, q, before, after)
	if err := s.burstOptions(res, q, after); err != nil {
		return nil, err
	}
	if steps > 0 {
		// The curve's sizes below the answer are the slowest replays there are
		// (long queues): with a grid, they are replayed on it, as the search was.
		cs := s
		if coarse != nil {
			cs, res.CurveGridS = coarse, coarse.w.gridS
		}
		if res.Curve, err = cs.curve(q, steps); err != nil {
			return nil, err
		}
	}
	res.Replays = b.replays
	if coarse != nil {
		res.CoarseReplays, res.GridS = coarse.replays, coarse.w.gridS
	}
	return res, nil
}

// newWorld checks the input and sets up what every replay shares; with a grid
// (seconds, > 0), of the history moved onto it (see onGrid).
func newWorld(in Input, gridS float64) (*world, error) {
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
	if gridS > 0 {
		w.gridS = gridS
		w.events = onGrid(w.jobs, in.Events, gridS)
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
	teamFlavors := map[schema.TeamName][]schema.Flavor{}
	runs := map[[2]string]int{}
	for i, j := range w.jobs {
		if _, dup := w.index[j.ID]; dup {
			return nil, fmt.Errorf("job %s listed twice", j.ID)
		}
		w.index[j.ID] = i
		team := schema.TeamName(j.Team)
		if cfg.Teams[team] == nil {
			return nil, fmt.Errorf("job %s: team %q is not declared", j.ID, j.Team)
		}
		run, ok := runs[[2]string{j.Team, j.Tier}]
		if !ok {
			run = len(runs)
			runs[[2]string{j.Team, j.Tier}] = run
		}
		ji := jobInfo{team: team, tier: j.Tier, gpus: j.GPUs(), submit: j.Submit, running: j.Duration, run: run}
		for _, f := range j.Flavors {
			if pools[schema.Flavor(f)] {
				ji.anyOf = append(ji.anyOf, schema.Flavor(f))
			}
		}
		if len(j.Flavors) == 0 {
			ji.anyFlavor = true
			ji.anyOf = mightUse(cfg, team, teamFlavors)
		}
		if len(j.Flavors) == 1 && len(ji.anyOf) == 1 {
			ji.named = ji.anyOf[0]
			pairs[pair{team, ji.named}] = true
		}
		w.info[i] = ji
	}
	w.runs = len(runs)
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

// budget is the replays of a whole recommendation: counted across its
// searchers (the coarse one and the exact one), bounded by MaxReplays.
type budget struct {
	mu       sync.Mutex
	replays  int
	limit    int
	estimate int
	progress func(done, estimate int)
}

func (b *budget) spent() bool { return b.replays >= b.limit }

// left is how many replays the budget still allows.
func (b *budget) left() int { return max(0, b.limit-b.replays) }

// expect raises the estimate of the replays in all to at least n more than
// those done.
func (b *budget) expect(n int) { b.estimate = max(b.estimate, b.replays+n) }

// searcher runs replays of one world, remembers them and searches the quotas.
type searcher struct {
	w        *world
	memo     map[string]*outcome
	parallel int
	b        *budget
	replays  int // this searcher's
	// sp is the space of the last search: which pairs it found unreachable.
	sp *space
}

func newSearcher(w *world, parallel int, b *budget) *searcher {
	return &searcher{w: w, memo: map[string]*outcome{}, parallel: parallel, b: b}
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
	s.run(len(todo), func(k int) {
		i := todo[k]
		out[i], errs[i] = s.w.replay(vs[i])
	})
	for _, i := range todo {
		if errs[i] != nil {
			return nil, fmt.Errorf("replaying quotas %s%s: %w", s.w.describe(vs[i]), s.w.gridNote(), errs[i])
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

// run runs replay(0), ..., replay(n-1), s.parallel at a time, and
// counts each as a replay of the budget (reporting the progress).
func (s *searcher) run(n int, replay func(i int)) {
	sem := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			replay(i)
			b := s.b
			b.mu.Lock()
			defer b.mu.Unlock()
			b.replays++
			s.replays++
			if b.progress != nil {
				b.progress(b.replays, max(b.estimate, b.replays+1))
			}
		}()
	}
	wg.Wait()
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

// space is what the search needs of every pair: its node size, the most nodes
// its pools carry, today's quota (in GPUs) and whether it is unreachable.
type space struct {
	unit, capU, before []int64
	// A pair that misses its target even at the most its pools carry keeps
	// today's quota: more quota does not serve it, and holding it at the most
	// would lend the others capacity they would not have.
	unreachable []bool
}

func (w *world) space() *space {
	n := len(w.pairs)
	sp := &space{unit: make([]int64, n), capU: make([]int64, n), before: make([]int64, n), unreachable: make([]bool, n)}
	for i, p := range w.pairs {
		sp.unit[i], sp.capU[i] = w.unit(p.flavor), w.capUnits(p.flavor)
		sp.before[i] = w.cfg.Teams[p.team].Quota[p.flavor].Nominal
	}
	return sp
}

// gpus is the quota vector of u nodes per pair.
func (sp *space) gpus(u []int64) vector {
	v := make(vector, len(u))
	for i := range u {
		v[i] = u[i] * sp.unit[i]
		if sp.unreachable[i] {
			v[i] = sp.before[i]
		}
	}
	return v
}

// search finds the quotas, in GPUs per pair. It returns them, the outcome of
// today's quotas, and whether it converged within the replay budget. With a
// coarse searcher, the ranges are searched and settled on its world (the
// history on a grid) and only the settling is replayed exactly.
func (s *searcher) search(exact bool, coarse *searcher) (vector, *outcome, bool, error) {
	sp := s.w.space()
	s.sp = sp
	if coarse == nil {
		hi, base, ok, err := s.ranges(sp, true)
		if err != nil || !ok {
			return sp.gpus(hi), base, false, err
		}
		q, ok, err := s.settle(sp, hi, exact, false)
		return sp.gpus(q), base, ok, err
	}
	q, _, ok, err := coarse.ranges(sp, false)
	if err == nil && ok {
		q, ok, err = coarse.settle(sp, q, false, false)
	}
	if err != nil {
		return nil, nil, false, err
	}
	// Today's quotas and the coarse answer, exactly, side by side.
	s.b.expect(4)
	outs, err := s.evalAll([]vector{sp.gpus(q), sp.before})
	if err != nil {
		return nil, nil, false, err
	}
	if !ok {
		return sp.gpus(q), outs[1], false, nil
	}
	q, ok, err = s.settle(sp, q, exact, !exact)
	return sp.gpus(q), outs[1], ok, err
}

// ranges bounds every pair from the history, grows the bounds until every pair
// meets its target (or sits at its cap: unreachable) and narrows every range
// at once. It returns the upper ends (in nodes), the outcome of today's quotas
// (when withBase) and false when the budget ran out.
func (s *searcher) ranges(sp *space, withBase bool) ([]int64, *outcome, bool, error) {
	w := s.w
	n := len(w.pairs)
	lo, hi := w.demandUnits()
	var widest int64
	for i := range hi {
		hi[i] = min(hi[i], sp.capU[i])
		lo[i] = min(lo[i], hi[i])
		widest = max(widest, hi[i])
	}
	s.b.expect(8 + int(math.Ceil(math.Log(float64(widest+1))/math.Log(float64(s.parallel+1)))))
	var base *outcome
	// Grow until every pair meets its target, or sits at its cap.
	for first := true; ; first = false {
		vs := []vector{sp.gpus(hi)}
		if first && withBase {
			vs = append(vs, sp.before)
		}
		outs, err := s.evalAll(vs)
		if err != nil {
			return nil, nil, false, err
		}
		if len(outs) > 1 {
			base = outs[1]
		}
		grew := false
		for i, p := range w.pairs {
			if sp.unreachable[i] || outs[0].pass[p] {
				continue
			}
			if hi[i] >= sp.capU[i] {
				sp.unreachable[i], lo[i] = true, sp.capU[i]
				continue
			}
			lo[i], hi[i] = hi[i]+1, min(sp.capU[i], max(2*hi[i], hi[i]+1))
			grew = true
		}
		if !grew {
			break
		}
		if s.b.spent() {
			return hi, base, false, nil
		}
	}
	// Narrow every pair's range at once: s.parallel replays per round, each
	// trying one point of every open range (every round closes some of it).
	for !s.b.spent() {
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
			vs = append(vs, sp.gpus(u))
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
	return hi, base, true, nil
}

// settle starts from q (nodes per pair), judged so far against other trial
// quotas, and settles the pairs against each other's final ones: it raises
// what misses and lowers what one node less still serves. It returns the
// quotas in nodes and whether it converged.
func (s *searcher) settle(sp *space, q []int64, exact, raiseOnly bool) ([]int64, bool, error) {
	w := s.w
	n := len(w.pairs)
	q = slices.Clone(q)
	tight := make([]bool, n)
	confirmed := make([]bool, n)
	// Teams that trade a node back and forth (one meets its target with a node
	// less only while another has one more) would loop: a state seen thrice ends
	// the search, not converged.
	seen := map[string]int{}
	for !s.b.spent() {
		if seen[fmt.Sprint(q, tight, confirmed)]++; seen[fmt.Sprint(q, tight, confirmed)] > 2 {
			break
		}
		out, err := s.eval(sp.gpus(q))
		if err != nil {
			return nil, false, err
		}
		raised := false
		for i, p := range w.pairs {
			if sp.unreachable[i] || out.pass[p] {
				continue
			}
			if q[i] >= sp.capU[i] {
				sp.unreachable[i] = true
				continue
			}
			q[i]++
			tight[i], raised = true, true
		}
		if raised && raiseOnly && s.parallel > 1 {
			q, err = s.raiseAtRisk(sp, q, out)
			if err != nil {
				return nil, false, err
			}
		}
		if raised {
			clear(confirmed)
			continue
		}
		var cands []int
		for i := range n {
			if !raiseOnly && !sp.unreachable[i] && !tight[i] && q[i] > 0 {
				cands = append(cands, i)
			}
		}
		if len(cands) > 0 {
			trial := slices.Clone(q)
			for _, i := range cands {
				trial[i]--
			}
			tout, err := s.eval(sp.gpus(trial))
			if err != nil {
				return nil, false, err
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
			return q, true, nil
		}
		var check []int
		var vs []vector
		for i := range n {
			if !sp.unreachable[i] && q[i] > 0 && !confirmed[i] {
				less := slices.Clone(q)
				less[i]--
				check = append(check, i)
				vs = append(vs, sp.gpus(less))
			}
		}
		if len(check) == 0 {
			return q, true, nil
		}
		if left := s.b.left(); len(check) > left {
			// --max-replays bounds the search: confirm what it leaves room for.
			check, vs = check[:left], vs[:left]
		}
		s.b.expect(len(check) + 1)
		outs, err := s.evalAll(vs)
		if err != nil {
			return nil, false, err
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
	return q, false, nil
}

// atRisk is the margin under which a team that meets its target is likely to
// miss it once other teams' quotas move by a node (see raiseAtRisk).
const atRisk = 0.1

// raiseAtRisk uses the spare replay slot of a raising round: beside q (the
// teams that missed raised), it replays q with the teams that met their target
// by less than atRisk raised too. Raising some teams moves the others' waits
// (they borrow less, or are reclaimed from sooner), so a round of exact raises
// tends to make the next few teams miss, one round each; the replay with the
// teams at risk raised often ends that. It returns whichever of the two left
// fewer teams missing (q on a tie).
func (s *searcher) raiseAtRisk(sp *space, q []int64, out *outcome) ([]int64, error) {
	w := s.w
	more := slices.Clone(q)
	changed := false
	for i, p := range w.pairs {
		if !sp.unreachable[i] && out.pass[p] && out.margin[p] < atRisk && more[i] < sp.capU[i] {
			more[i]++
			changed = true
		}
	}
	if !changed {
		return q, nil
	}
	outs, err := s.evalAll([]vector{sp.gpus(q), sp.gpus(more)})
	if err != nil {
		return nil, err
	}
	missing := func(o *outcome) int {
		k := 0
		for i, p := range w.pairs {
			if !sp.unreachable[i] && !o.pass[p] {
				k++
			}
		}
		return k
	}
	if missing(outs[1]) < missing(outs[0]) {
		return more, nil
	}
	return q, nil
}

// fill writes the teams, pools, cost, commitments and use of the result.
func (s *searcher) fill(res *Result, q vector, before, after *outcome) {
	w := s.w
	for i, p := range w.pairs {
		t := TeamResult{Team: p.team, Flavor: p.flavor, NominalBefore: w.cfg.Teams[p.team].Quota[p.flavor].Nominal, NominalAfter: q[i],
			WaitP95SBefore: finite(before.p95[p]), WaitP95SAfter: finite(after.p95[p]), TargetWaitP95S: w.cons[p][0].waitS,
			UnfinishedBefore: before.unfinished[p], UnfinishedAfter: after.unfinished[p], Bound: BoundTarget}
		switch {
		case !after.pass[p] || (s.sp != nil && s.sp.unreachable[i]):
			// A pair that missed its target at the most its pools carry kept
			// today's quota, even when it meets the target once the others
			// moved: the search did not size it.
			t.Bound = BoundUnreachable
		case q[i] == 0:
			t.Bound = BoundNone
		}
		res.Teams = append(res.Teams, t)
	}
	for _, pp := range before.plan.Pools {
		ap := after.plan.Pool(pp.Pool)
		res.Pools = append(res.Pools, PoolChange{Pool: pp.Pool, Flavor: pp.Flavor, NodesBefore: pp.NodesTarget, NodesAfter: ap.NodesTarget,
			MonthlyUSDBefore: pp.MonthlyUSD, MonthlyUSDAfter: ap.MonthlyUSD, Burst: poolBurst(pp.Pool, before.burst, after.burst)})
	}
	res.MonthlyUSDBefore, res.MonthlyUSDAfter = before.plan.TotalMonthlyUSD, after.plan.TotalMonthlyUSD
	if before.burst != nil && after.burst != nil {
		res.BurstUSDBefore, res.BurstUSDAfter = &before.burst.CostUSD, &after.burst.CostUSD
	}
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

// poolBurst is pool's burst in the two replays, nil when it declares none.
func poolBurst(pool schema.PoolName, before, after *sim.BurstReport) *PoolBurst {
	of := func(b *sim.BurstReport) *sim.BurstPoolReport {
		if b == nil {
			return nil
		}
		for i := range b.Pools {
			if b.Pools[i].Pool == string(pool) {
				return &b.Pools[i]
			}
		}
		return nil
	}
	bp, ap := of(before), of(after)
	if bp == nil || ap == nil {
		return nil
	}
	return &PoolBurst{NodeHoursBefore: bp.NodeHours, NodeHoursAfter: ap.NodeHours, USDBefore: bp.CostUSD, USDAfter: ap.CostUSD}
}

// finite returns a wait, or nil for never.
func finite(v float64) *float64 {
	if math.IsInf(v, 0) {
		return nil
	}
	return &v
}
