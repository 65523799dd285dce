package scheduler

import (
	"cmp"
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

var preemptCases = flag.Int("preempt-cases", 400, "random cohorts TestPreemptionAgainstBruteForce tries")

// running is one admitted workload as the brute force sees it.
type running struct {
	id   WorkloadID
	team TeamName
	tier Tier
	gpus GPUs
}

// cohortState is what the brute force knows: the teams' nominals and
// borrowing limits, what runs, and the free GPUs (every node of one GPU).
type cohortState struct {
	nominal, limit map[TeamName]GPUs // limit: -1 when unlimited
	run            []running
	free           GPUs
}

// valid says whether evicting the running work of mask lets w (team t, tier
// p, need GPUs) run by the rules docs/scheduling.md states: its own team's
// lower preemptible tiers; another team's borrowOnly work, and no more of
// its other work than it uses above its nominal; a reclaim only when t ends
// within its nominal (every bound on the state after all the evictions);
// the cohort's quota and t's borrowing limit kept; enough free GPUs.
func (c *cohortState) valid(mask uint, t TeamName, p Tier, need GPUs) bool {
	usage, plain := map[TeamName]GPUs{}, map[TeamName]GPUs{}
	var total, nominal GPUs
	for _, n := range c.nominal {
		nominal += n
	}
	for _, r := range c.run {
		usage[r.team] += r.gpus
		if !r.tier.BorrowOnly {
			plain[r.team] += r.gpus
		}
		total += r.gpus
	}
	excess := map[TeamName]GPUs{}
	for tm := range c.nominal {
		excess[tm] = max(0, plain[tm]-c.nominal[tm])
	}
	free, reclaim := c.free, false
	for i, r := range c.run {
		if mask&(1<<i) == 0 {
			continue
		}
		switch {
		case r.team == t:
			if !r.tier.Preemptible || r.tier.Priority >= p.Priority {
				return false
			}
		case r.tier.BorrowOnly:
			reclaim = true
		default:
			reclaim = true
			if excess[r.team] -= r.gpus; excess[r.team] < 0 {
				return false
			}
		}
		usage[r.team] -= r.gpus
		total -= r.gpus
		free += r.gpus
	}
	if free < need || total+need > nominal {
		return false
	}
	if reclaim {
		return usage[t]+need <= c.nominal[t]
	}
	return c.limit[t] < 0 || usage[t]+need <= c.limit[t]
}

// TestPreemptionAgainstBruteForce: over random cohorts (2-3 teams, nominals
// and borrowing limits), tiers and running work (single GPUs, so that
// placement is no part of it), a higher-tier workload is admitted in the
// cycle it arrives exactly when some set of victims the rules allow lets
// it run (a brute force over every subset of the running work), and its
// victims are such a set, no larger than the smallest. More cases:
// -preempt-cases.
func TestPreemptionAgainstBruteForce(t *testing.T) {
	for seed := range *preemptCases {
		rng := rand.New(rand.NewPCG(uint64(seed), 47))
		n := 3 + rng.IntN(6)
		cfg := Config{Cohorts: []Cohort{{Name: "c"}}}
		st := cohortState{nominal: map[TeamName]GPUs{}, limit: map[TeamName]GPUs{}}
		teams := 2 + rng.IntN(2)
		for i := range teams {
			name := fmt.Sprintf("t%d", i)
			var borrow *GPUs
			st.nominal[TeamName(name)], st.limit[TeamName(name)] = GPUs(rng.IntN(5)), -1
			if rng.IntN(3) == 0 {
				borrow = lim(GPUs(rng.IntN(3)))
				st.limit[TeamName(name)] = st.nominal[TeamName(name)] + *borrow
			}
			cfg.Teams = append(cfg.Teams, teamQ(name, "c", st.nominal[TeamName(name)], borrow, nil))
		}
		f := newFx(t, cfg, rack("n", "a", n, 1, 0, 0), noReserve())
		for i := range n {
			w := wl(fmt.Sprintf("r%d", i), fmt.Sprintf("t%d", rng.IntN(teams)), string(tiers[rng.IntN(len(tiers))].Name), 1, 1, i)
			f.submit(w)
			if res := f.cycle(i); len(res.Admitted) == 0 {
				f.finish(w.ID)
			}
		}
		for id := range f.admitted {
			x := f.s.workloads[id]
			st.run = append(st.run, running{id: id, team: x.team.spec.Name, tier: x.tier.spec, gpus: x.GPUs()})
		}
		slices.SortFunc(st.run, func(a, b running) int { return cmp.Compare(a.id, b.id) })
		st.free = GPUs(n) - GPUs(len(st.run))
		team := TeamName(fmt.Sprintf("t%d", rng.IntN(teams)))
		tier := tiers[rng.IntN(2)]
		need := GPUs(1 + rng.IntN(4))
		f.submit(wl("w", string(team), string(tier.Name), need, 1, 100))
		best := -1
		for mask := range uint(1) << len(st.run) {
			if st.valid(mask, team, tier, need) && (best < 0 || bits.OnesCount(mask) < best) {
				best = bits.OnesCount(mask)
			}
		}
		res := f.cycle(100)
		admitted := slices.ContainsFunc(res.Admitted, func(a Admission) bool { return a.Workload == "w" })
		if admitted != (best >= 0) {
			t.Fatalf("seed %d: w (%s, %s, %d GPUs) admitted = %v, brute force finds a victim set: %v (%d)\n%+v", seed, team, tier.Name, need, admitted, best >= 0, best, st)
		}
		if !admitted {
			continue
		}
		var mask uint
		for _, p := range res.Preempted {
			i := slices.IndexFunc(st.run, func(r running) bool { return r.id == p.Victim })
			if i < 0 || p.By != "w" {
				t.Fatalf("seed %d: preempted %s by %s, not running work by w", seed, p.Victim, p.By)
			}
			mask |= 1 << i
		}
		if !st.valid(mask, team, tier, need) || bits.OnesCount(mask) > best {
			t.Fatalf("seed %d: victims %v: allowed %v, %d where the brute force needs %d\n%+v", seed, res.Preempted, st.valid(mask, team, tier, need), bits.OnesCount(mask), best, st)
		}
		if err := f.s.checkInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}
