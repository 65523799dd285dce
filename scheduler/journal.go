package scheduler

import "slices"

// While a preemption search evicts what-if, the index journals what that
// changes in its buckets (scheduler/internal/index) and the scheduler what
// it changes of its nodes (their used GPUs and pods), so that a search that
// fails puts everything back exactly as it was, down to the order of the
// nodes in each bucket and of the pods on each node: that order decides
// which of equally good nodes the next placement takes, and a search that
// failed would otherwise change where later work lands, and nothing could
// pass over a workload without searching for it (skip.go).

// nodeOp is one change of a node a search made: its used GPUs were used
// (slot < 0), or it held pod at slot.
type nodeOp struct {
	n    *node
	used GPUs
	slot int32
	pod  podRef
}

// mark is a point of a search's journals to roll back to.
type mark struct{ index, nodes int }

func (s *Scheduler) note(op nodeOp) { s.journal = append(s.journal, op) }

func (s *Scheduler) mark() mark { return mark{s.ix.Mark(), len(s.journal)} }

// beginSearch starts a search's what-if evictions and its journals; endSearch
// ends them, keeping what was changed.
func (s *Scheduler) beginSearch() {
	s.searching = true
	s.ix.Begin()
}

func (s *Scheduler) endSearch() {
	s.searching = false
	s.ix.End()
	clear(s.journal)
	s.journal = s.journal[:0]
}

// rollback undoes the journals down to m, last change first.
func (s *Scheduler) rollback(m mark) {
	s.ix.Rollback(m.index)
	for i := len(s.journal) - 1; i >= m.nodes; i-- {
		op := &s.journal[i]
		if op.slot < 0 {
			op.n.used = op.used
		} else {
			op.n.pods = slices.Insert(op.n.pods, int(op.slot), op.pod)
		}
		s.journal[i] = nodeOp{}
	}
	s.journal = s.journal[:m.nodes]
}
