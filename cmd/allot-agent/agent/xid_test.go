package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/fleet/health"
)

// TestAgentXIDs delivers each XID through the NVML event set on GPU 2 and
// checks the classification: application XIDs are the job's fault and leave
// the GPU healthy; hardware XIDs mark it, fatal ones taint the node.
func TestAgentXIDs(t *testing.T) {
	tests := []struct {
		code      uint64
		class     health.XIDClass
		fatal     bool
		described string
	}{
		{13, health.XIDApplication, false, "Graphics Engine Exception"},
		{31, health.XIDApplication, false, "GPU memory page fault"},
		{43, health.XIDApplication, false, "GPU stopped processing"},
		{45, health.XIDApplication, false, "Preemptive cleanup"},
		{48, health.XIDHardware, true, "Double Bit ECC Error"},
		{63, health.XIDHardware, false, "ECC page retirement or row remapping recording event"},
		{64, health.XIDHardware, true, "ECC page retirement or row remapper recording failure"},
		{74, health.XIDHardware, true, "NVLink Error"},
		{79, health.XIDHardware, true, "GPU has fallen off the bus"},
		{94, health.XIDHardware, false, "Contained ECC error"},
		{95, health.XIDHardware, true, "Uncontained ECC error"},
		{119, health.XIDHardware, true, "GSP RPC Timeout"},
		{120, health.XIDHardware, true, "GSP Error"},
		{999, health.XIDHardware, false, "unlisted XID"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("XID %d", tc.code), func(t *testing.T) {
			r := newRig(t, instant(), Options{})
			r.watch(t)
			r.xid(t, 2, tc.code)
			rep := r.poll(t)
			if len(rep.XIDs) != 1 {
				t.Fatalf("XIDs %+v, want one", rep.XIDs)
			}
			x := rep.XIDs[0]
			if x.Code != tc.code || x.GPU != 2 || x.UUID != nvmltest.UUIDOf(2) || x.Class != tc.class || x.Fatal != tc.fatal || !x.Time.Equal(t0) {
				t.Errorf("XID finding %+v, want code %d on GPU 2 (%s) class %s fatal %v at %s", x, tc.code, nvmltest.UUIDOf(2), tc.class, tc.fatal, t0)
			}
			if tc.class == health.XIDApplication {
				checkFailures(t, rep, nil)
				if !rep.Healthy || rep.HealthyGPUs != 8 {
					t.Errorf("an application XID marked the node: %s", rep.Message)
				}
				return
			}
			checkFailures(t, rep, []failing{{GPU: 2, Check: health.CheckXID, Fatal: tc.fatal, Detail: fmt.Sprintf("XID %d (%s", tc.code, tc.described)}})
			if rep.Healthy || rep.Reason != "XID" || rep.HealthyGPUs != 7 || rep.Fatal != tc.fatal {
				t.Errorf("report %q, %d healthy, fatal %v: %s", rep.Reason, rep.HealthyGPUs, rep.Fatal, rep.Message)
			}
			// The XID is in the past once read; the GPU stays marked.
			if rep := r.poll(t); rep.Healthy || len(rep.XIDs) != 0 {
				t.Errorf("next poll: healthy %v, XIDs %+v", rep.Healthy, rep.XIDs)
			}
		})
	}
}

// TestAgentXIDOverrides: a cluster's override makes an application XID mark
// the GPU, and another cluster keeps the default.
func TestAgentXIDOverrides(t *testing.T) {
	o, err := health.ParseOverrides("xids.yaml", []byte("clusters:\n  onprem-a:\n    xids:\n      \"43\": {class: hardware}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for cluster, wantHealthy := range map[string]bool{"onprem-a": false, "gke-use1": true} {
		p := instant()
		p.XIDs = p.XIDs.With(o, cluster)
		r := newRig(t, p, Options{})
		r.watch(t)
		r.xid(t, 5, 43)
		if rep := r.poll(t); rep.Healthy != wantHealthy {
			t.Errorf("cluster %s: XID 43 healthy = %v, want %v (%s)", cluster, rep.Healthy, wantHealthy, rep.Message)
		}
	}
}

// TestAgentXIDWithoutGPU: an XID NVML ties to no GPU takes every GPU away.
func TestAgentXIDWithoutGPU(t *testing.T) {
	r := newRig(t, instant(), Options{})
	r.watch(t)
	r.xid(t, -1, 79)
	rep := r.poll(t)
	checkFailures(t, rep, []failing{{GPU: health.NodeGPU, Check: health.CheckXID, Fatal: true, Detail: "XID 79"}})
	if rep.HealthyGPUs != 0 || !rep.Fatal {
		t.Errorf("%d healthy, fatal %v: %s", rep.HealthyGPUs, rep.Fatal, rep.Message)
	}
}

// TestWatcher checks registration and that other events and wait errors do not
// become XIDs or stop the watcher.
func TestWatcher(t *testing.T) {
	srv := nvmltest.New()
	srv.Edit(3, func(g *nvmltest.GPU) { g.Fail[nvmltest.EventTypes] = nvml.ERROR_NOT_SUPPORTED })
	srv.Edit(4, func(g *nvmltest.GPU) { g.Fail[nvmltest.Handle] = nvml.ERROR_UNKNOWN })
	srv.Edit(5, func(g *nvmltest.GPU) { g.Fail[nvmltest.RegisterEvents] = nvml.ERROR_NO_PERMISSION })
	// The first wait fails; the watcher says so and waits again.
	var once sync.Once
	inner := srv.EventSetCreateFunc
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set, ret := inner()
		m := set.(*mock.EventSet)
		wait := m.WaitFunc
		m.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
			failed := false
			once.Do(func() { failed = true })
			if failed {
				return nvml.EventData{}, nvml.ERROR_UNKNOWN
			}
			return wait(ms)
		}
		return m, ret
	}
	w, err := NewWatcher(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range nvmltest.GPUs {
		if want := i < 3 || i > 5; srv.Registered(i) != want {
			t.Errorf("GPU %d registered = %v, want %v", i, srv.Registered(i), want)
		}
	}
	unwatched := strings.Join(w.Unwatched, "; ")
	for _, want := range []string{"GPU 3: XID events not supported", "GPU 4: ", "GPU 5: registering XID events"} {
		if !strings.Contains(unwatched, want) {
			t.Errorf("unwatched %q does not say %q", unwatched, want)
		}
	}
	if len(w.Unwatched) != 3 {
		t.Errorf("unwatched %q, want 3", w.Unwatched)
	}

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan health.XIDEvent, 4)
	errs := make(chan error, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() time.Time { return t0 }, func(e health.XIDEvent) { got <- e }, func(err error) { errs <- err })
	}()
	srv.Event(nvml.EventData{EventType: nvml.EventTypeSingleBitEccError, EventData: 1})
	srv.XID(6, 79)
	select {
	case e := <-got:
		if e != (health.XIDEvent{GPU: 6, UUID: nvmltest.UUIDOf(6), Code: 79, Time: t0}) {
			t.Errorf("event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no XID after a failed wait")
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "waiting for XID events") {
			t.Errorf("wait error %v", err)
		}
	default:
		t.Error("the failed wait was not reported")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not stop with its context")
	}
	if len(got) != 0 {
		t.Errorf("the ECC event became an XID: %+v", <-got)
	}
}

func TestNewWatcherErrors(t *testing.T) {
	srv := nvmltest.New()
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	if _, err := NewWatcher(srv); err == nil || !strings.Contains(err.Error(), "creating the NVML event set") {
		t.Errorf("no event set: %v", err)
	}
	srv = nvmltest.New()
	srv.FailCount(nvml.ERROR_UNKNOWN)
	if _, err := NewWatcher(srv); err == nil || !strings.Contains(err.Error(), "counting GPUs") {
		t.Errorf("no GPU count: %v", err)
	}
}
