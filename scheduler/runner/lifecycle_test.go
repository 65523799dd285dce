package runner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

// The gang lifecycle's transitions, from a state and a fact to a new state and
// an effect, without an API server.
func TestLifecycle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	slots := map[string]int64{"a-0": 2}
	admittedFresh := lifecycle{phase: admitted, slots: slots, fresh: true, waitFor: map[types.UID]bool{}}
	bound := lifecycle{phase: admitted, slots: slots, waitFor: map[types.UID]bool{}}
	for name, tc := range map[string]struct {
		from lifecycle
		fact fact
		want lifecycle
		eff  effect
	}{
		"submitted: queued": {
			lifecycle{}, fact{kind: factSubmitted}, lifecycle{phase: queued}, none,
		},
		"admitted: fresh, waiting for its victims": {
			lifecycle{phase: queued}, fact{kind: factAdmitted, slots: slots, victims: []types.UID{"v"}},
			lifecycle{phase: admitted, slots: slots, fresh: true, waitFor: map[types.UID]bool{"v": true}}, none,
		},
		"restored after a restart: counted as running": {
			lifecycle{}, fact{kind: factRestored, slots: slots},
			lifecycle{phase: admitted, slots: slots, started: true}, none,
		},
		"all binds back: bound whole, not yet started": {
			admittedFresh, fact{kind: factBound},
			bound, boundWhole,
		},
		"binds still in flight: nothing yet": {
			admittedFresh, fact{kind: factBound, binding: 1},
			admittedFresh, none,
		},
		"a refused bind of a fresh gang: rolled back, backoff": {
			admittedFresh, fact{kind: factBound, refused: true, now: t0, backoff: time.Second},
			lifecycle{phase: queued, refusals: 1, retryAt: t0.Add(time.Second)}, rollBack,
		},
		"refusals in a row double the backoff": {
			lifecycle{phase: admitted, slots: slots, fresh: true, refusals: 2}, fact{kind: factBound, refused: true, now: t0, backoff: time.Second},
			lifecycle{phase: queued, refusals: 3, retryAt: t0.Add(4 * time.Second)}, rollBack,
		},
		"a refused bind of a running gang's replacement: no rollback": {
			lifecycle{phase: admitted, slots: slots, started: true}, fact{kind: factBound, refused: true},
			lifecycle{phase: admitted, slots: slots, started: true}, none,
		},
		"binds back after the gang left: nothing": {
			lifecycle{phase: queued}, fact{kind: factBound, refused: true},
			lifecycle{phase: queued}, none,
		},
		"every pod running: started, refusals forgotten": {
			lifecycle{phase: admitted, slots: slots, refusals: 2}, fact{kind: factObserved, running: 2, pods: 2},
			lifecycle{phase: admitted, slots: slots, started: true}, tellStarted,
		},
		"bound but not all running: the gang timeout counts on": {
			bound, fact{kind: factObserved, running: 1, pods: 2},
			bound, none,
		},
		"running but not yet bound whole: not started": {
			admittedFresh, fact{kind: factObserved, running: 2, pods: 2},
			admittedFresh, none,
		},
		"started once only": {
			lifecycle{phase: admitted, slots: slots, started: true}, fact{kind: factObserved, running: 2, pods: 2},
			lifecycle{phase: admitted, slots: slots, started: true}, none,
		},
		"requeued by the gang timeout: queued, refusals kept": {
			lifecycle{phase: admitted, slots: slots, refusals: 1, retryAt: t0}, fact{kind: factRequeued},
			lifecycle{phase: queued, refusals: 1, retryAt: t0}, none,
		},
		"left the core: idle": {
			lifecycle{phase: admitted, slots: slots, started: true}, fact{kind: factLeft},
			lifecycle{phase: idle}, none,
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := tc.from
			eff := l.on(tc.fact)
			if eff != tc.eff {
				t.Errorf("effect %d, want %d", eff, tc.eff)
			}
			if diff := cmp.Diff(tc.want, l, cmp.AllowUnexported(lifecycle{})); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}
