package sim

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/scheduler/workload"
)

// Scheduler is what the simulator drives: the scheduler core satisfies it, and so
// does the reference policy.
type Scheduler interface {
	Submit(w scheduler.Workload) error
	Started(id scheduler.WorkloadID) error
	Finish(id scheduler.WorkloadID) error
	SetNodeHealth(name scheduler.NodeName, healthy bool) ([]scheduler.WorkloadID, error)
	Cycle(now time.Time) scheduler.Results
	Reason(id scheduler.WorkloadID) (scheduler.PendingReason, bool)
}

// EventKind is a node fault event.
type EventKind string

// The node events of an events file.
const (
	Fail    EventKind = "fail"
	Recover EventKind = "recover"
)

// Event fails or recovers a node at a time in seconds.
type Event struct {
	Time float64
	Node scheduler.NodeName
	Kind EventKind
}

// Input is what a simulation replays.
type Input struct {
	Nodes  []scheduler.Node
	Jobs   []workload.Spec
	Events []Event
	// Quota is the quota tree the invariants check; with no teams, quotas are not
	// checked (the reference policy has none).
	Quota scheduler.Config
	// Clusters are clusters the fleet has even when none of Nodes is in them
	// (a repository's clusters whose pools are planned at zero nodes): a job
	// pinned to one waits, and an event of one fails nothing. A job or event
	// naming a cluster of neither is an error (a name misspelt).
	Clusters []string
	// MayLack says whether a node an event names may be missing from Nodes
	// without the name being wrong (a repository's node beyond its pool's
	// planned size, see PoolNodes): such an event fails nothing. Nil: every
	// node an event names must be in Nodes.
	MayLack func(scheduler.NodeName) bool
	// Burst are the pools that grow for pending gangs (FromRepository
	// fills it; docs/elastic.md#in-the-simulator); the Scheduler must then
	// be a Resizer.
	Burst []BurstPool
}

// Options tune a run.
type Options struct {
	// Clock measures wall time (wall_s, decisions_per_s); nil reports zero.
	Clock func() time.Time
	// Progress, if set, is called now and then with the jobs done so far.
	Progress func(done, total int)
	// FullChecks re-checks every node and running job after every step instead of
	// only what the step changed (slow; for tests).
	FullChecks bool
	// EverySecond runs a cycle at every whole second too, as the runner's
	// resync does, up to a minute after each event or arrival (slow; for
	// tests: the default runs one at a tick only when the scheduler is Due,
	// and decides the same).
	EverySecond bool
}

// Due is what a Scheduler may also say: whether its next Cycle decides
// something with no event before it (scheduler.Scheduler.Due). The runner
// re-checks every second (its resync): the replay runs a cycle at the next
// whole second after a cycle that leaves the scheduler Due.
type Due interface {
	Due() bool
}

// Advancer is what a Scheduler may also do: move its clock to the time of
// the events about to be applied (scheduler.Scheduler.Advance), as the
// runner does before it applies what its cache saw, so that a workload a
// fault requeues waits from then, not from the last cycle.
type Advancer interface {
	Advance(now time.Time)
}

// tick is the runner's next resync after t: the next whole second.
func tick(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second)
}

// maxIdleTicks is how many ticks in a row that follow no event or arrival
// the replay runs.
const maxIdleTicks = 60

// Epoch is the virtual time of second 0.
var Epoch = time.Unix(0, 0).UTC()

func vt(sec float64) time.Time {
	return Epoch.Add(time.Duration(math.Round(sec*1e6)) * time.Microsecond)
}

func secs(t time.Time) float64 { return t.Sub(Epoch).Seconds() }

type kind int

// Events at one time apply in this order: ends, faults, recoveries, burst
// nodes joining, arrivals, wakes.
const (
	kFinish kind = iota
	kFail
	kRecover
	kJoin
	kArrive
	kWake
)

type event struct {
	at          time.Time
	kind        kind
	seq         int
	simWorkload *simWorkload
	run         int
	node        scheduler.NodeName
}

// eventHeap holds the events in order: by time, then kind, then as pushed.
// It is typed, not container/heap's: a replay pushes and pops an event per
// start, end and wake, and boxing each in an interface was an allocation
// apiece.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	if h[i].kind != h[j].kind {
		return h[i].kind < h[j].kind
	}
	return h[i].seq < h[j].seq
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for j := len(q) - 1; j > 0; {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		j = i
	}
}

func (h *eventHeap) pop() event {
	q := *h
	n := len(q) - 1
	q[0], q[n] = q[n], q[0]
	e := q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
}

type simWorkload struct {
	spec workload.Spec
	// team is its team's record.
	team      *simTeam
	flavors   map[string]bool
	submitted bool
	running   bool
	done      bool
	run       int
	runStart  time.Time
	firstRun  time.Time
	started   bool
	end       time.Time
	preempted int
	pods      []scheduler.PodPlacement
	// on are the nodes of pods, one for one (nil: not in the fleet).
	on       []*simNode
	gpuSec   float64
	rejected string
	// cluster is where the job last ran; moved: it ran in another before.
	cluster string
	moved   bool
	// touched is the last step whose check reads it (steps count from 1).
	touched int
}

// simTeam is what the replay keeps of a team: its quota (nil: the quota
// declares no such team), its use per flavor and its root cohort (nil: it
// has none).
type simTeam struct {
	quota *scheduler.Team
	used  []flavorGPUs
	root  *simRoot
	// touched is the last step whose check counted it.
	touched int
}

// simRoot is a root cohort: its teams' use and nominal quotas summed, per
// flavor.
type simRoot struct {
	used, nominal []flavorGPUs
	touched       int
}

// flavorGPUs is a count of GPUs of one flavor: a team's or a cohort's
// flavors are few, so a list read in order is the cheapest map.
type flavorGPUs struct {
	flavor scheduler.Flavor
	gpus   int64
}

// gpusOf is the count of f in fs (0: none).
func gpusOf(fs []flavorGPUs, f scheduler.Flavor) int64 {
	for _, x := range fs {
		if x.flavor == f {
			return x.gpus
		}
	}
	return 0
}

// at is the count of f in fs, added if missing.
func at(fs *[]flavorGPUs, f scheduler.Flavor) *int64 {
	for i := range *fs {
		if (*fs)[i].flavor == f {
			return &(*fs)[i].gpus
		}
	}
	*fs = append(*fs, flavorGPUs{flavor: f})
	return &(*fs)[len(*fs)-1].gpus
}

type simNode struct {
	spec    scheduler.Node
	used    int64
	healthy bool
	// jobs counts the running jobs' placements on the node (one a job,
	// where the core places a gang's pods on a node once).
	jobs int
	// gone: a burst pool gave the node back (its record stays: finished
	// jobs name it).
	gone bool
	// domains is the node's domains by level, made once for the reports
	// of the jobs whose nodes all share them (commonDomains): read only.
	domains map[string]string
}

type replay struct {
	p Scheduler
	// domains is commonDomains' buffer.
	domains []scheduler.Domain
	// woken is the last wake pushed: cycles report it again until it is due.
	woken time.Time
	// ticked is the last tick pushed (Due, EverySecond); idle counts the
	// cycles in a row that followed no event or arrival.
	ticked  time.Time
	idle    int
	in      Input
	opts    Options
	events  eventHeap
	seq     int
	jobs    map[scheduler.WorkloadID]*simWorkload
	nodes   map[scheduler.NodeName]*simNode
	now     time.Time
	pending int
	running int
	usedGPU int64
	healthy int64
	// accounting
	busySec  float64 // GPU-seconds used while work was pending or running
	availSec float64 // GPU-seconds available while work was pending or running
	rep      Report
	// teams are the teams of the quota and of the jobs; quotas says the
	// quota declares some.
	teams  map[scheduler.TeamName]*simTeam
	quotas bool
	// step counts the replay's steps; touched are the jobs the step
	// started (check).
	step    int
	touched []*simWorkload
	done    int
	decided int
	whole   *wholeDomains
	// clusterSec are the GPU-seconds used per cluster.
	clusterSec map[string]float64
	// burst replays the burst pools (nil: none); waiting are the submitted
	// jobs that do not run, kept while there are burst pools; arrivalsLeft
	// counts the jobs still to arrive; err is an error of a step's events.
	burst        *burstReplay
	waiting      map[*simWorkload]bool
	arrivalsLeft int
	err          error
}

// Run replays in through p.
func Run(p Scheduler, in Input, opts Options) (*Report, error) {
	r := &replay{p: p, in: in, opts: opts, jobs: map[scheduler.WorkloadID]*simWorkload{}, nodes: map[scheduler.NodeName]*simNode{},
		teams: map[scheduler.TeamName]*simTeam{}, clusterSec: map[string]float64{}}
	var wallStart time.Time
	if opts.Clock != nil {
		wallStart = opts.Clock()
	}
	for _, n := range in.Nodes {
		if _, dup := r.nodes[n.Name]; dup {
			return nil, fmt.Errorf("node %s listed twice", n.Name)
		}
		r.nodes[n.Name] = &simNode{spec: n, healthy: !n.Unhealthy}
		if !n.Unhealthy {
			r.healthy += n.GPUs
		}
	}
	r.whole = newWholeDomains(r.nodes, in.Nodes)
	if r.burst = newBurstReplay(in); r.burst != nil {
		if _, ok := p.(Resizer); !ok {
			return nil, fmt.Errorf("pools that burst need a scheduler that adds and removes nodes")
		}
		r.waiting = map[*simWorkload]bool{}
	}
	roots := map[string]*simRoot{}
	for i, t := range in.Quota.Teams {
		st := r.team(t.Name)
		st.quota = &in.Quota.Teams[i]
		r.quotas = true
		root := r.rootOf(t.Cohort)
		if root == "" {
			continue
		}
		if roots[root] == nil {
			roots[root] = &simRoot{}
		}
		st.root = roots[root]
		for f, fq := range t.Quota {
			*at(&st.root.nominal, f) += fq.Nominal
		}
	}
	// In submission order; a history usually is (a search replays it tens
	// of times: copying it each time is a twentieth of a replay's cost).
	bySubmit := func(a, b workload.Spec) int { return cmp.Compare(a.Submit, b.Submit) }
	jobs := in.Jobs
	if !slices.IsSortedFunc(jobs, bySubmit) {
		jobs = slices.Clone(jobs)
		slices.SortStableFunc(jobs, bySubmit)
	}
	order := make([]*simWorkload, 0, len(jobs))
	// The jobs' records in one allocation: a replay makes one per job, and
	// a search replays the history tens of times.
	records := make([]simWorkload, len(jobs))
	for i, spec := range jobs {
		id := scheduler.WorkloadID(spec.ID)
		if _, dup := r.jobs[id]; dup {
			return nil, fmt.Errorf("job %s listed twice", spec.ID)
		}
		if !(spec.Submit >= 0 && spec.Submit <= workload.MaxSeconds && spec.Duration >= 0 && spec.Duration <= workload.MaxSeconds) {
			return nil, fmt.Errorf("job %s: arrival %gs and run %gs must each be from 0 to 1e9 s (about 31 years)", spec.ID, spec.Submit, spec.Duration)
		}
		j := &records[i]
		j.spec = spec
		j.team = r.team(scheduler.TeamName(spec.Team))
		if len(spec.Flavors) > 0 {
			j.flavors = map[string]bool{}
			for _, f := range spec.Flavors {
				j.flavors[f] = true
			}
		}
		r.jobs[id] = j
		order = append(order, j)
	}
	clusters := map[string][]scheduler.NodeName{}
	for _, n := range in.Nodes {
		if n.Cluster != "" {
			clusters[n.Cluster] = append(clusters[n.Cluster], n.Name)
		}
	}
	for _, j := range order {
		if c := j.spec.Cluster; c != "" && clusters[c] == nil && !slices.Contains(in.Clusters, c) {
			return nil, fmt.Errorf("job %s: cluster %s has no nodes in the fleet", j.spec.ID, c)
		}
	}
	for _, e := range in.Events {
		if !(e.Time >= 0 && e.Time <= workload.MaxSeconds) {
			return nil, fmt.Errorf("event at %gs: times must be from 0 to 1e9 s (about 31 years)", e.Time)
		}
		k := kFail
		if e.Kind == Recover {
			k = kRecover
		}
		if c, ok := strings.CutPrefix(string(e.Node), ClusterPrefix); ok {
			if clusters[c] == nil && !slices.Contains(in.Clusters, c) {
				return nil, fmt.Errorf("event at %gs: cluster %s has no nodes in the fleet", e.Time, c)
			}
			for _, n := range clusters[c] {
				r.push(event{at: vt(e.Time), kind: k, node: n})
			}
			continue
		}
		if _, ok := r.nodes[e.Node]; !ok {
			if in.MayLack != nil && in.MayLack(e.Node) {
				continue
			}
			return nil, fmt.Errorf("event at %gs: node %s does not exist", e.Time, e.Node)
		}
		r.push(event{at: vt(e.Time), kind: k, node: e.Node})
	}
	next := 0
	var cycleTime time.Duration
	for steps := 0; ; steps++ {
		var at time.Time
		switch {
		case len(r.events) > 0 && (next == len(order) || !vt(order[next].spec.Submit).Before(r.events[0].at)):
			at = r.events[0].at
		case next < len(order):
			at = vt(order[next].spec.Submit)
		default:
			at = time.Time{}
		}
		if at.IsZero() {
			break
		}
		r.advance(at)
		if a, ok := r.p.(Advancer); ok {
			a.Advance(at)
		}
		r.step++
		r.touched = r.touched[:0]
		happened := false // an event or arrival, not only wakes
		for len(r.events) > 0 && r.events[0].at.Equal(at) && r.events[0].kind < kArrive {
			e := r.events.pop()
			happened = r.apply(e) || happened
		}
		arrived := next
		for next < len(order) && vt(order[next].spec.Submit).Equal(at) {
			r.arrive(order[next])
			next++
		}
		for len(r.events) > 0 && r.events[0].at.Equal(at) {
			r.events.pop() // wakes: the cycle below is the point
		}
		var c0 time.Time
		if opts.Clock != nil {
			c0 = opts.Clock()
		}
		res := r.p.Cycle(at)
		if opts.Clock != nil {
			cycleTime += opts.Clock().Sub(c0)
		}
		if err := r.results(res); err != nil {
			return nil, err
		}
		r.arrivalsLeft = len(order) - next
		resized, err := r.burstStep(at, happened || next > arrived || len(res.Admitted)+len(res.Preempted) > 0)
		if err == nil {
			err = r.err
		}
		if err != nil {
			return nil, err
		}
		r.tick(at, happened || next > arrived || resized)
		r.check()
		if opts.Progress != nil && steps%256 == 0 {
			opts.Progress(r.done, len(order))
		}
	}
	if opts.Progress != nil {
		opts.Progress(r.done, len(order))
	}
	r.report(order)
	r.rep.Burst = r.burst.report(r.now)
	if opts.Clock != nil {
		r.rep.Summary.WallS = round(opts.Clock().Sub(wallStart).Seconds(), 3)
		if s := cycleTime.Seconds(); s > 0 {
			r.rep.Summary.DecisionsPerS = round(float64(r.decided)/s, 0)
		}
	}
	return &r.rep, nil
}

// tick pushes a wake at the runner's next resync after a cycle at t when
// the scheduler is Due there (with EverySecond, always). happened says the
// cycle followed an event or arrival. Ticks stop after maxIdleTicks in a row
// that followed none (both ways alike, so that they decide the same): a
// scheduler Due forever, or work preempted back and forth, would keep the
// replay going forever.
func (r *replay) tick(t time.Time, happened bool) {
	if happened {
		r.idle = 0
	} else {
		r.idle++
	}
	due := r.opts.EverySecond
	if d, ok := r.p.(Due); ok && !due {
		due = d.Due()
	}
	if next := tick(t); due && r.idle < maxIdleTicks && !next.Equal(r.ticked) {
		r.push(event{at: next, kind: kWake})
		r.ticked = next
	}
}

func (r *replay) rootOf(c scheduler.CohortName) string {
	if c == "" {
		return ""
	}
	parents := map[scheduler.CohortName]scheduler.CohortName{}
	for _, co := range r.in.Quota.Cohorts {
		parents[co.Name] = co.Parent
	}
	for i := 0; parents[c] != "" && i < len(parents); i++ {
		c = parents[c]
	}
	return string(c)
}

func (r *replay) push(e event) {
	e.seq = r.seq
	r.seq++
	r.events.push(e)
}

// advance integrates utilization up to t.
func (r *replay) advance(t time.Time) {
	if !r.now.IsZero() && (r.pending > 0 || r.running > 0) {
		dt := t.Sub(r.now).Seconds()
		r.busySec += dt * float64(r.usedGPU)
		r.availSec += dt * float64(r.healthy)
		r.whole.add(dt, r.healthy-r.usedGPU)
	}
	r.now = t
}

func (r *replay) arrive(j *simWorkload) {
	w := scheduler.Workload{ID: scheduler.WorkloadID(j.spec.ID), Team: scheduler.TeamName(j.spec.Team), Tier: scheduler.TierName(j.spec.Tier),
		Pods: j.spec.Pods, GPUsPerPod: j.spec.GPUsPerPod, Require: j.spec.Require, Prefer: j.spec.Prefer, Cluster: j.spec.Cluster, Submitted: vt(j.spec.Submit)}
	for _, f := range j.spec.Flavors {
		w.Flavors = append(w.Flavors, scheduler.Flavor(f))
	}
	if err := r.p.Submit(w); err != nil {
		j.rejected = err.Error()
		j.done = true
		r.done++
		return
	}
	j.submitted = true
	r.pending++
	r.wait(j, true)
}

// wait notes whether j waits, for the burst pools.
func (r *replay) wait(j *simWorkload, waits bool) {
	switch {
	case r.waiting == nil:
	case waits:
		r.waiting[j] = true
	default:
		delete(r.waiting, j)
	}
}

// apply applies e and says whether it changed anything (the end of a run
// since preempted does not).
func (r *replay) apply(e event) bool {
	switch e.kind {
	case kFinish:
		j := e.simWorkload
		if !j.running || j.run != e.run {
			return false
		}
		r.stop(j)
		j.done, j.end = true, r.now
		r.running--
		r.done++
		_ = r.p.Finish(scheduler.WorkloadID(j.spec.ID))
	case kJoin:
		if err := r.join(e.node); err != nil && r.err == nil {
			r.err = err
		}
	case kFail, kRecover:
		n := r.nodes[e.node]
		healthy := e.kind == kRecover
		if n.healthy == healthy || n.gone {
			return false
		}
		evicted, err := r.p.SetNodeHealth(e.node, healthy)
		if err != nil {
			r.rep.Summary.GangViolations++
			return false
		}
		for _, id := range evicted {
			j := r.jobs[id]
			if j == nil || !j.running {
				r.rep.Summary.GangViolations++
				continue
			}
			r.requeue(j)
			j.preempted++
		}
		n.healthy = healthy
		r.whole.touch(n)
		if healthy {
			r.healthy += n.spec.GPUs
		} else {
			r.healthy -= n.spec.GPUs
			if n.jobs > 0 {
				// The policy left work on a failed node.
				r.rep.Summary.GangViolations += n.jobs
			}
		}
	}
	return true
}

// stop takes a running job off its nodes.
func (r *replay) stop(j *simWorkload) {
	g := j.spec.GPUsPerPod
	for i, p := range j.pods {
		n := j.on[i]
		if n == nil {
			continue // counted a violation at the start
		}
		n.used -= p.Pods * g
		n.jobs--
		r.whole.touch(n)
	}
	gpus := j.spec.GPUs()
	r.usedGPU -= gpus
	sec := float64(gpus) * r.now.Sub(j.runStart).Seconds()
	j.gpuSec += sec
	if j.cluster != "" {
		r.clusterSec[j.cluster] += sec
	}
	j.running = false
	j.run++
	r.use(j.team, r.flavorOf(j), -gpus)
}

// team is the record of the team named name, made on first use.
func (r *replay) team(name scheduler.TeamName) *simTeam {
	t := r.teams[name]
	if t == nil {
		t = &simTeam{}
		r.teams[name] = t
	}
	return t
}

// use adds gpus to the use of f by t and its root cohort.
func (r *replay) use(t *simTeam, f scheduler.Flavor, gpus int64) {
	*at(&t.used, f) += gpus
	if t.root != nil {
		*at(&t.root.used, f) += gpus
	}
}

func (r *replay) requeue(j *simWorkload) {
	r.stop(j)
	r.running--
	r.pending++
	r.wait(j, true)
}

// clusterOf is the cluster of j's first node ("" when it runs nowhere).
func (r *replay) clusterOf(j *simWorkload) string {
	if len(j.on) == 0 || j.on[0] == nil {
		return ""
	}
	return j.on[0].spec.Cluster
}

func (r *replay) flavorOf(j *simWorkload) scheduler.Flavor {
	if len(j.on) == 0 || j.on[0] == nil {
		return ""
	}
	return j.on[0].spec.Flavor
}

func (r *replay) results(res scheduler.Results) error {
	for _, e := range res.Evicted {
		if j := r.jobs[e.Workload]; j != nil && j.running {
			r.requeue(j)
		}
	}
	for _, p := range res.Preempted {
		j := r.jobs[p.Victim]
		if j == nil || !j.running {
			return fmt.Errorf("policy preempted %s, which is not running", p.Victim)
		}
		r.requeue(j)
		j.preempted++
		r.rep.Summary.Preemptions++
		r.decided++
	}
	for _, a := range res.Admitted {
		j := r.jobs[a.Workload]
		if j == nil || j.running || j.done {
			return fmt.Errorf("policy admitted %s, which is not pending", a.Workload)
		}
		r.decided++
		r.start(j, a)
		r.touch(j)
		if err := r.p.Started(a.Workload); err != nil {
			return fmt.Errorf("starting %s: %w", a.Workload, err)
		}
	}
	if !res.Wake.IsZero() && res.Wake.After(r.now) && !res.Wake.Equal(r.woken) {
		r.push(event{at: res.Wake, kind: kWake})
		r.woken = res.Wake
	}
	return nil
}

func (r *replay) start(j *simWorkload, a scheduler.Admission) {
	j.running, j.pods = true, a.Pods
	j.on = slices.Grow(j.on[:0], len(a.Pods))
	for _, p := range a.Pods {
		j.on = append(j.on, r.nodes[p.Node])
	}
	if c := r.clusterOf(j); c != j.cluster {
		j.moved = j.moved || j.started
		j.cluster = c
	}
	if !j.started {
		j.started, j.firstRun = true, r.now
	}
	j.runStart = r.now
	r.pending--
	r.running++
	r.wait(j, false)
	gpus := j.spec.GPUs()
	r.usedGPU += gpus
	for i, p := range a.Pods {
		n := j.on[i]
		if n == nil {
			r.rep.Summary.GangViolations++
			continue
		}
		n.used += p.Pods * j.spec.GPUsPerPod
		n.jobs++
		r.whole.touch(n)
	}
	r.use(j.team, r.flavorOf(j), gpus)
	r.push(event{at: r.now.Add(time.Duration(math.Round(j.spec.Duration*1e6)) * time.Microsecond), kind: kFinish, simWorkload: j, run: j.run})
}

// touch adds j to the jobs the step's check reads, once.
func (r *replay) touch(j *simWorkload) {
	if j.touched != r.step {
		j.touched = r.step
		r.touched = append(r.touched, j)
	}
}

// check verifies the invariants on what the step changed (or everything).
func (r *replay) check() {
	if r.opts.FullChecks {
		for _, j := range r.jobs {
			if j.running {
				r.touch(j)
			}
		}
		for _, n := range r.nodes {
			if n.used > n.spec.GPUs || (!n.healthy && n.jobs > 0) {
				r.rep.Summary.GangViolations++
			}
		}
	}
	var teams []*simTeam
	for _, j := range r.touched {
		if !j.running {
			continue
		}
		if t := j.team; t.touched != r.step {
			t.touched = r.step
			teams = append(teams, t)
		}
		var pods int64
		flavor := r.flavorOf(j)
		for i, p := range j.pods {
			pods += p.Pods
			n := j.on[i]
			if n == nil || !n.healthy || n.used > n.spec.GPUs || n.spec.Flavor != flavor || (j.flavors != nil && !j.flavors[string(n.spec.Flavor)]) {
				r.rep.Summary.GangViolations++
			}
		}
		if pods != j.spec.Pods {
			r.rep.Summary.GangViolations++
		}
		if lvl := j.spec.Require; lvl != "" && !shareDomain(j, lvl) {
			r.rep.Summary.TopologyViolations++
		}
		// A cluster is the widest domain of all: no gang spans two, and a
		// pinned one runs in its own.
		for _, n := range j.on {
			if n != nil && (n.spec.Cluster != j.cluster || (j.spec.Cluster != "" && n.spec.Cluster != j.spec.Cluster)) {
				r.rep.Summary.TopologyViolations++
				break
			}
		}
	}
	if !r.quotas {
		return
	}
	for _, t := range teams {
		if overQuota(t) {
			r.rep.Summary.QuotaViolations++
		}
		if c := t.root; c != nil && c.touched != r.step {
			c.touched = r.step
			if c.over() {
				r.rep.Summary.QuotaViolations++
			}
		}
	}
}

// overQuota says whether t uses more of a flavor than its quota allows (any
// use, when the quota declares no such team or flavor).
func overQuota(t *simTeam) bool {
	for _, u := range t.used {
		if u.gpus == 0 {
			continue
		}
		if t.quota == nil {
			return true
		}
		fq, ok := t.quota.Quota[u.flavor]
		if !ok {
			return true
		}
		limit := fq.Nominal
		if t.quota.Cohort != "" {
			if fq.BorrowingLimit == nil {
				continue
			}
			limit += *fq.BorrowingLimit
		}
		if u.gpus > limit {
			return true
		}
	}
	return false
}

// over says whether the teams of a root cohort use more of a flavor than
// their nominal quotas add up to.
func (c *simRoot) over() bool {
	for _, u := range c.used {
		if u.gpus > gpusOf(c.nominal, u.flavor) {
			return true
		}
	}
	return false
}

// shareDomain says whether all of j's nodes are in one domain of level.
func shareDomain(j *simWorkload, level string) bool {
	var d scheduler.Domain
	for i, n := range j.on {
		if n == nil {
			return false
		}
		x, ok := domainAt(n.spec.Domains, level)
		switch {
		case !ok:
			return false
		case i == 0:
			d = x
		case x != d:
			return false
		}
	}
	return len(j.on) > 0
}

// domainAt is the domain of domains at level.
func domainAt(domains []scheduler.Domain, level string) (scheduler.Domain, bool) {
	for _, d := range domains {
		if d.Level == level {
			return d, true
		}
	}
	return scheduler.Domain{}, false
}

// commonDomains returns the domains, per level, that all of j's nodes share.
func (r *replay) commonDomains(j *simWorkload) map[string]string {
	var common []scheduler.Domain // the first node's that every node shares
	for i, n := range j.on {
		if n == nil {
			return map[string]string{}
		}
		if i == 0 {
			common = append(r.domains[:0], n.spec.Domains...)
			continue
		}
		common = slices.DeleteFunc(common, func(d scheduler.Domain) bool { return !hasDomain(n.spec.Domains, d) })
	}
	r.domains = common[:0]
	if len(j.on) > 0 && len(common) == len(j.on[0].spec.Domains) {
		n := j.on[0]
		// All of the first node's: its map, shared.
		if n.domains == nil {
			n.domains = levels(common)
		}
		return n.domains
	}
	return levels(common)
}

// levels is domains by level.
func levels(domains []scheduler.Domain) map[string]string {
	out := make(map[string]string, len(domains))
	for _, d := range domains {
		out[d.Level] = d.Name
	}
	return out
}

// hasDomain says whether domains name d at d's level.
func hasDomain(domains []scheduler.Domain, d scheduler.Domain) bool {
	x, ok := domainAt(domains, d.Level)
	return ok && x.Name == d.Name
}

// report fills r.rep from the jobs.
func (r *replay) report(order []*simWorkload) {
	s := &r.rep.Summary
	s.Jobs = len(order)
	var waits []float64
	teamWaits := map[string][]float64{}
	teamStats := map[string]*TeamReport{}
	clusterStats := map[string]*ClusterReport{}
	for c, sec := range r.clusterSec {
		clusterStats[c] = &ClusterReport{Cluster: c, GPUSeconds: round(sec, 3)}
	}
	var first, last float64 = math.Inf(1), 0
	var totalSec float64
	r.rep.Jobs = slices.Grow(r.rep.Jobs, len(order))
	// Each job's start, wait and end, in one allocation for all of them.
	times := make([]float64, 0, 3*len(order))
	at := func(v float64) *float64 {
		times = append(times, v)
		return &times[len(times)-1]
	}
	for _, j := range order {
		// Jobs still running at the end cannot be: the loop runs until no events.
		if j.running {
			r.stop(j)
		}
		jr := JobReport{ID: j.spec.ID, Team: j.spec.Team, Tier: j.spec.Tier, GPUs: j.spec.GPUs(), Submit: j.spec.Submit,
			Preempted: j.preempted, Nodes: []string{}}
		if !j.started {
			jr.Domain = map[string]string{}
		}
		first = math.Min(first, j.spec.Submit)
		ts := teamStats[j.spec.Team]
		if ts == nil {
			ts = &TeamReport{Team: j.spec.Team}
			teamStats[j.spec.Team] = ts
		}
		ts.Preempted += j.preempted
		ts.GPUSeconds += j.gpuSec
		totalSec += j.gpuSec
		if j.started {
			st := secs(j.firstRun)
			jr.Start = at(st)
			w := st - j.spec.Submit
			jr.WaitS = at(w)
			waits = append(waits, w)
			teamWaits[j.spec.Team] = append(teamWaits[j.spec.Team], w)
			jr.Nodes = make([]string, len(j.pods))
			for i, p := range j.pods {
				jr.Nodes[i] = string(p.Node)
			}
			slices.Sort(jr.Nodes)
			jr.Nodes = slices.Compact(jr.Nodes)
			jr.Domain = r.commonDomains(j)
			jr.Cluster = j.cluster
			if j.cluster != "" {
				cs := clusterStats[j.cluster]
				if cs == nil {
					cs = &ClusterReport{Cluster: j.cluster}
					clusterStats[j.cluster] = cs
				}
				cs.Jobs++
				if j.moved {
					cs.MovedIn++
				}
			}
		}
		if j.done && j.rejected == "" {
			e := secs(j.end)
			jr.End = at(e)
			s.Completed++
			last = math.Max(last, e)
		} else {
			s.Unschedulable++
			switch {
			case j.rejected != "":
				jr.Reason = j.rejected
			default:
				if pr, ok := r.p.Reason(scheduler.WorkloadID(j.spec.ID)); ok {
					jr.Reason = pr.String()
					jr.ReasonCode = string(pr.Code)
				}
			}
		}
		r.rep.Jobs = append(r.rep.Jobs, jr)
	}
	if r.availSec > 0 {
		s.GPUUtilization = round(r.busySec/r.availSec, 4)
	}
	s.WholeDomainShare = r.whole.share()
	s.WaitP50S = Percentile(waits, 0.50)
	s.WaitP95S = Percentile(waits, 0.95)
	if s.Completed > 0 {
		s.MakespanS = round(last-first, 3)
	}
	for _, c := range slices.Sorted(maps.Keys(clusterStats)) {
		r.rep.Clusters = append(r.rep.Clusters, *clusterStats[c])
	}
	var nominalTotal int64
	nominal := map[string]int64{}
	for t, st := range r.teams {
		q := st.quota
		if q == nil {
			continue
		}
		for _, fq := range q.Quota {
			nominal[string(t)] += fq.Nominal
			nominalTotal += fq.Nominal
		}
		if teamStats[string(t)] == nil {
			teamStats[string(t)] = &TeamReport{Team: string(t)}
		}
	}
	names := make([]string, 0, len(teamStats))
	for n := range teamStats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ts := teamStats[n]
		if totalSec > 0 {
			ts.Share = round(ts.GPUSeconds/totalSec, 4)
		}
		if nominalTotal > 0 {
			ts.NominalShare = round(float64(nominal[n])/float64(nominalTotal), 4)
		}
		ts.GPUSeconds = round(ts.GPUSeconds, 3)
		ts.WaitP95S = Percentile(teamWaits[n], 0.95)
		r.rep.Teams = append(r.rep.Teams, *ts)
	}
}

// Percentile is the nearest-rank percentile of xs (0 for none), rounded to the
// millisecond: the waits of every report are computed with it.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return round(xs[max(0, min(i, len(xs)-1))], 3)
}

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
