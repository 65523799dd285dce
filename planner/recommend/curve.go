package recommend

import (
	"fmt"
	"maps"
	"slices"

	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

// curve replays, per flavor, the recommended quotas of the flavor scaled
// together to steps sizes below and above the recommendation (one step is a
// tenth of it, at least one node), the other flavors as recommended.
func (s *searcher) curve(q vector, steps int) ([]CurvePoint, error) {
	w := s.w
	type point struct {
		f           schema.Flavor
		recommended bool
		v           vector
	}
	var points []point
	flavors := map[schema.Flavor][]int{}
	for i, p := range w.pairs {
		flavors[p.flavor] = append(flavors[p.flavor], i)
	}
	for _, f := range slices.Sorted(maps.Keys(flavors)) {
		idx := flavors[f]
		unit := w.unit(f)
		var total int64 // in nodes
		for _, i := range idx {
			total += q[i] / unit
		}
		step := max(1, (total+9)/10)
		capU := w.capUnits(f)
		for k := -steps; k <= steps; k++ {
			size := total + int64(k)*step
			if size < 0 || size > capU {
				continue
			}
			points = append(points, point{f: f, recommended: k == 0, v: scale(q, idx, unit, total, size)})
		}
	}
	vs := make([]vector, len(points))
	for i, p := range points {
		vs[i] = p.v
	}
	s.b.expect(len(vs))
	outs, err := s.evalAll(vs)
	if err != nil {
		return nil, err
	}
	out := make([]CurvePoint, 0, len(points))
	for i, p := range points {
		o := outs[i]
		fp := o.plan.Flavor(p.f)
		var cost quantity.Decimal
		for _, pp := range o.plan.Pools {
			if pp.Flavor == p.f {
				cost = cost.Add(pp.MonthlyUSD)
			}
		}
		out = append(out, CurvePoint{Flavor: p.f, NominalGPUs: fp.NominalGPUs, GPUs: fp.TargetGPUs, MonthlyUSD: cost,
			WaitP95S: finite(o.flavorP95[p.f]), Recommended: p.recommended, Preemptions: o.flavorPreempted[p.f], jobs: o.flavorJobs[p.f]})
	}
	explainRises(out)
	return out, nil
}

// explainRises gives each point whose p95 wait is longer than the next
// smaller size's of its flavor (points in order of size) the reason: the
// replay is the scheduler's, which places each job when it arrives and
// preempts to make room, so more nodes change where gangs land and whom they
// preempt; and a p95 over a hundred-odd jobs is one job's wait.
func explainRises(ps []CurvePoint) {
	longer := func(a, b *float64) bool { return a == nil && b != nil || a != nil && b != nil && *a > *b }
	for i := 1; i < len(ps); i++ {
		p, q := &ps[i], ps[i-1]
		if p.Flavor != q.Flavor || !longer(p.WaitP95S, q.WaitP95S) {
			continue
		}
		rank := p.jobs - (95*p.jobs+99)/100 + 1 // the p95 is the rank-th longest wait
		p.Why = fmt.Sprintf("longer than at %d GPUs (%s): the replay places each job when it arrives and preempts to make room, so more nodes change where gangs land and whom they preempt (%d preemptions of the flavor's jobs here, %d there); the p95 of %d jobs is its %s longest wait",
			q.GPUs, wait(q.WaitP95S), p.Preemptions, q.Preemptions, p.jobs, ordinal(rank))
	}
}

func ordinal(n int) string {
	if n == 1 {
		return "single"
	}
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// scale returns q with the pairs idx (of one flavor, in GPUs, whole nodes of
// unit GPUs) scaled from total nodes to size nodes: each gets its share rounded
// down, and the nodes left go to the largest remainders (ties to the first).
func scale(q vector, idx []int, unit, total, size int64) vector {
	out := slices.Clone(q)
	if total == size {
		return out
	}
	weights := make([]int64, len(idx))
	var sum int64
	for j, i := range idx {
		weights[j] = q[i] / unit
		sum += weights[j]
	}
	if sum == 0 { // nothing to scale from: share the size evenly
		for j := range weights {
			weights[j] = 1
		}
		sum = int64(len(idx))
	}
	type rem struct {
		j int
		r int64
	}
	var rems []rem
	left := size
	for j, i := range idx {
		share := size * weights[j] / sum
		out[i] = share * unit
		left -= share
		rems = append(rems, rem{j, size * weights[j] % sum})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return int(b.r - a.r) })
	for k := 0; left > 0 && k < len(rems); k++ {
		out[idx[rems[k].j]] += unit
		left--
	}
	return out
}
