package reference

import (
	"fmt"
	"slices"
	"time"

	"github.com/allot-dev/allot/scheduler"
)

// FirstFit is the greedy first-fit backfill policy.
type FirstFit struct {
	nodes   []*node
	byName  map[scheduler.NodeName]*node
	pending []*refWorkload
	fresh   []*refWorkload
	jobs    map[scheduler.WorkloadID]*refWorkload
	free    map[scheduler.Flavor]int64
	flavors []scheduler.Flavor
	// clusters in the order their first node is listed ("" when the nodes
	// name none): a gang never spans two.
	clusters []string
	dirty    bool
}

type node struct {
	spec    scheduler.Node
	used    int64
	healthy bool
	jobs    map[*refWorkload]bool
}

type refWorkload struct {
	spec    scheduler.Workload
	running bool
	gone    bool
	pods    []scheduler.PodPlacement
}

// New returns the policy over nodes.
func New(nodes []scheduler.Node) *FirstFit {
	p := &FirstFit{byName: map[scheduler.NodeName]*node{}, jobs: map[scheduler.WorkloadID]*refWorkload{}, free: map[scheduler.Flavor]int64{}}
	for _, n := range nodes {
		nd := &node{spec: n, healthy: !n.Unhealthy, jobs: map[*refWorkload]bool{}}
		p.nodes = append(p.nodes, nd)
		p.byName[n.Name] = nd
		if !slices.Contains(p.flavors, n.Flavor) {
			p.flavors = append(p.flavors, n.Flavor)
		}
		if !slices.Contains(p.clusters, n.Cluster) {
			p.clusters = append(p.clusters, n.Cluster)
		}
		if nd.healthy {
			p.free[n.Flavor] += n.GPUs
		}
	}
	return p
}

// Submit queues a job.
func (p *FirstFit) Submit(w scheduler.Workload) error {
	if _, dup := p.jobs[w.ID]; dup {
		return fmt.Errorf("workload %s submitted twice", w.ID)
	}
	if w.Pods <= 0 || w.GPUsPerPod <= 0 {
		return fmt.Errorf("workload %s: needs at least one pod of at least one GPU", w.ID)
	}
	j := &refWorkload{spec: w}
	p.jobs[w.ID] = j
	p.fresh = append(p.fresh, j)
	return nil
}

// Started does nothing: the reference has no gang timeout.
func (p *FirstFit) Started(scheduler.WorkloadID) error { return nil }

// Finish removes a job.
func (p *FirstFit) Finish(id scheduler.WorkloadID) error {
	j, ok := p.jobs[id]
	if !ok {
		return fmt.Errorf("workload %s: %w", id, scheduler.ErrUnknown)
	}
	p.release(j)
	j.gone = true
	delete(p.jobs, id)
	return nil
}

func (p *FirstFit) release(j *refWorkload) {
	if !j.running {
		return
	}
	for _, pl := range j.pods {
		n := p.byName[pl.Node]
		n.used -= pl.GPUs
		delete(n.jobs, j)
		if n.healthy {
			p.free[n.spec.Flavor] += pl.GPUs
		}
	}
	j.running, j.pods = false, nil
	p.dirty = true
}

// SetNodeHealth fails or recovers a node; the jobs on a failed node are requeued.
func (p *FirstFit) SetNodeHealth(name scheduler.NodeName, healthy bool) ([]scheduler.WorkloadID, error) {
	n, ok := p.byName[name]
	if !ok {
		return nil, fmt.Errorf("node %s: %w", name, scheduler.ErrUnknown)
	}
	if n.healthy == healthy {
		return nil, nil
	}
	var out []*refWorkload
	for j := range n.jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *refWorkload) int { return a.spec.Submitted.Compare(b.spec.Submitted) })
	var ids []scheduler.WorkloadID
	for _, j := range out {
		p.release(j)
		p.fresh = append(p.fresh, j)
		ids = append(ids, j.spec.ID)
	}
	if healthy {
		p.free[n.spec.Flavor] += n.spec.GPUs - n.used
	} else {
		p.free[n.spec.Flavor] -= n.spec.GPUs - n.used
	}
	n.healthy = healthy
	p.dirty = true
	return ids, nil
}

// Reason has nothing to say beyond "not enough free GPUs".
func (p *FirstFit) Reason(id scheduler.WorkloadID) (scheduler.PendingReason, bool) {
	j, ok := p.jobs[id]
	if !ok || j.running {
		return scheduler.PendingReason{}, false
	}
	return scheduler.PendingReason{Code: scheduler.ReasonInsufficientNodes, Requested: j.spec.GPUs()}, true
}

// Cycle starts, in submission order, every pending job that fits. When nothing
// was freed since the last cycle only the new jobs can fit, so only they are tried.
func (p *FirstFit) Cycle(time.Time) scheduler.Results {
	var res scheduler.Results
	slices.SortStableFunc(p.fresh, func(a, b *refWorkload) int { return a.spec.Submitted.Compare(b.spec.Submitted) })
	walk := p.fresh
	if p.dirty {
		walk = mergeJobs(p.pending, p.fresh)
	}
	for _, j := range walk {
		if j.running || j.gone {
			continue
		}
		if pl, ok := p.fit(j); ok {
			p.bind(j, pl)
			res.Admitted = append(res.Admitted, scheduler.Admission{Workload: j.spec.ID, Pods: pl})
		}
	}
	if p.dirty {
		p.pending = live(walk)
	} else {
		p.pending = mergeJobs(p.pending, p.fresh)
	}
	p.fresh, p.dirty = nil, false
	return res
}

func live(js []*refWorkload) []*refWorkload {
	out := js[:0]
	for _, j := range js {
		if !j.running && !j.gone {
			out = append(out, j)
		}
	}
	clear(js[len(out):])
	return out
}

func mergeJobs(a, b []*refWorkload) []*refWorkload {
	if len(b) == 0 {
		return a
	}
	out := append(live(slices.Clone(a)), live(slices.Clone(b))...)
	slices.SortStableFunc(out, func(x, y *refWorkload) int { return x.spec.Submitted.Compare(y.spec.Submitted) })
	return out
}

func (p *FirstFit) allowed(j *refWorkload, f scheduler.Flavor) bool {
	return len(j.spec.Flavors) == 0 || slices.Contains(j.spec.Flavors, f)
}

// fit places each pod on the first node with room whose class the job's
// placement rules admit, all in one cluster (the job's, when it names one).
func (p *FirstFit) fit(j *refWorkload) ([]scheduler.PodPlacement, bool) {
	var free int64
	for f, n := range p.free {
		if p.allowed(j, f) {
			free += n
		}
	}
	g := j.spec.GPUsPerPod
	if free < j.spec.GPUs() {
		return nil, false
	}
	for _, f := range p.flavors {
		if !p.allowed(j, f) || p.free[f] < j.spec.GPUs() {
			continue
		}
		for _, c := range p.clusters {
			if j.spec.Cluster != "" && c != j.spec.Cluster {
				continue
			}
			var out []scheduler.PodPlacement
			left := j.spec.Pods
			for _, n := range p.nodes {
				if !n.healthy || n.spec.Flavor != f || n.spec.Cluster != c || (j.spec.Rules != nil && !j.spec.Rules.Admits(n.spec.Class)) {
					continue
				}
				k := min((n.spec.GPUs-n.used)/g, left)
				if k > 0 {
					out = append(out, scheduler.PodPlacement{Node: n.spec.Name, Pods: k, GPUs: k * g})
					left -= k
					if left == 0 {
						return out, true
					}
				}
			}
		}
	}
	return nil, false
}

func (p *FirstFit) bind(j *refWorkload, pl []scheduler.PodPlacement) {
	for _, x := range pl {
		n := p.byName[x.Node]
		n.used += x.GPUs
		n.jobs[j] = true
		p.free[n.spec.Flavor] -= x.GPUs
	}
	j.running, j.pods = true, pl
}
