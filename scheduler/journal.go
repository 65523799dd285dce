package scheduler

import "slices"

// While a preemption search evicts what-if, the scheduler keeps a journal of
// what that changes in the index (nodes moved between buckets, domains
// between the level's buckets, nodes' used GPUs and pods), so that a search
// that fails puts everything back exactly as it was, down to the order of
// the nodes in each bucket. Putting a victim back by binding it again would
// restore the sums but not that order (a removal moves the bucket's last
// node into the gap), and the order decides which of equally good nodes the
// next placement takes: a search that fails would then change where later
// work lands, and nothing could pass over a workload without searching for
// it (skip.go).

type opKind uint8

const (
	opAdd    opKind = iota // a node appended to g.buckets[key]
	opRemove               // node n (its group k) taken from g.buckets[key] at slot
	opInsert               // domain g appended to its level's bucket key
	opDelete               // domain g taken from its level's bucket key at slot
	opUsed                 // n.used was used
	opPod                  // n.pods held pod at slot
)

type indexOp struct {
	kind opKind
	g    *group
	key  int
	slot int32
	n    *node
	k    int32
	used GPUs
	pod  podRef
}

// note records op; the index calls it, before the change, while a search
// evicts what-if. (A search builds no view: preempt takes w's before it
// evicts anything, so every group a search changes is one the journal
// knows.)
func (s *Scheduler) note(op indexOp) { s.journal = append(s.journal, op) }

// noteRemove records that node n (its group k) is about to leave g's bucket
// of free GPUs f.
func (s *Scheduler) noteRemove(g *group, n *node, k int, f GPUs) {
	s.note(indexOp{kind: opRemove, g: g, key: int(f), slot: n.slots[k], n: n, k: int32(k)})
}

// rollback undoes the journal down to mark, last change first.
func (s *Scheduler) rollback(mark int) {
	for i := len(s.journal) - 1; i >= mark; i-- {
		op := &s.journal[i]
		switch op.kind {
		case opAdd:
			b := op.g.buckets[op.key]
			op.g.buckets[op.key] = b[:len(b)-1]
			op.g.free -= GPUs(op.key)
		case opRemove:
			g, m := op.g, member{op.n.id, op.k}
			b := g.buckets[op.key]
			if int(op.slot) < len(b) {
				moved := b[op.slot]
				b = append(b, moved)
				s.nodes[moved.id].slots[moved.k] = int32(len(b) - 1)
				b[op.slot] = m
			} else {
				b = append(b, m)
			}
			g.buckets[op.key] = b
			op.n.slots[op.k] = op.slot
			g.free += GPUs(op.key)
		case opInsert:
			l := op.g.level
			b := l.byFree[op.key]
			l.byFree[op.key] = b[:len(b)-1]
			if len(b) == 1 {
				l.nonzero[op.key/64] &^= 1 << (op.key % 64)
			}
			op.g.inLevel = false
		case opDelete:
			g, l := op.g, op.g.level
			b := l.byFree[op.key]
			if int(op.slot) < len(b) {
				moved := b[op.slot]
				b = append(b, moved)
				moved.lvlSlot = int32(len(b) - 1)
				b[op.slot] = g
			} else {
				b = append(b, g)
			}
			l.byFree[op.key] = b
			l.nonzero[op.key/64] |= 1 << (op.key % 64)
			g.lvlKey, g.lvlSlot, g.inLevel = op.key, op.slot, true
		case opUsed:
			op.n.used = op.used
		case opPod:
			op.n.pods = slices.Insert(op.n.pods, int(op.slot), op.pod)
		}
		s.journal[i] = indexOp{}
	}
	s.journal = s.journal[:mark]
}
