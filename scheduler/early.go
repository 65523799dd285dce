package scheduler

// A team's stuck run is passed over in parts, between other teams' work,
// when teams of equal share take turns by submission: each part a pop of
// the team heap, the run's cache read again, a push. Yet where none of a
// run can start and the walk counts nothing in a row (a whole walk, no
// statuses), passing it over in one go decides the same, as long as nothing
// the run was found stuck on changes before the walk comes to its last
// part: passEarly passes it whole at once and counts it (what it skipped,
// the wake) when the walk comes to the team's next work. A step that
// changes what the run was stuck on (runCache.stillStuck no longer holds)
// cuts it back (cutEarly): what the walk came to before that step is
// counted; the rest goes back to the walk, to be bounded again in its turn,
// as the walk in parts would (TestSkippedRunsDecideAsTheWholeWalk: the
// decisions and wake of a walk that considers each workload, and each
// workload of a whole walk passed over or considered once).

// earlyPass is a run passed early: entries from to to of the cursor's list
// (the run's, from the cursor's head when it was passed).
type earlyPass struct {
	rc       *runCache
	tier     *tier
	from, to int
	// share is the team's share when it was passed: it moves only with
	// what the run was stuck on (the team's usage).
	share float64
	// free is whether one of the team's flavors held no reservation (what
	// a passed workload's wake reads: wakeBy).
	free bool
	// whole: the entries are the run as rc learnt it, none gone since.
	whole bool
}

// passEarly passes over c's run from its head to its end (as rc knows it)
// or, when some of it took a reservation since rc learnt it, to the first
// that holds one, found stuck; it returns how many entries that is. They
// are counted when the walk comes to c again (countEarly) or cut back
// (cutEarly).
func (s *Scheduler) passEarly(c *cursor, rc *runCache) int {
	from, to := c.i-1, rc.b.last+1
	if rc.reserves != c.t.queue.reserves {
		for i := from; i < to; i++ {
			if e := &c.list[i]; !e.gone && e.mustConsider() {
				to = i
				break
			}
		}
	}
	whole := rc.unchanged(&c.t.queue) && from == rc.start && to == rc.b.last+1
	c.early = earlyPass{rc: rc, tier: c.head.tier, from: from, to: to, share: c.t.share, free: anyUnreserved(c.t), whole: whole}
	s.early = append(s.early, c)
	if s.test != nil && s.test.passedEarly != nil {
		s.test.passedEarly()
	}
	rc.passTo(c, to)
	return to - from
}

// countEarly counts c's run passed early, up to entry upto: the workloads
// skipped and their wake.
func (s *Scheduler) countEarly(c *cursor, upto int, res *Results) {
	p := &c.early
	n, wake := 0, noPassedWake()
	if p.whole && upto == p.to {
		n, wake = p.rc.b.n, p.rc.wake(s)
	} else {
		for i := p.from; i < upto; i++ {
			if e := &c.list[i]; !e.gone {
				wake.add(s, e.since)
				n++
			}
		}
	}
	s.wakePassedIf(c.t, p.tier, wake, p.free)
	res.Skipped += n
	c.early = earlyPass{}
}

// doneEarly counts c's run passed early, if any: the walk came to c's
// work after it, so came to every part of it.
func (s *Scheduler) doneEarly(c *cursor, res *Results) {
	if c.early.rc != nil {
		s.countEarly(c, c.early.to, res)
	}
}

// walked is the workload a walk came to last, with its team's share then.
// The walk comes to its workloads in their order, each after the last,
// but where a team's work was put ahead of its queue (entry.ahead: before
// work submitted earlier) or a preemption lowered shares: a run passed
// early is cut back at the last one it came to before either (walkTo,
// cutEarly), so that what it passes is always what the walk in parts had
// passed by then.
type walked struct {
	t     *team
	share float64
	e     *entry
}

// walkTo notes that the walk came to c's head, popped from the team heap
// or after c's last. A head put ahead starts a stretch where the walk may
// go back (c's work after it may come before it): the runs passed early
// are cut back there and none is passed early until the walk pops the
// next team from the heap, which comes after all c passed. It returns
// whether a cursor in h went back (h is then to be ordered again).
func (s *Scheduler) walkTo(c *cursor, popped bool, h *teamHeap, res *Results) (moved bool) {
	s.walked = walked{t: c.t, share: c.t.share, e: c.head}
	if popped {
		s.noEarly = false
	}
	if c.head.ahead {
		s.noEarly = true
		if len(s.early) > 0 {
			moved = s.cutEarly(true, h, res)
		}
	}
	return moved
}

// cutEarly cuts back the runs passed early whose step just taken (of the
// workload the walk came to last) changed what they were stuck on, or all
// of them: the walk in parts came to those of their workloads the last
// comes before only after it, and bounds them again. It returns
// whether a cursor in h went back (h is then to be ordered again); one
// that had come to its end is pushed.
func (s *Scheduler) cutEarly(all bool, h *teamHeap, res *Results) (moved bool) {
	l := &s.walked
	kept := s.early[:0]
	for _, c := range s.early {
		p := &c.early
		if p.rc == nil {
			continue // counted since
		}
		if !all && p.rc.stillStuck(c.t, s.cycles) {
			kept = append(kept, c)
			continue
		}
		cut, to := p.from, p.to
		for ; cut < to; cut++ {
			if e := &c.list[cut]; !e.gone && comesBeforeAt(l.t, l.share, l.e, c.t, p.share, e) {
				break
			}
		}
		s.countEarly(c, cut, res) // clears c.early
		if cut == to {
			continue
		}
		inHeap := c.cur != nil
		c.i, c.tier = cut, nil
		c.next()
		if inHeap {
			moved = true
		} else {
			h.push(c)
		}
	}
	clear(s.early[len(kept):])
	s.early = kept
	return moved
}

// endEarly counts the runs passed early still uncounted as the walk ends.
func (s *Scheduler) endEarly(res *Results) {
	for _, c := range s.early {
		s.doneEarly(c, res)
	}
	clear(s.early)
	s.early, s.walked, s.noEarly = s.early[:0], walked{}, false
}
