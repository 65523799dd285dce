// Package quota is the scheduling core's quota tree. It follows Kueue's
// hierarchical cohorts: every team and cohort is a Node that has, per flavor, a
// subtree quota (a team: its nominal; a cohort: what its children lend it) and
// a usage. A child keeps a guaranteed part of its subtree quota that it never
// lends (subtree - lending limit); only usage above that part counts in the
// parent. Usage changes propagate up incrementally, so a quota check costs
// O(depth).
//
// The tree knows GPUs, not workloads: who may take from whom is the
// scheduler's (scheduler/rule.go). It does no I/O and allocates only when a
// node first sees a flavor.
package quota

// GPUs is a count of GPUs, as the scheduler counts them.
type GPUs = int64

// Unlimited is a borrowing or lending limit that is not set.
const Unlimited GPUs = -1

// Res is a node's quota and usage of one flavor.
type Res struct {
	Nominal GPUs
	Borrow  GPUs // Unlimited or >= 0
	Lend    GPUs // Unlimited or >= 0
	// Subtree is the quota of the node's subtree (ComputeSubtree).
	Subtree GPUs
	Usage   GPUs
	// BorrowOnly is the part of a team's usage by borrowOnly tiers.
	BorrowOnly GPUs
	// Preemptible is a team's usage by its preemptible tiers, by priority.
	Preemptible TierSums
	// Has says the team declared a quota of this flavor.
	Has bool
}

// TierSums are GPUs by tier priority: the few tiers a team runs work of.
type TierSums []TierGPUs

// TierGPUs is the GPUs of one tier.
type TierGPUs struct {
	Prio int64
	GPUs GPUs
}

// Below is the sum of the tiers of a priority under prio.
func (ts TierSums) Below(prio int64) GPUs {
	var g GPUs
	for _, x := range ts {
		if x.Prio < prio {
			g += x.GPUs
		}
	}
	return g
}

// Add adds delta GPUs to the sum of tier prio.
func (ts *TierSums) Add(prio int64, delta GPUs) {
	for i := range *ts {
		if (*ts)[i].Prio == prio {
			(*ts)[i].GPUs += delta
			return
		}
	}
	*ts = append(*ts, TierGPUs{prio, delta})
}

// Reclaimable is what a team uses that others of its cohort may reclaim: its
// usage above nominal, not counting borrowOnly tiers, plus its borrowOnly
// tiers' usage.
func (r *Res) Reclaimable() GPUs {
	return max(0, r.Usage-r.BorrowOnly-r.Nominal) + r.BorrowOnly
}

// Node is a team (a leaf) or a cohort of the tree.
type Node struct {
	Name     string
	Parent   *Node
	Children []*Node
	// Leaf says the node is a team: its subtree quota is its nominal.
	Leaf bool
	res  []Res
	// Reclaimable (on a root) is, per flavor, the sum over the tree's teams of
	// Res.Reclaimable; it lets a cycle skip the reclaim search when nothing in
	// the cohort can be reclaimed. AddReclaimable keeps it.
	Reclaimable []GPUs
}

// Attach makes q a child of parent.
func (q *Node) Attach(parent *Node) {
	q.Parent = parent
	parent.Children = append(parent.Children, q)
}

// R is q's quota and usage of flavor f; a flavor it has not seen has no quota
// and unlimited borrowing and lending.
func (q *Node) R(f int) *Res {
	for f >= len(q.res) {
		q.res = append(q.res, Res{Borrow: Unlimited, Lend: Unlimited})
	}
	return &q.res[f]
}

// Root is the root of q's tree.
func (q *Node) Root() *Node {
	for q.Parent != nil {
		q = q.Parent
	}
	return q
}

// Guaranteed is the part of q's subtree quota of f that q never lends.
func (q *Node) Guaranteed(f int) GPUs {
	r := q.R(f)
	if r.Lend == Unlimited {
		return 0
	}
	return max(0, r.Subtree-r.Lend)
}

// ComputeSubtree fills subtree quotas bottom-up.
func (q *Node) ComputeSubtree(flavors int) {
	for f := range flavors {
		if q.Leaf {
			q.R(f).Subtree = q.R(f).Nominal
			continue
		}
		q.R(f).Subtree = 0
	}
	for _, c := range q.Children {
		c.ComputeSubtree(flavors)
		for f := range flavors {
			q.R(f).Subtree += c.R(f).Subtree - c.Guaranteed(f)
		}
	}
}

// Available is what q may still use of flavor f.
func (q *Node) Available(f int) GPUs {
	r := q.R(f)
	if q.Parent == nil {
		return r.Subtree - r.Usage
	}
	g := q.Guaranteed(f)
	local := max(0, g-r.Usage)
	pa := q.Parent.Available(f)
	if r.Borrow != Unlimited {
		stored := r.Subtree - g
		inParent := max(0, r.Usage-g)
		pa = min(pa, stored-inParent+r.Borrow)
	}
	return local + max(0, pa)
}

// AddUsage adds delta GPUs of flavor f to q and, as far as it exceeds the
// guaranteed parts, to its ancestors.
func (q *Node) AddUsage(f int, delta GPUs) {
	for n := q; n != nil && delta != 0; n = n.Parent {
		g := n.Guaranteed(f)
		r := n.R(f)
		before := max(0, r.Usage-g)
		r.Usage += delta
		delta = max(0, r.Usage-g) - before
	}
}

// AddReclaimable adds delta to the root's Reclaimable of flavor f.
func (q *Node) AddReclaimable(f int, delta GPUs) {
	root := q.Root()
	for f >= len(root.Reclaimable) {
		root.Reclaimable = append(root.Reclaimable, 0)
	}
	root.Reclaimable[f] += delta
}

// ReclaimableIn is what q's tree may reclaim of flavor f (q a root).
func (q *Node) ReclaimableIn(f int) GPUs {
	if f < len(q.Reclaimable) {
		return q.Reclaimable[f]
	}
	return 0
}

// Limit is the most of flavor f team q may ever use, or Unlimited.
func (q *Node) Limit(f int) GPUs {
	r := q.R(f)
	if q.Parent == nil {
		return r.Nominal
	}
	if r.Borrow == Unlimited {
		return Unlimited
	}
	return r.Nominal + r.Borrow
}
