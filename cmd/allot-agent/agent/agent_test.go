package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/fleet/health"
)

// TestAgentRecoversAfterReboot: a fatal fault stays, whatever the checks say,
// until the node's boot ID changes.
func TestAgentRecoversAfterReboot(t *testing.T) {
	r := newRig(t, health.DefaultThresholds(), Options{})
	r.watch(t)
	r.xid(t, 2, 79)
	rep := r.poll(t)
	if rep.Healthy || !rep.Fatal || rep.HealthyGPUs != 7 {
		t.Fatalf("after XID 79: %s", rep.Message)
	}
	for range 5 {
		r.clock.Add(time.Hour)
		if rep := r.poll(t); rep.Healthy || !rep.Fatal {
			t.Fatalf("a fatal fault cleared without a reboot after %s: %s", r.clock.Now().Sub(t0), rep.Message)
		}
	}
	r.pub.setFacts(func(f *Facts) { f.BootID = "boot-2" })
	r.clock.Add(time.Minute)
	rep, st := r.poll(t), r.agent.state
	if !rep.Healthy || rep.Fatal || rep.HealthyGPUs != 8 || len(st.Faults) != 0 || st.BootID != "boot-2" {
		t.Errorf("after the reboot: %s, state %+v", rep.Message, st)
	}
}

// TestAgentRecoversAfterPassing: a non-fatal fault counts after its debounce,
// then recovers once it has passed for RecoverAfter, and not before.
func TestAgentRecoversAfterPassing(t *testing.T) {
	p := health.DefaultThresholds() // temperature debounced for a minute, recovery after 10 minutes
	r := newRig(t, p, Options{})
	hot := func(c uint32) { r.srv.Edit(1, func(g *nvmltest.GPU) { g.TemperatureC = c }) }
	steps := []struct {
		at          time.Duration
		temperature uint32
		wantHealthy bool
		wantPhase   health.Phase // of GPU 1's Temperature fault; "" none
	}{
		{0, 95, true, health.Pending}, // not yet for the debounce time
		{59 * time.Second, 95, true, health.Pending},
		{time.Minute, 95, false, health.Active}, // counts
		{2 * time.Minute, 60, false, health.Recovering},
		{10*time.Minute + 59*time.Second, 60, false, health.Recovering},
		{11 * time.Minute, 60, true, ""},                // passed for 10 minutes since it last failed
		{12 * time.Minute, 95, true, health.Pending},    // a new failure starts its debounce again
		{12*time.Minute + 30*time.Second, 60, true, ""}, // a blip, forgotten
	}
	for _, s := range steps {
		r.clock.t = t0.Add(s.at)
		hot(s.temperature)
		rep := r.poll(t)
		var phase health.Phase
		for _, f := range rep.Faults {
			if f.GPU == 1 && f.Check == health.CheckTemperature {
				phase = f.Phase
			}
		}
		if rep.Healthy != s.wantHealthy || phase != s.wantPhase || len(rep.Faults) > 1 {
			t.Errorf("at +%s, %d C: healthy %v, phase %q, faults %+v; want healthy %v, phase %q",
				s.at, s.temperature, rep.Healthy, phase, rep.Faults, s.wantHealthy, s.wantPhase)
		}
	}
}

// TestAgentRestoresKeptState: a restarted agent takes the faults kept on the
// node for this boot, restarting their recovery clock, and forgets those of an
// earlier boot.
func TestAgentRestoresKeptState(t *testing.T) {
	kept := health.State{BootID: "boot-1", Faults: []health.Fault{
		{GPU: 4, Check: health.CheckXID, Fatal: true, Phase: health.Active, Detail: "XID 79 (GPU has fallen off the bus)", Since: t0.Add(-time.Hour), LastFailed: t0.Add(-time.Hour)},
		{GPU: 5, Check: health.CheckECC, Phase: health.Active, Detail: "1 uncorrectable ECC error", Since: t0.Add(-time.Hour), LastFailed: t0.Add(-time.Hour)},
	}}
	t.Run("same boot", func(t *testing.T) {
		r := newRig(t, health.DefaultThresholds(), Options{})
		r.pub.setFacts(func(f *Facts) { f.State = &kept })
		rep := r.poll(t)
		if rep.Healthy || !rep.Fatal || rep.HealthyGPUs != 6 || rep.Reason != "XID,ECC" {
			t.Fatalf("restored: %s %s", rep.Reason, rep.Message)
		}
		// The ECC fault passed an hour ago, but nobody watched: it recovers ten
		// minutes after the agent started, not at once.
		if f := rep.Faults[1]; f.Phase != health.Recovering || !f.LastFailed.Equal(t0) {
			t.Errorf("restored ECC fault %+v", f)
		}
		r.clock.Add(10 * time.Minute)
		if rep := r.poll(t); rep.Reason != "XID" || rep.HealthyGPUs != 7 {
			t.Errorf("ten minutes later: %s %s", rep.Reason, rep.Message)
		}
		// The kept state is read once: a later Load does not bring it back.
		if kept.Faults[1].LastFailed != t0.Add(-time.Hour) {
			t.Error("restoring changed the kept state")
		}
	})
	t.Run("earlier boot", func(t *testing.T) {
		r := newRig(t, health.DefaultThresholds(), Options{})
		r.pub.setFacts(func(f *Facts) { f.State = &kept; f.BootID = "boot-2" })
		if rep := r.poll(t); !rep.Healthy || rep.HealthyGPUs != 8 {
			t.Errorf("faults of an earlier boot came back: %s", rep.Message)
		}
	})
}

// TestAgentPollErrors: a node that cannot be read decides nothing and keeps
// the queued XIDs; a report that cannot be written is still remembered.
func TestAgentPollErrors(t *testing.T) {
	m := newTestMetrics(t)
	r := newRig(t, instant(), Options{Metrics: m.Metrics})
	r.watch(t)
	r.pub.loadErr = errTest
	r.xid(t, 0, 48)
	if _, err := r.agent.Poll(context.Background()); !errors.Is(err, errTest) {
		t.Fatalf("poll with an unreadable node: %v", err)
	}
	if len(r.pub.reports) != 0 {
		t.Fatalf("published without the node: %+v", r.pub.reports)
	}
	r.pub.loadErr, r.pub.pubErr = nil, errTest
	rep, err := r.agent.Poll(context.Background())
	if !errors.Is(err, errTest) || rep.Reason != "XID" {
		t.Fatalf("poll with an unwritable node: %v, %s", err, rep.Reason)
	}
	r.pub.pubErr = nil
	if rep := r.poll(t); rep.Reason != "XID" || !rep.Fatal {
		t.Errorf("the XID was lost with the failed write: %s", rep.Message)
	}
	m.want(t, "allot_agent_poll_errors_total", `allot_agent_poll_errors_total{node="n1"} 2`)
}

// TestAgentRun: Run polls at once, again as soon as an XID arrives (the
// interval here is an hour), and returns with its context, watcher stopped.
func TestAgentRun(t *testing.T) {
	srv, pub, clk := nvmltest.New(), newRecorder(), &clock{t: t0}
	closeLib, err := Open(srv, "mock")
	if err != nil {
		t.Fatal(err)
	}
	defer closeLib()
	w, err := NewWatcher(srv)
	if err != nil {
		t.Fatal(err)
	}
	a := New(NewReader(srv), w, instant(), pub, Options{Interval: time.Hour, Now: clk.Now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	waitPublished(t, pub)
	srv.XID(3, 74)
	waitPublished(t, pub)
	rep, _ := pub.last(t)
	if rep.Reason != "XID" || !strings.Contains(rep.Message, "GPU 3 XID: XID 74 (NVLink Error)") {
		t.Errorf("after XID 74: %s", rep.Message)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with its context")
	}
	w.Close()
	if len(pub.reports) != 2 {
		t.Errorf("%d reports, want 2 (start, XID)", len(pub.reports))
	}
}

func waitPublished(t *testing.T, pub *recorder) {
	t.Helper()
	select {
	case <-pub.published:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing published")
	}
}
