package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/fleet/health"
)

// TestAgentChecks injects each fault class into a simulated DGX A100 after a
// healthy poll and checks what the next poll finds: exactly these failed
// checks, the node's reason, the healthy GPU count and whether it is fatal.
func TestAgentChecks(t *testing.T) {
	tests := map[string]struct {
		policy      func(*health.Thresholds)
		fault       func(*nvmltest.Server)
		want        []failing
		wantReason  string
		wantHealthy int
		wantFatal   bool
	}{
		"no fault": {
			fault:      func(*nvmltest.Server) {},
			wantReason: health.ReasonHealthy, wantHealthy: 8,
		},
		"uncorrectable ECC errors": {
			fault:      func(s *nvmltest.Server) { s.Edit(3, func(g *nvmltest.GPU) { g.ECCUncorrected = 2 }) },
			want:       []failing{{GPU: 3, Check: health.CheckECC, Detail: "2 uncorrectable ECC errors"}},
			wantReason: "ECC", wantHealthy: 7,
		},
		"retired pages pending": {
			fault:      func(s *nvmltest.Server) { s.Edit(1, func(g *nvmltest.GPU) { g.RetiredPagesPending = true }) },
			want:       []failing{{GPU: 1, Check: health.CheckRetiredPages, Detail: "page retirement pending"}},
			wantReason: "RetiredPages", wantHealthy: 7,
		},
		"row remapping pending": {
			fault: func(s *nvmltest.Server) {
				s.Edit(2, func(g *nvmltest.GPU) { g.RemapPending, g.RemapUncorrected = true, 1 })
			},
			want:       []failing{{GPU: 2, Check: health.CheckRowRemap, Detail: "row remapping pending"}},
			wantReason: "RowRemap", wantHealthy: 7,
		},
		"row remapping failed": {
			fault: func(s *nvmltest.Server) {
				s.Edit(2, func(g *nvmltest.GPU) { g.RemapFailed, g.RemapUncorrected = true, 3 })
			},
			want:       []failing{{GPU: 2, Check: health.CheckRowRemap, Fatal: true, Detail: "row remapping failed (3 rows"}},
			wantReason: "RowRemap", wantHealthy: 7, wantFatal: true,
		},
		"temperature at the GPU's slowdown threshold": {
			fault:      func(s *nvmltest.Server) { s.Edit(4, func(g *nvmltest.GPU) { g.TemperatureC = nvmltest.SlowdownC }) },
			want:       []failing{{GPU: 4, Check: health.CheckTemperature, Detail: "90 C, at or above 90 C"}},
			wantReason: "Temperature", wantHealthy: 7,
		},
		"temperature over the configured threshold": {
			policy:     func(p *health.Thresholds) { p.MaxTemperatureC = 80 },
			fault:      func(s *nvmltest.Server) { s.Edit(4, func(g *nvmltest.GPU) { g.TemperatureC = 81 }) },
			want:       []failing{{GPU: 4, Check: health.CheckTemperature, Detail: "81 C, at or above 80 C"}},
			wantReason: "Temperature", wantHealthy: 7,
		},
		"a configured threshold above the GPU's own wins": {
			policy:     func(p *health.Thresholds) { p.MaxTemperatureC = 95 },
			fault:      func(s *nvmltest.Server) { s.Edit(4, func(g *nvmltest.GPU) { g.TemperatureC = 92 }) },
			wantReason: health.ReasonHealthy, wantHealthy: 8,
		},
		"hardware thermal slowdown": {
			fault: func(s *nvmltest.Server) {
				s.Edit(5, func(g *nvmltest.GPU) { g.ClockReasons = nvml.ClocksThrottleReasonHwThermalSlowdown })
			},
			want:       []failing{{GPU: 5, Check: health.CheckThrottle, Detail: "clocks held down: HwThermalSlowdown"}},
			wantReason: "Throttle", wantHealthy: 7,
		},
		"power brake": {
			fault: func(s *nvmltest.Server) {
				s.Edit(5, func(g *nvmltest.GPU) {
					g.ClockReasons = nvml.ClocksThrottleReasonHwPowerBrakeSlowdown | nvml.ClocksThrottleReasonHwSlowdown
				})
			},
			want:       []failing{{GPU: 5, Check: health.CheckThrottle, Detail: "clocks held down: HwSlowdown, HwPowerBrakeSlowdown"}},
			wantReason: "Throttle", wantHealthy: 7,
		},
		"the software power cap is not a fault": {
			fault: func(s *nvmltest.Server) {
				s.Edit(5, func(g *nvmltest.GPU) { g.ClockReasons = nvml.ClocksEventReasonSwPowerCap })
			},
			wantReason: health.ReasonHealthy, wantHealthy: 8,
		},
		"thermal slowdown read the pre-r535 way": {
			fault: func(s *nvmltest.Server) {
				s.Edit(6, func(g *nvmltest.GPU) {
					g.Fail[nvmltest.ClockEvents] = nvml.ERROR_FUNCTION_NOT_FOUND
					g.ClockReasons = nvml.ClocksEventReasonSwThermalSlowdown
				})
			},
			want:       []failing{{GPU: 6, Check: health.CheckThrottle, Detail: "SwThermalSlowdown"}},
			wantReason: "Throttle", wantHealthy: 7,
		},
		"NVLink link down": {
			fault:      func(s *nvmltest.Server) { s.Edit(6, func(g *nvmltest.GPU) { g.LinksDown[3] = true }) },
			want:       []failing{{GPU: 6, Check: health.CheckNVLink, Detail: "11 of 12 NVLink links up (down: 3)"}},
			wantReason: "NVLink", wantHealthy: 7,
		},
		"NVLink links fewer than configured": {
			policy:     func(p *health.Thresholds) { p.NVLinksPerGPU = 12 },
			fault:      func(s *nvmltest.Server) { s.Edit(0, func(g *nvmltest.GPU) { g.NVLinks = 10 }) },
			want:       []failing{{GPU: 0, Check: health.CheckNVLink, Detail: "10 of 12 NVLink links up"}},
			wantReason: "NVLink", wantHealthy: 7,
		},
		"GPU fell off the bus": {
			fault:      func(s *nvmltest.Server) { s.Remove(7) },
			want:       []failing{{GPU: health.NodeGPU, Check: health.CheckGPUCount, Fatal: true, Detail: "7 of 8 GPUs visible"}},
			wantReason: "GPUCount", wantHealthy: 7, wantFatal: true,
		},
		"GPU cannot be opened": {
			fault: func(s *nvmltest.Server) {
				s.Edit(0, func(g *nvmltest.GPU) { g.Fail[nvmltest.Handle] = nvml.ERROR_UNKNOWN })
			},
			want:       []failing{{GPU: 0, Check: health.CheckReadable, Detail: "opening the GPU: "}},
			wantReason: "Readable", wantHealthy: 7,
		},
		"GPU UUID cannot be read": {
			fault: func(s *nvmltest.Server) {
				s.Edit(1, func(g *nvmltest.GPU) { g.Fail[nvmltest.UUID] = nvml.ERROR_UNKNOWN })
			},
			want:       []failing{{GPU: 1, Check: health.CheckReadable, Detail: "reading its UUID"}},
			wantReason: "Readable", wantHealthy: 7,
		},
		"GPU lost mid-read": {
			fault: func(s *nvmltest.Server) {
				s.Edit(0, func(g *nvmltest.GPU) { g.Fail[nvmltest.Temperature] = nvml.ERROR_GPU_IS_LOST })
			},
			want:       []failing{{GPU: 0, Check: health.CheckReadable, Fatal: true, Detail: "reading the temperature: "}},
			wantReason: "Readable", wantHealthy: 7, wantFatal: true,
		},
		"one reading fails": {
			fault: func(s *nvmltest.Server) {
				s.Edit(0, func(g *nvmltest.GPU) { g.Fail[nvmltest.ECC] = nvml.ERROR_UNKNOWN })
			},
			want:       []failing{{GPU: 0, Check: health.CheckECC, Detail: "cannot read: reading uncorrectable ECC errors"}},
			wantReason: "ECC", wantHealthy: 7,
		},
		"an NVLink state cannot be read": {
			fault: func(s *nvmltest.Server) {
				s.Edit(2, func(g *nvmltest.GPU) { g.Fail[nvmltest.NVLinkState] = nvml.ERROR_UNKNOWN })
			},
			// fleet/health keeps the failed check's own detail: no link read up.
			want:       []failing{{GPU: 2, Check: health.CheckNVLink, Detail: "0 of 12 NVLink links up"}},
			wantReason: "NVLink", wantHealthy: 7,
		},
		"GPUs cannot be counted": {
			fault:      func(s *nvmltest.Server) { s.FailCount(nvml.ERROR_UNKNOWN) },
			want:       []failing{{GPU: health.NodeGPU, Check: health.CheckReadable, Detail: "cannot list the GPUs"}},
			wantReason: "Readable", wantHealthy: 0,
		},
		"two faults on two GPUs": {
			fault: func(s *nvmltest.Server) {
				s.Edit(1, func(g *nvmltest.GPU) { g.ECCUncorrected = 1 })
				s.Edit(5, func(g *nvmltest.GPU) { g.RemapFailed = true })
			},
			want: []failing{
				{GPU: 1, Check: health.CheckECC, Detail: "1 uncorrectable"},
				{GPU: 5, Check: health.CheckRowRemap, Fatal: true, Detail: "row remapping failed"},
			},
			wantReason: "ECC,RowRemap", wantHealthy: 6, wantFatal: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := instant()
			if tc.policy != nil {
				tc.policy(&p)
			}
			r := newRig(t, p, Options{})
			if rep := r.poll(t); !rep.Healthy || rep.HealthyGPUs != 8 {
				t.Fatalf("before the fault: %s %s", rep.Reason, rep.Message)
			}
			tc.fault(r.srv)
			rep := r.poll(t)
			checkFailures(t, rep, tc.want)
			if rep.Reason != tc.wantReason || rep.HealthyGPUs != tc.wantHealthy || rep.Fatal != tc.wantFatal || rep.GPUs != 8 {
				t.Errorf("report: reason %q, %d of %d healthy, fatal %v; want %q, %d of 8, fatal %v\n%s",
					rep.Reason, rep.HealthyGPUs, rep.GPUs, rep.Fatal, tc.wantReason, tc.wantHealthy, tc.wantFatal, rep.Message)
			}
			if rep.Healthy != (len(tc.want) == 0) {
				t.Errorf("healthy = %v with failures %v", rep.Healthy, tc.want)
			}
		})
	}
}

// checkFailures compares the failed results of rep with want, in order.
func checkFailures(t *testing.T, rep health.Report, want []failing) {
	t.Helper()
	got := failures(rep)
	if len(got) != len(want) {
		t.Fatalf("failed checks %+v, want %+v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.GPU != w.GPU || g.Check != w.Check || g.Fatal != w.Fatal || !strings.Contains(g.Detail, w.Detail) {
			t.Errorf("failure %d = {GPU %d %s fatal %v %q}, want {GPU %d %s fatal %v containing %q}",
				i, g.GPU, g.Check, g.Fatal, g.Detail, w.GPU, w.Check, w.Fatal, w.Detail)
		}
		if w.GPU != health.NodeGPU && g.UUID == "" && w.Check != health.CheckReadable {
			t.Errorf("failure %d has no GPU UUID", i)
		}
	}
}

// TestAgentReadsNotSupportedAsSkipped: a reading the GPU does not have (a
// PCIe GPU without NVLink, a pre-Ampere GPU without row remapping, no ECC) is
// nothing to check, not a fault; every reading it has is still checked.
func TestAgentReadsNotSupportedAsSkipped(t *testing.T) {
	r := newRig(t, instant(), Options{})
	for i := range nvmltest.GPUs {
		r.srv.Edit(i, func(g *nvmltest.GPU) {
			g.NVLinks = 0
			g.Fail[nvmltest.RemappedRows] = nvml.ERROR_NOT_SUPPORTED
			g.Fail[nvmltest.ECC] = nvml.ERROR_NOT_SUPPORTED
			g.Fail[nvmltest.Threshold] = nvml.ERROR_NOT_SUPPORTED
		})
	}
	rep := r.poll(t)
	if !rep.Healthy || rep.HealthyGPUs != 8 {
		t.Fatalf("unsupported readings made the node unhealthy: %s", rep.Message)
	}
	status := map[health.Check]health.Status{}
	for _, res := range rep.Results {
		if res.GPU == 0 {
			status[res.Check] = res.Status
		}
	}
	want := map[health.Check]health.Status{
		health.CheckReadable: health.Pass, health.CheckXID: health.Pass, health.CheckECC: health.Skipped,
		health.CheckRetiredPages: health.Pass, health.CheckRowRemap: health.Skipped,
		health.CheckTemperature: health.Skipped, health.CheckThrottle: health.Pass, health.CheckNVLink: health.Skipped,
	}
	for c, s := range want {
		if status[c] != s {
			t.Errorf("GPU 0 %s = %q, want %q", c, status[c], s)
		}
	}
	// Without the GPU's own threshold, a configured one still checks it.
	p := instant()
	p.MaxTemperatureC = 50
	r.agent.policy = p
	if rep := r.poll(t); rep.Healthy || rep.Reason != "Temperature" || rep.HealthyGPUs != 0 {
		t.Errorf("55 C over a configured 50 C: %s %s", rep.Reason, rep.Message)
	}
}

// TestAgentExpectedGPUs: a GPU missing from NVML is found from the node's
// advertised count, from the configured count, or, when the device plugin
// re-registered with fewer, from the most GPUs NVML listed this boot.
func TestAgentExpectedGPUs(t *testing.T) {
	t.Run("configured count above what NVML lists", func(t *testing.T) {
		r := newRig(t, instant(), Options{ExpectedGPUs: 10})
		rep := r.poll(t)
		checkFailures(t, rep, []failing{{GPU: health.NodeGPU, Check: health.CheckGPUCount, Fatal: true, Detail: "8 of 10 GPUs visible"}})
		if rep.GPUs != 10 || rep.HealthyGPUs != 8 {
			t.Errorf("%d of %d healthy, want 8 of 10", rep.HealthyGPUs, rep.GPUs)
		}
	})
	t.Run("advertised count drops with the GPU", func(t *testing.T) {
		r := newRig(t, instant(), Options{})
		r.poll(t)
		r.srv.Remove(3)
		r.pub.setFacts(func(f *Facts) { f.GPUs = 7 })
		rep := r.poll(t)
		checkFailures(t, rep, []failing{{GPU: health.NodeGPU, Check: health.CheckGPUCount, Fatal: true, Detail: "7 of 8 GPUs visible"}})
	})
	t.Run("unknown advertised count", func(t *testing.T) {
		r := newRig(t, instant(), Options{})
		r.pub.setFacts(func(f *Facts) { f.GPUs = 0 })
		if rep := r.poll(t); !rep.Healthy || rep.GPUs != 8 {
			t.Fatalf("first poll: %s", rep.Message)
		}
		r.srv.Remove(0)
		rep := r.poll(t)
		checkFailures(t, rep, []failing{{GPU: health.NodeGPU, Check: health.CheckGPUCount, Fatal: true, Detail: "7 of 8 GPUs visible"}})
		// A new boot forgets the count NVML listed in the old one, and the
		// fatal fault with it.
		r.pub.setFacts(func(f *Facts) { f.BootID = "boot-2" })
		if rep := r.poll(t); !rep.Healthy || rep.GPUs != 7 || rep.HealthyGPUs != 7 {
			t.Errorf("after a reboot with 7 GPUs and nothing expected: %s", rep.Message)
		}
	})
}

func TestOpen(t *testing.T) {
	tests := map[string]struct {
		ret     nvml.Return
		wantErr error
		wantMsg string
	}{
		"ok":                {ret: nvml.SUCCESS},
		"no library":        {ret: nvml.ERROR_LIBRARY_NOT_FOUND, wantErr: ErrNoDriver, wantMsg: "loading libnvidia-ml.so.1: no NVIDIA driver on this node"},
		"driver not loaded": {ret: nvml.ERROR_DRIVER_NOT_LOADED, wantErr: nvml.ERROR_DRIVER_NOT_LOADED, wantMsg: "the NVIDIA kernel driver is not loaded"},
		"no permission":     {ret: nvml.ERROR_NO_PERMISSION, wantErr: nvml.ERROR_NO_PERMISSION, wantMsg: "initializing NVML: "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := nvmltest.New()
			s.FailInit(tc.ret)
			closeLib, err := Open(s, Library)
			if tc.wantErr == nil {
				if err != nil || closeLib == nil {
					t.Fatalf("Open = %v", err)
				}
				closeLib()
				if n := len(s.ShutdownCalls()); n != 1 {
					t.Errorf("close shut NVML down %d times", n)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Open = %v, want %v saying %q on one line", err, tc.wantErr, tc.wantMsg)
			}
		})
	}
	// The real library, loaded from a file that is not there, is the same error.
	if _, err := Open(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")), "/nonexistent/libnvidia-ml.so.1"); !errors.Is(err, ErrNoDriver) {
		t.Errorf("Open of a missing library = %v, want ErrNoDriver", err)
	}
}
