package scheduler

import "github.com/allot-dev/allot/scheduler/internal/quota"

// FlavorUsage is a team's use of one flavor.
type FlavorUsage struct {
	Flavor  Flavor
	Nominal GPUs
	// Used are the GPUs of the team's admitted workloads.
	Used GPUs
	// Borrowed is the part of Used the cohort may reclaim: above nominal, or in
	// borrowOnly tiers.
	Borrowed GPUs
	// Lent is the team's idle lendable nominal that other teams of its tree use,
	// the tree's borrowing shared among its lenders in proportion to what each
	// lends.
	Lent GPUs
}

// TeamUsage is what a team uses and what it waits for.
type TeamUsage struct {
	Team    TeamName
	Flavors []FlavorUsage
	// Admitted counts the team's admitted workloads.
	Admitted int64
	// Pending counts the team's pending workloads per tier.
	Pending map[TierName]int64
}

// Usage reports every team's usage, in team order.
func (s *Scheduler) Usage() []TeamUsage {
	// Per tree and flavor: what is borrowed and what could be lent.
	type key struct {
		root *quota.Node
		f    int
	}
	borrowed, lendable := map[key]GPUs{}, map[key]GPUs{}
	idle := func(t *team, f int) GPUs {
		r := t.q.R(f)
		free := max(0, r.Nominal-(r.Usage-r.BorrowOnly))
		if r.Lend != quota.Unlimited {
			free = min(free, r.Lend)
		}
		return free
	}
	for _, t := range s.teamList {
		if t.q.Parent == nil {
			continue
		}
		for _, f := range t.flavors {
			k := key{t.q.Root(), f.id}
			borrowed[k] += t.reclaimable(f.id)
			lendable[k] += idle(t, f.id)
		}
	}
	out := make([]TeamUsage, 0, len(s.teamList))
	for _, t := range s.teamList {
		u := TeamUsage{Team: t.spec.Name, Admitted: int64(len(t.running)), Pending: map[TierName]int64{}}
		for _, f := range t.flavors {
			r := t.q.R(f.id)
			fu := FlavorUsage{Flavor: f.name, Nominal: r.Nominal, Used: r.Usage, Borrowed: t.reclaimable(f.id)}
			if t.q.Parent != nil {
				k := key{t.q.Root(), f.id}
				if l := lendable[k]; l > 0 {
					// Others borrow what this team does not itself borrow.
					others := borrowed[k] - fu.Borrowed
					fu.Lent = min(idle(t, f.id), max(0, others)*idle(t, f.id)/l)
				}
			}
			u.Flavors = append(u.Flavors, fu)
		}
		for _, e := range t.queue.items {
			if e.live() {
				u.Pending[e.w.tier.spec.Name]++
			}
		}
		for _, e := range t.queue.incoming {
			if e.live() {
				u.Pending[e.w.tier.spec.Name]++
			}
		}
		out = append(out, u)
	}
	return out
}
