package scheduler

import (
	"cmp"
	"slices"
	"time"
)

type state uint8

const (
	statePending state = iota
	stateAdmitted
	stateGone
)

// workload is the scheduler's record of a Workload. What a preemption search
// reads of every running workload it tries (its team, tier and flavor, where
// its pods run, their size) comes first, in one cache line: a busy fleet runs
// tens of thousands of workloads, and a search tries hundreds. (What a walk
// reads of the pending ones is in their queue entries.)
type workload struct {
	team       *team
	tier       *tier
	flavor     *flavorState
	placements []placement
	// gpp is spec.GPUsPerPod.
	gpp GPUs
	// gen counts the times the workload entered its queue; an entry of an
	// earlier generation is a gap.
	gen   uint32
	state state
	// ahead puts a workload requeued after a hardware fault ahead of its tier.
	ahead bool
	// pbuf holds the placement of a workload on one node, next to the
	// fields above (a slice of its own is one more miss for a search).
	pbuf     [1]placement
	reserved []*node
	// since is when the workload last entered its queue (unixNanos): a walk
	// compares it with the cycle's cuts (setNow) for every workload it
	// passes.
	since     int64
	notBefore time.Time
	// pending state.
	reason PendingReason
	spec   Workload
	seq    int64
	// admission, when admitted (flavor and placements above).
	domain     *Domain
	admittedAt time.Time
	started    bool
	// drained: admitted on nodes reserved for it (after draining them).
	drained bool
	// restored: admitted by Restore, where it already ran, rules or not.
	restored bool
	restarts int
	timeouts int
	// shape and class (the shape whatever its pod count and tier) are shared
	// with the workloads like it: a cycle tries one of them at a time.
	shape, class *shapeInfo
	// cands are the flavors w may use, in the order they are tried.
	cands []*flavorState
	// seen is the last cycle that considered w; said when its reason was
	// last worked out (considered, or passed over: reexplain).
	seen uint64
	said time.Time
	// searchFails are its preemption searches that failed (memo.go).
	searchFails []searchFail
}

func (w *workload) GPUs() GPUs { return w.spec.GPUs() }

type placement struct {
	node *node
	pods int64
}

type tier struct {
	spec Tier
	// id is its place among the configuration's tiers.
	id int
}

// before orders workloads of one team: higher tier, requeued after a fault, earlier
// submission, then arrival.
func before(a, b *workload) int {
	ea, eb := entryOf(a), entryOf(b)
	return entryOrder(&ea, &eb)
}

// queue holds a team's pending workloads: items in order (with gaps left by
// workloads that left, compacted once a quarter may be gaps) and incoming ones
// not yet merged.
type queue struct {
	items    []entry
	incoming []entry
	// ver changes whenever a workload joins or leaves the queue or items
	// (or takes or gives back a reservation): what skipRun learnt of a run
	// holds while it does not. layout changes with ver but for a leave
	// (an entry marked gone) and a reservation taken or given back (an
	// entry's held): a run's bound learnt before still bounds the
	// workloads of the run that stay (skip.go).
	ver, layout uint64
	// reserves changes with ver when a workload takes or gives back a
	// reservation.
	reserves uint64
	// merged are where the last merge put the incoming, in order: before
	// the item then at each position; mergedAt is the layout it made. A
	// run learnt on the layout before moves by them (skip.go).
	merged   []int
	mergedAt uint64
	// left counts the workloads that left since items was last compacted
	// (at most the gaps in it).
	left int
}

// entry is a workload in a queue as it joined it: a later generation of the
// workload makes it a gap. It keeps the workload's order (ahead may change
// once the entry is a gap, so that items stay in order, gaps included) and
// what it asks, which do not change while it is live: merges and walks read
// them in order from the queue rather than from each workload. It also
// mirrors what a run's scan (skip.go) reads of a pending workload: whether it
// left the queue (gone), holds a reservation (held) or was considered (seen:
// its reason is not Queued), since when it waits and its backoff. The queue
// keeps the mirror as the workload changes (leave, note), so that a scan of
// tens of thousands of pending workloads reads the queue alone
// (checkQueues in the tests holds them equal).
type entry struct {
	w                       *workload
	gen                     uint32
	ahead, gone, held, seen bool
	// rules: the workload has placement rules (a view of its own).
	rules bool
	// shape is the workload's (setShape): the walk reads its failure in
	// the cycle from the entry (failsAsShape).
	shape *shapeInfo
	tier  *tier
	seq   int64
	// submitted and sub (unixNanos) are the submission: a walk orders
	// and compares by sub, by submitted only where two sub tie
	// (subBefore). since and notBefore (unixNanos) are the workload's.
	submitted time.Time
	sub       int64
	since     int64
	notBefore int64
	pods      int64
	gpp       GPUs
	require   string
}

func (e *entry) live() bool { return e.w.gen == e.gen && e.w.state == statePending }

func byEntry(a, b entry) int { return entryOrder(&a, &b) }

// entryOrder orders entries as before orders their workloads.
func entryOrder(a, b *entry) int {
	if c := cmp.Compare(b.tier.spec.Priority, a.tier.spec.Priority); c != 0 {
		return c
	}
	if a.ahead != b.ahead {
		if a.ahead {
			return -1
		}
		return 1
	}
	if c := cmpSub(a, b); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// cmpSub compares the submissions of entries a and b: by their nanoseconds,
// by the times where those tie (unixNanos holds a time to what an int64
// holds, so two far from now may tie there).
func cmpSub(a, b *entry) int {
	if a.sub != b.sub {
		return cmp.Compare(a.sub, b.sub)
	}
	return a.submitted.Compare(b.submitted)
}

// subBefore says whether submission a (an in unixNanos) comes before b.
func subBefore(an int64, a time.Time, bn int64, b time.Time) bool {
	if an != bn {
		return an < bn
	}
	return a.Before(b)
}

// entryOf is w's entry as it would join its queue now.
func entryOf(w *workload) entry {
	return entry{w: w, gen: w.gen, ahead: w.ahead, held: w.reserved != nil, seen: w.reason.Code != ReasonQueued,
		tier: w.tier, seq: w.seq, submitted: w.spec.Submitted, sub: unixNanos(w.spec.Submitted), since: w.since, notBefore: unixNanos(w.notBefore),
		pods: w.spec.Pods, gpp: w.spec.GPUsPerPod, require: w.spec.Require, rules: w.spec.Rules != nil, shape: w.shape}
}

// find returns w's live entry: in items by binary search (items are in
// order, gaps included, and w's order has not changed since it joined),
// else among the incoming; nil when w has none.
func (q *queue) find(w *workload) *entry {
	key := entryOf(w)
	lo, hi := 0, len(q.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entryOrder(&q.items[m], &key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	// Entries of w's earlier generations (gaps) compare equal to it.
	for i := lo; i < len(q.items) && entryOrder(&q.items[i], &key) == 0; i++ {
		if e := &q.items[i]; e.w == w && e.gen == w.gen {
			return e
		}
	}
	for i := len(q.incoming) - 1; i >= 0; i-- {
		if e := &q.incoming[i]; e.w == w && e.gen == w.gen {
			return e
		}
	}
	return nil
}

// note copies into w's entry what can change of w while it waits: its
// reservation, whether it was considered, its backoff.
func (q *queue) note(w *workload) {
	if e := q.find(w); e != nil {
		e.held, e.seen, e.notBefore = w.reserved != nil, w.reason.Code != ReasonQueued, unixNanos(w.notBefore)
	}
}

// setReason gives pending w the reason it waits for; its queue entry notes
// when it was first considered (its reason is no longer Queued).
func (s *Scheduler) setReason(w *workload, r PendingReason) {
	was := w.reason.Code != ReasonQueued
	w.reason = r
	if now := r.Code != ReasonQueued; now != was && w.state == statePending {
		w.team.queue.note(w)
	}
}

// changed notes that entries joined or moved (ver, layout).
func (q *queue) changed() { q.ver, q.layout = q.ver+1, q.layout+1 }

// held notes that w took or gave back a reservation (ver, reserves; w's
// entry, while it waits).
func (q *queue) held(w *workload) {
	q.ver, q.reserves = q.ver+1, q.reserves+1
	if w.state == statePending {
		q.note(w)
	}
}

// push adds w to the incoming, which no run holds until they merge: ver
// changes, not layout.
func (q *queue) push(w *workload) {
	q.ver++
	w.gen++
	q.incoming = append(q.incoming, entryOf(w))
}

// merge sorts the incoming workloads into items: each after the items that
// come before it (a binary search), the items after it moved up in one copy,
// from the last incoming to the first. A merge costs O(k log n) comparisons
// for k incoming, not a walk of the queue.
func (q *queue) merge() {
	if len(q.incoming) == 0 {
		return
	}
	slices.SortFunc(q.incoming, byEntry)
	q.tidy()
	q.changed()
	n, k := len(q.items), len(q.incoming)
	q.items = slices.Grow(q.items, k)[:n+k]
	q.merged = slices.Grow(q.merged[:0], k)[:k]
	hi := n // items[:hi] are still where they were
	for j := k - 1; j >= 0; j-- {
		e := q.incoming[j]
		i, _ := slices.BinarySearchFunc(q.items[:hi], e, func(x, e entry) int {
			if byEntry(x, e) <= 0 {
				return -1
			}
			return 1
		})
		copy(q.items[i+j+1:], q.items[i:hi])
		q.items[i+j] = e
		q.merged[j] = i
		hi = i
	}
	q.mergedAt = q.layout
	clear(q.incoming)
	q.incoming = q.incoming[:0]
}

// leave notes that pending w left the queue (admitted or gone): its entry
// is a gap now. at, if not nil, may be the entry (a walk's head).
func (q *queue) leave(w *workload, at *entry) {
	e := at
	if e == nil || e.w != w || e.gen != w.gen {
		e = q.find(w)
	}
	if e != nil && !e.gone {
		e.gone = true
		q.ver++
		q.left++
	}
}

// tidy compacts items once a quarter of it may be gaps: a walk steps over
// a gap for the price of a look, and compacting costs the whole list.
func (q *queue) tidy() {
	if q.left*4 >= len(q.items) {
		q.compact()
	}
}

// compact drops the gaps from items.
func (q *queue) compact() {
	q.left = 0
	live := q.items[:0]
	for i := range q.items {
		if !q.items[i].gone {
			live = append(live, q.items[i])
		}
	}
	if len(live) < len(q.items) {
		q.changed()
	}
	clear(q.items[len(live):])
	q.items = live
}

// cursor walks one team's list during a cycle; cur is its head, the next
// workload still pending in it (nil at the end).
type cursor struct {
	t    *team
	list []entry
	i    int
	cur  *workload
	// head is cur's entry in list: the walk orders and sorts cursors by
	// their heads without reading the workloads.
	head *entry
	// tier is the tier of the last run skipRun looked at; recheck: look
	// again after the workload it stopped at.
	tier    *tier
	recheck bool
	// early is the run it passed early, not yet counted (passEarly).
	early earlyPass
}

// next moves cur to the next pending workload of the list: the next entry
// not gone. (The entries after the cursor's do not leave the queue in its
// walk: a workload leaves it when the walk admits it, as the cursor's head.)
func (c *cursor) next() {
	for ; c.i < len(c.list); c.i++ {
		if e := &c.list[c.i]; !e.gone {
			c.cur, c.head = e.w, e
			c.i++
			return
		}
	}
	c.cur, c.head = nil, nil
}

// teamHeap orders the teams' cursors: the head's tier first, then the team's
// weighted share (smallest first), then the head's submission time.
type teamHeap []*cursor

func (h teamHeap) less(i, j int) bool { return first(h[i], h[j]) }

// first says whether cursor x's head comes before y's. Team names are
// unique, so two cursors are never tied.
func first(x, y *cursor) bool { return comesBefore(x.t, x.head, y.t, y.head) }

// comesBefore says whether the workload of entry a of team at comes before
// b's of bt in a walk: by tier, then the team's share, then the submission,
// then the team's name.
func comesBefore(at *team, a *entry, bt *team, b *entry) bool {
	return comesBeforeAt(at, at.share, a, bt, bt.share, b)
}

// comesBeforeAt is comesBefore with the teams' shares as given.
func comesBeforeAt(at *team, ashare float64, a *entry, bt *team, bshare float64, b *entry) bool {
	if a.tier.spec.Priority != b.tier.spec.Priority {
		return a.tier.spec.Priority > b.tier.spec.Priority
	}
	if ashare != bshare {
		return ashare < bshare
	}
	if c := cmpSub(a, b); c != 0 {
		return c < 0
	}
	return at.spec.Name < bt.spec.Name
}

func (h *teamHeap) push(c *cursor) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

func (h *teamHeap) pop() *cursor {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	c := old[n]
	*h = old[:n]
	h.down(0)
	return c
}

func (h teamHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h teamHeap) down(i int) { siftDown(h, i, first) }

// init restores the heap's order after the teams' shares moved.
func (h teamHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
