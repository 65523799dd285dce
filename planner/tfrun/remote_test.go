package tfrun

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/allot-dev/allot/planner/tfrun/statetest"
)

// TestStaleLockRemote kills terraform mid-apply with a remote backend, whose
// lock outlives its holder: the next plan fails with a *LockError naming the
// dead run's lock, which the runner does not release by itself; ForceUnlock
// with another ID leaves it, with its ID releases it, and the next run
// converges.
func TestStaleLockRemote(t *testing.T) {
	l := newLab(t)
	srv := statetest.New(t)
	l.backend = srv.Backend()
	ctx := context.Background()
	r, _ := l.applied(ctx, map[string]int64{"a100": 1})

	done := blockedApply(t, l, ctx, r)
	held := srv.Held()
	if held == "" {
		t.Fatal("the apply holds no lock")
	}
	if err := syscall.Kill(terraformPID(t, l.dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("a killed apply reported success")
	}

	r = l.runner(ctx)
	_, err := r.Plan(ctx, PlanOptions{})
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("plan after the kill: %v, want a *LockError", err)
	}
	if le.ID != held {
		t.Errorf("lock error names lock %q, the dead run held %q", le.ID, held)
	}
	if srv.Held() != held {
		t.Fatalf("the lock was released without an operator")
	}
	// An operator names a lock that is not the one held (e.g. one released
	// and taken again since): nothing is released.
	err = r.ForceUnlock(ctx, "00000000-0000-0000-0000-000000000000")
	if !errors.As(err, &le) || le.ID != held || srv.Held() != held {
		t.Errorf("force-unlock of another lock: %v; lock held %q", err, srv.Held())
	}
	if err := r.ForceUnlock(ctx, le.ID); err != nil {
		t.Fatalf("force-unlock: %v", err)
	}
	if srv.Held() != "" {
		t.Errorf("lock %s still held after the operator released it", srv.Held())
	}
	afterInterruption(t, l)
	if srv.Held() != "" {
		t.Errorf("lock %s held after the run", srv.Held())
	}
	// Releasing a lock that is no longer there is no error.
	if err := r.ForceUnlock(ctx, held); err != nil {
		t.Errorf("force-unlock of a released lock: %v", err)
	}
}
