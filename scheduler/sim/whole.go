package sim

import "github.com/allot-dev/allot/scheduler"

// wholeDomains measures fragmentation: of the time there was work and the
// fleet had at least one top-level domain's worth of free healthy GPUs, the
// share during which a whole top-level domain was free (every node healthy and
// idle), so that a gang of that domain's size could have been placed. A
// top-level domain is a node's widest topology domain, or the node itself when
// it has none. 1 means the free GPUs were never scattered.
type wholeDomains struct {
	of map[*simNode]int
	// index is each domain's by key (domainKey).
	index map[string]int
	// size and free count, per domain, its nodes and its healthy idle ones.
	size, free []int
	// freeDomains counts the domains with every node healthy and idle.
	freeDomains int
	// smallest is the fewest GPUs of a domain.
	smallest int64
	isFree   map[*simNode]bool
	dirty    []*simNode
	// seconds with enough free GPUs, and of those with a whole domain free.
	enoughSec, wholeSec float64
}

func newWholeDomains(nodes map[scheduler.NodeName]*simNode, order []scheduler.Node) *wholeDomains {
	d := &wholeDomains{of: map[*simNode]int{}, isFree: map[*simNode]bool{}, index: map[string]int{}}
	var gpus []int64
	for _, spec := range order {
		n := nodes[spec.Name]
		key := domainKey(spec)
		i, ok := d.index[key]
		if !ok {
			i = len(d.size)
			d.index[key] = i
			d.size, d.free, gpus = append(d.size, 0), append(d.free, 0), append(gpus, 0)
		}
		d.of[n] = i
		d.size[i]++
		gpus[i] += spec.GPUs
		d.dirty = append(d.dirty, n)
	}
	for i, g := range gpus {
		if i == 0 || g < d.smallest {
			d.smallest = g
		}
	}
	d.settle()
	return d
}

func domainKey(spec scheduler.Node) string {
	if len(spec.Domains) > 0 {
		return string(spec.Flavor) + "/" + spec.Domains[0].Level + "/" + spec.Domains[0].Name
	}
	return "node/" + string(spec.Name)
}

// join counts a node that joined the fleet (a burst node), not free until
// settled.
func (d *wholeDomains) join(n *simNode) {
	d.settle()
	i, ok := d.of[n]
	if !ok {
		key := domainKey(n.spec)
		if i, ok = d.index[key]; !ok {
			i = len(d.size)
			d.index[key] = i
			d.size, d.free = append(d.size, 0), append(d.free, 0)
		}
		d.of[n] = i
	}
	d.resize(i, func() { d.size[i]++ })
	d.dirty = append(d.dirty, n)
}

// leave stops counting a node that left the fleet.
func (d *wholeDomains) leave(n *simNode) {
	d.settle()
	i := d.of[n]
	d.resize(i, func() {
		if d.isFree[n] {
			d.free[i]--
		}
		d.size[i]--
	})
	delete(d.isFree, n)
}

// resize applies change to domain i's counts and keeps freeDomains.
func (d *wholeDomains) resize(i int, change func()) {
	was := d.free[i] == d.size[i] && d.size[i] > 0
	change()
	now := d.free[i] == d.size[i] && d.size[i] > 0
	switch {
	case now && !was:
		d.freeDomains++
	case was && !now:
		d.freeDomains--
	}
}

// touch notes that a node's use or health changed.
func (d *wholeDomains) touch(n *simNode) { d.dirty = append(d.dirty, n) }

// settle brings the counts up to date with the touched nodes.
func (d *wholeDomains) settle() {
	for _, n := range d.dirty {
		now := n.healthy && n.used == 0 && !n.gone
		if now == d.isFree[n] {
			continue
		}
		d.isFree[n] = now
		i := d.of[n]
		d.resize(i, func() {
			if now {
				d.free[i]++
			} else {
				d.free[i]--
			}
		})
	}
	d.dirty = d.dirty[:0]
}

// add counts dt seconds of work with freeGPUs free healthy GPUs.
func (d *wholeDomains) add(dt float64, freeGPUs int64) {
	d.settle()
	if len(d.size) == 0 || freeGPUs < d.smallest {
		return
	}
	d.enoughSec += dt
	if d.freeDomains > 0 {
		d.wholeSec += dt
	}
}

// share is the figure, or nil when there never were enough free GPUs.
func (d *wholeDomains) share() *float64 {
	if d.enoughSec <= 0 {
		return nil
	}
	s := round(d.wholeSec/d.enoughSec, 4)
	return &s
}
