package index

// While a trial runs (Begin to End) the index keeps a journal of what it
// changes (nodes moved between buckets, domains between the level's
// buckets), so that Rollback puts everything back exactly as it was, down to
// the order of the nodes in each bucket. Putting a node's work back by
// listing it again would restore the sums but not that order (a removal
// moves the bucket's last node into the gap), and the order decides which of
// equally good nodes the next placement takes: a trial that fails would then
// change where later work lands. A trial builds no view: every group it
// changes is one the journal knows.

type opKind uint8

const (
	opAdd    opKind = iota // a node appended to g.buckets[key]
	opRemove               // node n (its group k) taken from g.buckets[key] at slot
	opInsert               // domain g appended to its level's bucket key
	opDelete               // domain g taken from its level's bucket key at slot
	opListed               // n was listed (key 1) or not (key 0)
)

type op struct {
	kind opKind
	g    *Group
	key  int
	slot int32
	n    *Node
	k    int32
}

// Begin starts a trial: changes are journaled until End.
func (ix *Index) Begin() { ix.trial = true }

// End ends the trial and forgets its journal: what it changed stays.
func (ix *Index) End() {
	ix.trial = false
	clear(ix.journal)
	ix.journal = ix.journal[:0]
}

// Mark is a point of the trial's journal to roll back to.
func (ix *Index) Mark() int { return len(ix.journal) }

func (ix *Index) note(o op) { ix.journal = append(ix.journal, o) }

// Rollback undoes the trial's changes since mark, the last first.
func (ix *Index) Rollback(mark int) {
	for i := len(ix.journal) - 1; i >= mark; i-- {
		o := &ix.journal[i]
		switch o.kind {
		case opAdd:
			b := o.g.buckets[o.key]
			o.g.buckets[o.key] = b[:len(b)-1]
			o.g.Free -= GPUs(o.key)
		case opRemove:
			g, m := o.g, Member{o.n.ID, o.k}
			b := g.buckets[o.key]
			if int(o.slot) < len(b) {
				moved := b[o.slot]
				b = append(b, moved)
				ix.nodes[moved.ID].slots[moved.k] = int32(len(b) - 1)
				b[o.slot] = m
			} else {
				b = append(b, m)
			}
			g.buckets[o.key] = b
			o.n.slots[o.k] = o.slot
			g.Free += GPUs(o.key)
		case opInsert:
			l := o.g.Level
			b := l.byFree[o.key]
			l.byFree[o.key] = b[:len(b)-1]
			if len(b) == 1 {
				l.nonzero[o.key/64] &^= 1 << (o.key % 64)
			}
			o.g.inLevel = false
		case opListed:
			o.n.Listed = o.key == 1
		case opDelete:
			g, l := o.g, o.g.Level
			b := l.byFree[o.key]
			if int(o.slot) < len(b) {
				moved := b[o.slot]
				b = append(b, moved)
				moved.lvlSlot = int32(len(b) - 1)
				b[o.slot] = g
			} else {
				b = append(b, g)
			}
			l.byFree[o.key] = b
			l.nonzero[o.key/64] |= 1 << (o.key % 64)
			g.lvlKey, g.lvlSlot, g.inLevel = o.key, o.slot, true
		}
		ix.journal[i] = op{}
	}
	ix.journal = ix.journal[:mark]
}
