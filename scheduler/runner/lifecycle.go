package runner

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// phase is where a gang stands with the core.
type phase uint8

const (
	// idle: not in the core (waiting for its pods, or invalid).
	idle phase = iota
	// queued: submitted, pending in the core.
	queued
	// admitted: placed by the core; its pods are bound, being bound, or waiting
	// for their preempted victims to leave.
	admitted
)

// lifecycle is a gang's standing with the core as the runner tracks it, kept
// apart from the API so that it is decided in one place: on takes a fact and
// says what the runner must do about it. It holds no pods and does no I/O.
type lifecycle struct {
	phase phase
	// slots are the pods per node the core admitted the gang to.
	slots map[string]int64
	// fresh: admitted and not yet bound whole; a refused bind rolls it back.
	fresh bool
	// waitFor holds the victims' pods that must be gone before the gang binds.
	waitFor map[types.UID]bool
	// started: every pod of the admitted gang runs (pod status), and the core
	// was told so; until then the gang timeout counts.
	started bool
	// refusals counts the binds of the gang refused in a row; retryAt is when
	// the gang, should it have left the core meanwhile (its pods made again),
	// may be submitted again.
	refusals int
	retryAt  time.Time
}

// factKind says what happened to a gang.
type factKind uint8

const (
	// factSubmitted: the core queued the gang.
	factSubmitted factKind = iota
	// factAdmitted: the core placed the gang in slots; victims' pods must go
	// first.
	factAdmitted
	// factRestored: the gang was found bound whole in slots (a restart): the
	// core counts it as running.
	factRestored
	// factBound: a batch of the gang's binds came back (refused, and binding:
	// how many are still in flight).
	factBound
	// factObserved: the pods changed; running of pods are bound and running.
	factObserved
	// factRequeued: the core took the admission back (the gang timeout), or
	// the runner did (pods left before their bind).
	factRequeued
	// factLeft: the gang left the core (finished, evicted, preempted, or to
	// be decided again).
	factLeft
)

// fact is what the runner tells a gang's lifecycle; only the fields of its
// kind are read.
type fact struct {
	kind    factKind
	slots   map[string]int64
	victims []types.UID
	refused bool
	binding int
	running int64
	pods    int64
	now     time.Time
	backoff time.Duration
}

// effect is what the runner must do after a fact.
type effect uint8

const (
	// none: nothing beyond the new state.
	none effect = iota
	// rollBack: take back what was bound and requeue the gang in the core;
	// it waits its backoff.
	rollBack
	// boundWhole: every pod is bound (or a running gang's replacements are);
	// say so on each.
	boundWhole
	// tellStarted: tell the core every pod runs; the gang timeout stops.
	tellStarted
)

// on is the lifecycle's one transition function.
func (l *lifecycle) on(f fact) effect {
	switch f.kind {
	case factSubmitted:
		l.reset(queued)
	case factAdmitted:
		l.reset(admitted)
		l.slots, l.fresh = f.slots, true
		l.waitFor = map[types.UID]bool{}
		for _, uid := range f.victims {
			l.waitFor[uid] = true
		}
	case factRestored:
		l.reset(admitted)
		l.slots, l.started = f.slots, true
	case factBound:
		switch {
		case l.phase != admitted:
		case f.refused && l.fresh:
			l.reset(queued)
			l.refusals++
			l.retryAt = f.now.Add(f.backoff << min(l.refusals-1, 16))
			return rollBack
		case !f.refused && f.binding == 0:
			l.fresh = false
			return boundWhole
		}
	case factObserved:
		if l.phase == admitted && !l.fresh && !l.started && f.binding == 0 && f.pods > 0 && f.running >= f.pods {
			l.started, l.refusals = true, 0
			return tellStarted
		}
	case factRequeued:
		l.reset(queued)
	case factLeft:
		l.reset(idle)
	}
	return none
}

// reset puts the lifecycle in phase p with no admission; the refusals in a
// row and their backoff stay.
func (l *lifecycle) reset(p phase) {
	l.phase, l.slots, l.waitFor, l.fresh, l.started = p, nil, nil, false, false
}
