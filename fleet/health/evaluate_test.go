package health

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFaultClasses(t *testing.T) {
	type want struct {
		healthy bool
		fatal   bool
		reason  string
		healthyGPUs,
		gpus int
		// in is a fragment the message must hold.
		in string
	}
	ok := want{healthy: true, reason: ReasonHealthy, healthyGPUs: 8, gpus: 8, in: "8 of 8 GPUs healthy"}
	tests := map[string]struct {
		obs    Observation
		policy func(*Thresholds)
		want   want
	}{
		"all healthy":                     {obs: obsOf(8), want: ok},
		"application XID 13":              {obs: obsOf(8, xid(2, 13)), want: ok},
		"application XID 31":              {obs: obsOf(8, xid(2, 31)), want: ok},
		"application XID 43":              {obs: obsOf(8, xid(2, 43)), want: ok},
		"application XID 45":              {obs: obsOf(8, xid(2, 45)), want: ok},
		"hardware XID 48, fatal":          {obs: obsOf(8, xid(2, 48)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "GPU 2 XID: XID 48 (Double Bit ECC Error) (fatal"}},
		"hardware XID 63":                 {obs: obsOf(8, xid(2, 63)), want: want{reason: "XID", healthyGPUs: 7, gpus: 8, in: "XID 63"}},
		"hardware XID 64, fatal":          {obs: obsOf(8, xid(2, 64)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "XID 64"}},
		"hardware XID 74, fatal":          {obs: obsOf(8, xid(2, 74)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "XID 74 (NVLink Error)"}},
		"hardware XID 79, fatal":          {obs: obsOf(8, xid(2, 79)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "fallen off the bus"}},
		"hardware XID 94":                 {obs: obsOf(8, xid(2, 94)), want: want{reason: "XID", healthyGPUs: 7, gpus: 8, in: "Contained ECC"}},
		"hardware XID 95, fatal":          {obs: obsOf(8, xid(2, 95)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "Uncontained ECC"}},
		"hardware XID 119, fatal":         {obs: obsOf(8, xid(2, 119)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "GSP RPC Timeout"}},
		"hardware XID 120, fatal":         {obs: obsOf(8, xid(2, 120)), want: want{fatal: true, reason: "XID", healthyGPUs: 7, gpus: 8, in: "GSP Error"}},
		"unlisted XID marks the GPU":      {obs: obsOf(8, xid(5, 999)), want: want{reason: "XID", healthyGPUs: 7, gpus: 8, in: "XID 999 (unlisted XID)"}},
		"XIDs on two GPUs":                {obs: obsOf(8, xid(1, 94), xid(6, 79)), want: want{fatal: true, reason: "XID", healthyGPUs: 6, gpus: 8, in: "GPU 1 XID"}},
		"XID of a GPU NVML lost":          {obs: obsOf(8, func(o *Observation) { o.GPUs = o.GPUs[:7] }, xid(7, 79)), want: want{fatal: true, reason: "GPUCount,XID", healthyGPUs: 7, gpus: 8, in: "GPU 7 XID"}},
		"XID on no GPU in particular":     {obs: obsOf(8, xid(NodeGPU, 79)), want: want{fatal: true, reason: "XID", healthyGPUs: 0, gpus: 8, in: "node XID: XID 79"}},
		"uncorrectable ECC":               {obs: obsOf(8, onGPU(3, func(g *GPUReading) { g.ECCUncorrected = ptr(uint64(2)) })), want: want{reason: "ECC", healthyGPUs: 7, gpus: 8, in: "2 uncorrectable ECC errors"}},
		"retired pages pending":           {obs: obsOf(8, onGPU(3, func(g *GPUReading) { g.RetiredPagesPending = ptr(true) })), want: want{reason: "RetiredPages", healthyGPUs: 7, gpus: 8, in: "page retirement pending"}},
		"row remap pending":               {obs: obsOf(8, onGPU(3, func(g *GPUReading) { g.RowRemap.Pending = true })), want: want{reason: "RowRemap", healthyGPUs: 7, gpus: 8, in: "row remapping pending"}},
		"row remap failed, fatal":         {obs: obsOf(8, onGPU(3, func(g *GPUReading) { g.RowRemap = &RowRemap{Uncorrected: 512, Failed: true} })), want: want{fatal: true, reason: "RowRemap", healthyGPUs: 7, gpus: 8, in: "row remapping failed (512 rows"}},
		"a GPU fell off the bus, fatal":   {obs: obsOf(8, func(o *Observation) { o.GPUs = o.GPUs[1:] }), want: want{fatal: true, reason: "GPUCount", healthyGPUs: 7, gpus: 8, in: "7 of 8 GPUs visible"}},
		"no expected count: not checked":  {obs: obsOf(8, func(o *Observation) { o.ExpectedGPUs = 0 }), want: ok},
		"unreadable GPU":                  {obs: obsOf(8, onGPU(4, func(g *GPUReading) { g.Error = "ERROR_UNKNOWN" })), want: want{reason: "Readable", healthyGPUs: 7, gpus: 8, in: "GPU 4 Readable: ERROR_UNKNOWN"}},
		"lost GPU, fatal":                 {obs: obsOf(8, onGPU(4, func(g *GPUReading) { g.Error, g.Lost = "ERROR_GPU_IS_LOST", true })), want: want{fatal: true, reason: "Readable", healthyGPUs: 7, gpus: 8, in: "GPU_IS_LOST"}},
		"a reading that failed":           {obs: obsOf(8, onGPU(4, func(g *GPUReading) { g.Errors = map[Check]string{CheckECC: "ERROR_UNKNOWN"} })), want: want{reason: "ECC", healthyGPUs: 7, gpus: 8, in: "cannot read: ERROR_UNKNOWN"}},
		"GPUs cannot be listed":           {obs: obsOf(8, func(o *Observation) { o.GPUs, o.CountError = nil, "ERROR_DRIVER_NOT_LOADED" }), want: want{reason: "Readable", healthyGPUs: 0, gpus: 8, in: "cannot list the GPUs"}},
		"hot, over the GPU's slowdown":    {obs: obsOf(8, onGPU(0, func(g *GPUReading) { g.TemperatureC = ptr(uint32(91)) })), want: want{reason: "Temperature", healthyGPUs: 7, gpus: 8, in: "91 C, at or above 90 C"}},
		"hot, over the policy":            {obs: obsOf(8, onGPU(0, func(g *GPUReading) { g.TemperatureC = ptr(uint32(81)) })), policy: func(p *Thresholds) { p.MaxTemperatureC = 80 }, want: want{reason: "Temperature", healthyGPUs: 7, gpus: 8, in: "81 C, at or above 80 C"}},
		"warm, under both":                {obs: obsOf(8, onGPU(0, func(g *GPUReading) { g.TemperatureC = ptr(uint32(79)) })), policy: func(p *Thresholds) { p.MaxTemperatureC = 80 }, want: ok},
		"thermal throttling":              {obs: obsOf(8, onGPU(6, func(g *GPUReading) { g.Throttle = []ThrottleReason{ThrottleHWThermal} })), want: want{reason: "Throttle", healthyGPUs: 7, gpus: 8, in: "clocks held down: HwThermalSlowdown"}},
		"power-brake throttling":          {obs: obsOf(8, onGPU(6, func(g *GPUReading) { g.Throttle = []ThrottleReason{ThrottleHWPowerBrake} })), want: want{reason: "Throttle", healthyGPUs: 7, gpus: 8, in: "HwPowerBrakeSlowdown"}},
		"power cap is not a fault":        {obs: obsOf(8, onGPU(6, func(g *GPUReading) { g.Throttle = []ThrottleReason{ThrottleSWPowerCap, ThrottleSyncBoost} })), want: ok},
		"NVLink down, expected by policy": {obs: obsOf(8, onGPU(1, func(g *GPUReading) { g.NVLinks[4].Up = false })), policy: func(p *Thresholds) { p.NVLinksPerGPU = 12 }, want: want{reason: "NVLink", healthyGPUs: 7, gpus: 8, in: "11 of 12 NVLink links up (down: 4)"}},
		"not supported is not a fault": {obs: obsOf(8, func(o *Observation) {
			for i := range o.GPUs {
				g := &o.GPUs[i]
				g.ECCUncorrected, g.RetiredPagesPending, g.RowRemap, g.TemperatureC, g.SlowdownC, g.Throttle, g.NVLinks = nil, nil, nil, nil, nil, nil, nil
			}
		}), want: ok},
		"several checks on one GPU": {obs: obsOf(8, onGPU(2, func(g *GPUReading) {
			g.ECCUncorrected = ptr(uint64(1))
			g.RowRemap.Pending = true
		}), xid(2, 94)), want: want{reason: "XID,ECC,RowRemap", healthyGPUs: 7, gpus: 8, in: "GPU 2 ECC"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := instant()
			if tc.policy != nil {
				tc.policy(&p)
			}
			_, rep := Evaluate(State{}, tc.obs, t0, p)
			got := want{healthy: rep.Healthy, fatal: rep.Fatal, reason: rep.Reason, healthyGPUs: rep.HealthyGPUs, gpus: rep.GPUs, in: tc.want.in}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("report (-want +got):\n%s\nmessage: %s", diff, rep.Message)
			}
			if !strings.Contains(rep.Message, tc.want.in) {
				t.Errorf("message %q does not say %q", rep.Message, tc.want.in)
			}
		})
	}
}

func TestApplicationXIDsAreReportedNotCounted(t *testing.T) {
	_, rep := Evaluate(State{}, obsOf(2, xid(1, 13), xid(1, 79)), t0, instant())
	if len(rep.XIDs) != 2 || rep.XIDs[0].Class != XIDApplication || rep.XIDs[1].Class != XIDHardware || !rep.XIDs[1].Fatal {
		t.Fatalf("XIDs = %+v, want 13 application then 79 hardware fatal", rep.XIDs)
	}
	for _, r := range rep.Results {
		if r.Check == CheckXID && r.GPU == 1 && (r.Status != Fail || strings.Contains(r.Detail, "XID 13")) {
			t.Errorf("GPU 1 XID result %+v: want a failure naming 79 only", r)
		}
	}
}

func TestNVLinkLearnsItsBaseline(t *testing.T) {
	p := instant()
	st, rep := Evaluate(State{}, obsOf(2), t0, p)
	if !rep.Healthy || st.NVLinksUp[0] != 12 {
		t.Fatalf("first poll: healthy %v, baseline %v", rep.Healthy, st.NVLinksUp)
	}
	down := obsOf(2, onGPU(0, func(g *GPUReading) { g.NVLinks[3].Up, g.NVLinks[7].Up = false, false }))
	st, rep = Evaluate(st, down, t0.Add(time.Minute), p)
	if rep.Healthy || rep.Reason != "NVLink" || !strings.Contains(rep.Message, "10 of 12 NVLink links up (down: 3, 7)") {
		t.Fatalf("links down: %s: %s", rep.Reason, rep.Message)
	}
	// A reboot forgets the baseline along with the faults.
	st, rep = Evaluate(st, obsOf(2, func(o *Observation) { o.BootID = "boot-2" }, onGPU(0, func(g *GPUReading) { g.NVLinks = g.NVLinks[:10] })), t0.Add(2*time.Minute), p)
	if !rep.Healthy || st.NVLinksUp[0] != 10 {
		t.Fatalf("after reboot: healthy %v (%s), baseline %v", rep.Healthy, rep.Message, st.NVLinksUp)
	}
}

func TestRecovery(t *testing.T) {
	p := instant()
	p.RecoverAfter = 10 * time.Minute
	hot := obsOf(2, onGPU(1, func(g *GPUReading) { g.TemperatureC = ptr(uint32(95)) }))
	lostXID := obsOf(2, xid(0, 79))
	type step struct {
		obs         Observation
		at          time.Duration
		healthy     bool
		fatal       bool
		healthyGPUs int
		phase       Phase // of the first fault; "" when none is left
	}
	tests := map[string][]step{
		"a non-fatal fault clears after passing for RecoverAfter": {
			{obs: hot, at: 0, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2), at: time.Minute, healthyGPUs: 1, phase: Recovering},
			{obs: obsOf(2), at: 10*time.Minute - time.Second, healthyGPUs: 1, phase: Recovering},
			{obs: obsOf(2), at: 10 * time.Minute, healthy: true, healthyGPUs: 2},
		},
		"failing again restarts the clock": {
			{obs: hot, at: 0, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2), at: 5 * time.Minute, healthyGPUs: 1, phase: Recovering},
			{obs: hot, at: 6 * time.Minute, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2), at: 12 * time.Minute, healthyGPUs: 1, phase: Recovering},
			{obs: obsOf(2), at: 16 * time.Minute, healthy: true, healthyGPUs: 2},
		},
		"a fatal fault waits for a reboot": {
			{obs: lostXID, at: 0, fatal: true, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2), at: time.Hour, fatal: true, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2), at: 48 * time.Hour, fatal: true, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2, func(o *Observation) { o.BootID = "boot-2" }), at: 49 * time.Hour, healthy: true, healthyGPUs: 2},
		},
		"a fault seen again after a reboot counts again": {
			{obs: lostXID, at: 0, fatal: true, healthyGPUs: 1, phase: Active},
			{obs: obsOf(2, func(o *Observation) { o.BootID = "boot-2" }, xid(0, 79)), at: time.Hour, fatal: true, healthyGPUs: 1, phase: Active},
		},
	}
	for name, steps := range tests {
		t.Run(name, func(t *testing.T) {
			var st State
			for i, s := range steps {
				var rep Report
				st, rep = Evaluate(st, s.obs, t0.Add(s.at), p)
				phase := Phase("")
				if len(rep.Faults) > 0 {
					phase = rep.Faults[0].Phase
				}
				if rep.Healthy != s.healthy || rep.Fatal != s.fatal || rep.HealthyGPUs != s.healthyGPUs || phase != s.phase {
					t.Fatalf("step %d (+%s): healthy %v fatal %v healthyGPUs %d phase %q, want %v %v %d %q\n%s",
						i, s.at, rep.Healthy, rep.Fatal, rep.HealthyGPUs, phase, s.healthy, s.fatal, s.healthyGPUs, s.phase, rep.Message)
				}
			}
		})
	}
}

func TestDebounce(t *testing.T) {
	p := DefaultThresholds() // throttling counts after a minute
	throttled := obsOf(1, onGPU(0, func(g *GPUReading) { g.Throttle = []ThrottleReason{ThrottleHWThermal} }))
	st, rep := Evaluate(State{}, throttled, t0, p)
	if !rep.Healthy || len(rep.Faults) != 1 || rep.Faults[0].Phase != Pending {
		t.Fatalf("first throttled poll: healthy %v faults %+v, want healthy with a pending fault", rep.Healthy, rep.Faults)
	}
	// A blip: passing before the minute is up forgets it.
	blip, rep := Evaluate(st, obsOf(1), t0.Add(30*time.Second), p)
	if !rep.Healthy || len(blip.Faults) != 0 {
		t.Fatalf("after a blip: healthy %v faults %+v", rep.Healthy, blip.Faults)
	}
	st, rep = Evaluate(st, throttled, t0.Add(30*time.Second), p)
	if !rep.Healthy {
		t.Fatalf("throttled 30s: %s", rep.Message)
	}
	_, rep = Evaluate(st, throttled, t0.Add(time.Minute), p)
	if rep.Healthy || rep.Reason != "Throttle" {
		t.Fatalf("throttled a minute: healthy %v reason %s", rep.Healthy, rep.Reason)
	}
}

func TestEvaluateIsPure(t *testing.T) {
	p := instant()
	st, _ := Evaluate(State{}, obsOf(2, xid(0, 94)), t0, p)
	before, _ := json.Marshal(st)
	_, rep1 := Evaluate(st, obsOf(2, func(o *Observation) { o.BootID = "boot-2" }), t0.Add(time.Minute), p)
	after, _ := json.Marshal(st)
	if string(before) != string(after) {
		t.Fatalf("Evaluate changed its input state:\n%s\n%s", before, after)
	}
	// The same input gives the same report, and a state kept as JSON (as the
	// agent keeps it on the node) decides the same as the one in memory.
	var restored State
	if err := json.Unmarshal(before, &restored); err != nil {
		t.Fatal(err)
	}
	_, rep2 := Evaluate(restored, obsOf(2, func(o *Observation) { o.BootID = "boot-2" }), t0.Add(time.Minute), p)
	if diff := cmp.Diff(rep1, rep2); diff != "" {
		t.Fatalf("restored state decides differently (-memory +restored):\n%s", diff)
	}
}

func TestMessageIsBounded(t *testing.T) {
	o := obsOf(64, func(o *Observation) {
		for i := range o.GPUs {
			o.GPUs[i].Error = strings.Repeat("x", 100)
		}
	})
	_, rep := Evaluate(State{}, o, t0, instant())
	if len(rep.Message) > maxMessage || !strings.HasSuffix(rep.Message, "...") {
		t.Fatalf("message of %d bytes", len(rep.Message))
	}
}
