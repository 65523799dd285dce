package health

import (
	"fmt"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// healthyGPU is an A100/H100-like GPU with every reading supported and nominal.
func healthyGPU(i int) GPUReading {
	g := GPUReading{
		Index:               i,
		UUID:                fmt.Sprintf("GPU-%d", i),
		ECCUncorrected:      ptr(uint64(0)),
		RetiredPagesPending: ptr(false),
		RowRemap:            &RowRemap{},
		TemperatureC:        ptr(uint32(55)),
		SlowdownC:           ptr(uint32(90)),
		Throttle:            []ThrottleReason{ThrottleSWPowerCap},
	}
	for l := range 12 {
		g.NVLinks = append(g.NVLinks, NVLink{Link: l, Up: true})
	}
	return g
}

// obsOf is a node of n healthy GPUs, every one changed by the edits.
func obsOf(n int, edits ...func(*Observation)) Observation {
	o := Observation{BootID: "boot-1", ExpectedGPUs: n}
	for i := range n {
		o.GPUs = append(o.GPUs, healthyGPU(i))
	}
	for _, e := range edits {
		e(&o)
	}
	return o
}

func onGPU(i int, edit func(*GPUReading)) func(*Observation) {
	return func(o *Observation) { edit(&o.GPUs[i]) }
}

func xid(gpu int, code uint64) func(*Observation) {
	return func(o *Observation) {
		o.XIDs = append(o.XIDs, XIDEvent{GPU: gpu, UUID: fmt.Sprintf("GPU-%d", gpu), Code: code, Time: t0})
	}
}

// instant is the default policy without debounce: every failure counts at once.
func instant() Thresholds {
	p := DefaultThresholds()
	p.Debounce = nil
	return p
}
