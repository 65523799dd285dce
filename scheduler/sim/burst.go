package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/allot-dev/allot/fleet"
	"github.com/allot-dev/allot/fleet/elastic"
	"github.com/allot-dev/allot/scheduler"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// ProvisionDelay is how long a burst node takes, in the replay, from the
// decision that asks for it to its joining the fleet ready: a cloud node's
// boot and registration. It is billed from the decision on.
const ProvisionDelay = 5 * time.Minute

// BurstEvery is how often the replay takes a pool's burst decision (on the
// whole minute) while gangs wait for its nodes or it holds burst nodes.
const BurstEvery = time.Minute

// BurstPool is a pool that grows for pending gangs (schema.Pool.Burst):
// what the replay needs to take its decisions (elastic.Decide) and add its
// nodes.
type BurstPool struct {
	Pool    string
	Flavor  scheduler.Flavor
	Cluster string
	// Elastic is the pool as the decision core knows it (Repair nil: the
	// replay does not model repair).
	Elastic elastic.Pool
	// PerDomain are the nodes of one domain per topology level
	// (fleet.NodesPerDomain).
	PerDomain map[string]int64
	// PricePerNodeHour is the on-demand price burst nodes are billed at.
	PricePerNodeHour quantity.Decimal
	// Layout lays out count nodes of the pool: those named in held first,
	// then the lowest free indices (fleet.LayoutHeld), as the scheduler's
	// nodes.
	Layout func(held []string, count int64) []scheduler.Node
}

// Resizer is what a Scheduler must also do for a replay with burst pools:
// take nodes in and out (scheduler.Scheduler's AddNode and RemoveNode).
type Resizer interface {
	AddNode(n scheduler.Node) error
	RemoveNode(name scheduler.NodeName) ([]scheduler.WorkloadID, error)
}

// burstPool is a burst pool's replay: the core's state, its nodes and what
// it was billed.
type burstPool struct {
	BurstPool
	st elastic.State
	// names are its nodes in the fleet, in index order; joining those asked
	// for and not joined yet; created when each joined (zero: from the start).
	names   []scheduler.NodeName
	joining map[scheduler.NodeName]scheduler.Node
	created map[scheduler.NodeName]time.Time
	// held integrates burst nodes held over time, in node-microseconds, in
	// all and per team; last is when it was last brought up to date.
	held     int64
	teamHeld map[string]int64
	last     time.Time
	peak     int64
}

// burstReplay is the replay's burst pools and when they decide next.
type burstReplay struct {
	pools []*burstPool
	// next is the pending decision's time (zero: none pending); changed
	// when a decision last changed something or work last arrived, ended
	// or moved.
	next, changed time.Time
}

func newBurstReplay(in Input) *burstReplay {
	if len(in.Burst) == 0 {
		return nil
	}
	b := &burstReplay{}
	for _, bp := range in.Burst {
		p := &burstPool{BurstPool: bp, joining: map[scheduler.NodeName]scheduler.Node{}, created: map[scheduler.NodeName]time.Time{}, teamHeld: map[string]int64{}, last: Epoch}
		for _, n := range in.Nodes {
			if _, ok := fleet.NodeIndex(schema.PoolName(bp.Pool), string(n.Name)); ok && n.Flavor == bp.Flavor {
				p.names = append(p.names, n.Name)
			}
		}
		p.sortNames()
		b.pools = append(b.pools, p)
	}
	slices.SortFunc(b.pools, func(x, y *burstPool) int { return cmp.Compare(x.Pool, y.Pool) })
	return b
}

func (p *burstPool) sortNames() {
	slices.SortFunc(p.names, func(a, b scheduler.NodeName) int {
		i, _ := fleet.NodeIndex(schema.PoolName(p.Pool), string(a))
		j, _ := fleet.NodeIndex(schema.PoolName(p.Pool), string(b))
		return cmp.Compare(i, j)
	})
}

// integrate bills the burst nodes held up to t.
func (p *burstPool) integrate(t time.Time) {
	if us := t.Sub(p.last).Microseconds(); us > 0 {
		p.held += p.st.Burst * us
		for _, tn := range p.st.BurstTeams {
			p.teamHeld[tn.Team] += tn.Nodes * us
		}
	}
	p.last = t
}

// burstStep runs after the cycle at t: the pools decide when their decision
// is due, and a decision is scheduled on the next whole minute when the step
// changed something (work arrived, ended or moved) or a pool still needs
// one. It says whether it changed the fleet.
func (r *replay) burstStep(t time.Time, stirred bool) (bool, error) {
	b := r.burst
	if b == nil {
		return false, nil
	}
	again, changed := false, false
	if stirred {
		b.changed = t
	}
	if !b.next.IsZero() && !t.Before(b.next) {
		b.next = time.Time{}
		var err error
		if again, changed, err = r.burstDecide(t); err != nil {
			return false, err
		}
		if changed {
			b.changed = t
		}
		// With nothing else to come, decisions that change nothing stop
		// once every idle timer has run out since the last change (a gang
		// burst cannot serve would otherwise keep them going).
		if again && !changed && len(r.events) == 0 && r.arrivalsLeft == 0 && t.Sub(b.changed) > b.quiet() {
			again = false
		}
	}
	if (again || stirred || changed) && b.next.IsZero() {
		b.next = t.Truncate(BurstEvery).Add(BurstEvery)
		r.push(event{at: b.next, kind: kWake})
	}
	return changed, nil
}

// quiet is how long decisions that change nothing go on when nothing else
// is to come: the longest idle timer, a settle and a provisioning.
func (b *burstReplay) quiet() time.Duration {
	var d time.Duration
	for _, p := range b.pools {
		if p.Elastic.Burst != nil {
			d = max(d, p.Elastic.Burst.IdleAfter)
		}
	}
	return d + elastic.Settle + ProvisionDelay + BurstEvery
}

// burstDecide takes every burst pool's decision at t and applies it; again
// says a pool needs another with nothing else happening: gangs wait for it,
// it awaits nodes, or it holds burst nodes while some of its nodes are idle
// (their idle timers run). A node's idle time starts at the first decision
// that sees it idle: within BurstEvery of its last gang's end.
func (r *replay) burstDecide(t time.Time) (again, changed bool, err error) {
	gangs := r.burstGangs()
	for _, p := range r.burst.pools {
		p.integrate(t)
		nodes := make([]elastic.Node, 0, len(p.names))
		for _, name := range p.names {
			n := r.nodes[name]
			healthy := n.healthy
			gpus := int64(0)
			if healthy {
				gpus = n.spec.GPUs
			}
			nodes = append(nodes, elastic.Node{Name: string(name), Usable: healthy, HealthyGPUs: gpus, Busy: n.jobs > 0, Created: p.created[name]})
		}
		st, d := elastic.Decide(p.Elastic, p.st, gangs[p.Pool], nodes, t)
		p.st = st
		p.peak = max(p.peak, st.Burst)
		for _, name := range d.Retired {
			n := r.nodes[scheduler.NodeName(name)]
			if n == nil || n.gone || n.jobs > 0 {
				continue // the core retires no busy node; a busy one stays
			}
			if err := r.removeNode(p, n); err != nil {
				return false, false, err
			}
			changed = true
		}
		if seated := int64(len(p.names) + len(p.joining)); d.Target > seated {
			held := make([]string, 0, seated)
			for _, n := range p.names {
				held = append(held, string(n))
			}
			for _, n := range slices.Sorted(maps.Keys(p.joining)) {
				held = append(held, string(n))
			}
			for _, spec := range p.Layout(held, d.Target) {
				if _, there := r.nodes[spec.Name]; there && !r.nodes[spec.Name].gone {
					continue
				}
				if _, asked := p.joining[spec.Name]; asked {
					continue
				}
				p.joining[spec.Name] = spec
				r.push(event{at: t.Add(ProvisionDelay), kind: kJoin, node: spec.Name})
				changed = true
			}
		}
		again = again || len(gangs[p.Pool]) > 0 || len(p.joining) > 0 || p.st.Burst > 0 && len(p.st.Idle) > 0
	}
	return again, changed, nil
}

// burstGangs are the pending gangs that wait for a burst pool's nodes
// (InsufficientNodes or NoTopologyDomain on its flavor, in its cluster when
// pinned), by pool, oldest first: the pool of the lowest name of a flavor
// takes its demand.
func (r *replay) burstGangs() map[string][]elastic.Gang {
	waiting := slices.Collect(maps.Keys(r.waiting))
	slices.SortFunc(waiting, func(a, b *simWorkload) int {
		return cmp.Or(cmp.Compare(a.spec.Submit, b.spec.Submit), cmp.Compare(a.spec.ID, b.spec.ID))
	})
	out := map[string][]elastic.Gang{}
	for _, j := range waiting {
		why, ok := r.p.Reason(scheduler.WorkloadID(j.spec.ID))
		if !ok || why.Code != scheduler.ReasonInsufficientNodes && why.Code != scheduler.ReasonNoTopologyDomain {
			continue
		}
		for _, p := range r.burst.pools { // by name
			if p.Flavor != why.Flavor || why.Cluster != "" && why.Cluster != p.Cluster {
				continue
			}
			g := elastic.Gang{Team: j.spec.Team, GPUs: j.spec.GPUs(), PodGPUs: j.spec.GPUsPerPod}
			if why.Code == scheduler.ReasonNoTopologyDomain {
				g.DomainNodes = p.PerDomain[why.Level]
			}
			out[p.Pool] = append(out[p.Pool], g)
			break
		}
	}
	return out
}

// join adds a node asked for to the fleet.
func (r *replay) join(name scheduler.NodeName) error {
	for _, p := range r.burst.pools {
		spec, ok := p.joining[name]
		if !ok {
			continue
		}
		delete(p.joining, name)
		if err := r.p.(Resizer).AddNode(spec); err != nil {
			return fmt.Errorf("adding burst node %s: %w", name, err)
		}
		n := r.nodes[name]
		if n == nil {
			n = &simNode{}
			r.nodes[name] = n
		}
		n.spec, n.healthy, n.gone, n.used, n.domains = spec, true, false, 0, nil
		r.healthy += spec.GPUs
		r.whole.join(n)
		p.names = append(p.names, name)
		p.sortNames()
		p.created[name] = r.now
		return nil
	}
	return nil
}

// removeNode takes an idle node of p out of the fleet. Its record stays
// (finished jobs name it), marked gone.
func (r *replay) removeNode(p *burstPool, n *simNode) error {
	if _, err := r.p.(Resizer).RemoveNode(n.spec.Name); err != nil {
		return fmt.Errorf("removing burst node %s: %w", n.spec.Name, err)
	}
	if n.healthy {
		r.healthy -= n.spec.GPUs
	}
	r.whole.leave(n)
	n.healthy, n.gone = false, true
	p.names = slices.DeleteFunc(p.names, func(x scheduler.NodeName) bool { return x == n.spec.Name })
	delete(p.created, n.spec.Name)
	return nil
}

// burstReport bills what the burst pools held up to t.
func (b *burstReplay) report(t time.Time) *BurstReport {
	if b == nil {
		return nil
	}
	const usPerHour = int64(time.Hour / time.Microsecond)
	out := &BurstReport{Pools: []BurstPoolReport{}, Teams: []BurstTeamReport{}, CostUSD: quantity.Int(0)}
	teams := map[string]*BurstTeamReport{}
	for _, p := range b.pools {
		p.integrate(t)
		hours := quantity.Frac(p.held, usPerHour)
		cost := hours.Mul(p.PricePerNodeHour)
		out.Pools = append(out.Pools, BurstPoolReport{Pool: p.Pool, PeakNodes: p.peak, NodeHours: round(hours.Float64(), 3),
			GPUHours: round(hours.MulInt(p.Elastic.GPUsPerNode).Float64(), 3), CostUSD: cost})
		out.CostUSD = out.CostUSD.Add(cost)
		for team, us := range p.teamHeld {
			tr := teams[team]
			if tr == nil {
				tr = &BurstTeamReport{Team: team, CostUSD: quantity.Int(0)}
				teams[team] = tr
			}
			h := quantity.Frac(us, usPerHour)
			tr.gpuHours = tr.gpuHours.Add(h.MulInt(p.Elastic.GPUsPerNode))
			tr.CostUSD = tr.CostUSD.Add(h.Mul(p.PricePerNodeHour))
		}
	}
	for _, team := range slices.Sorted(maps.Keys(teams)) {
		tr := teams[team]
		tr.GPUHours = round(tr.gpuHours.Float64(), 3)
		out.Teams = append(out.Teams, *tr)
	}
	return out
}

// WithoutBurst is in with no pool bursting: the replay burst is weighed
// against.
func WithoutBurst(in Input) Input {
	in.Burst = nil
	return in
}

// CompareBurst records in rep (a replay with burst pools) what the same
// replay without them (without) waited and what burst added: the wait it
// saved and the cost.
func CompareBurst(rep, without *Report) {
	if rep.Burst == nil || without == nil {
		return
	}
	with, wo := waitsOf(rep), waitsOf(without)
	rep.Burst.Without = &BurstComparison{
		WaitMeanS: round(mean(wo), 3), WaitP50S: without.Summary.WaitP50S, WaitP95S: without.Summary.WaitP95S, Unschedulable: without.Summary.Unschedulable,
		WaitMeanSavedS: round(mean(wo)-mean(with), 3), WaitP95SavedS: round(without.Summary.WaitP95S-rep.Summary.WaitP95S, 3), CostAddedUSD: rep.Burst.CostUSD,
	}
}

func waitsOf(rep *Report) []float64 {
	var out []float64
	for _, j := range rep.Jobs {
		if j.WaitS != nil {
			out = append(out, *j.WaitS)
		}
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
