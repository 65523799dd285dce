// Package nvmltest is a simulated GPU node for tests of the NVML agent: go-nvml's
// own DGX A100 mock (pkg/nvml/mock/dgxa100) with the health calls it does not
// wire by default (ECC, retired pages, remapped rows, temperature, clock event
// reasons, NVLink state, XID event sets), each reading a value a test can change
// and each able to fail with an NVML return code.
package nvmltest

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// Reading names one NVML call a test can make fail.
type Reading string

// The NVML calls the agent makes per GPU.
const (
	Handle         Reading = "DeviceGetHandleByIndex"
	UUID           Reading = "GetUUID"
	ECC            Reading = "GetTotalEccErrors"
	RetiredPages   Reading = "GetRetiredPagesPendingStatus"
	RemappedRows   Reading = "GetRemappedRows"
	Temperature    Reading = "GetTemperature"
	Threshold      Reading = "GetTemperatureThreshold"
	ClockEvents    Reading = "GetCurrentClocksEventReasons"
	ClockThrottle  Reading = "GetCurrentClocksThrottleReasons"
	NVLinkState    Reading = "GetNvLinkState"
	EventTypes     Reading = "GetSupportedEventTypes"
	RegisterEvents Reading = "RegisterEvents"
)

// The healthy readings of New.
const (
	GPUs          = 8  // a DGX A100
	NVLinksPerGPU = 12 // an A100 SXM4 has 12 NVLink links
	NominalC      = 55
	SlowdownC     = 90
)

// supportedEvents are the event types every simulated GPU supports.
const supportedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError

// GPU is one simulated GPU. Change its fields through Server.Edit.
type GPU struct {
	*dgxa100.Device

	ECCUncorrected      uint64
	RetiredPagesPending bool
	RemapCorrected      int
	RemapUncorrected    int
	RemapPending        bool
	RemapFailed         bool
	TemperatureC        uint32
	SlowdownC           uint32
	// ClockReasons is the nvmlClocksEventReasons bit mask.
	ClockReasons uint64
	// NVLinks is how many NVLink links the GPU has; LinksDown are those down.
	NVLinks   int
	LinksDown map[int]bool
	// Fail makes a call return an NVML error instead of the reading.
	Fail map[Reading]nvml.Return
}

// Server is a simulated node of GPUs.
type Server struct {
	*dgxa100.Server

	mu   sync.Mutex
	gpus []*GPU
	// present are the indexes of the GPUs NVML lists, in order.
	present  []int
	countRet nvml.Return
	initRet  nvml.Return
	events   chan nvml.EventData
	// registered are the GPUs whose XID events were registered.
	registered map[int]bool
}

// New returns a healthy DGX A100: 8 GPUs at 55 C (slowdown at 90 C), no ECC
// errors, no pending retirement or remapping, 12 NVLink links up each, only
// idle in the clock event reasons, XID events supported.
func New() *Server {
	s := &Server{Server: dgxa100.New(), events: make(chan nvml.EventData, 64), registered: map[int]bool{}}
	for i := range GPUs {
		d := s.Server.Devices[i].(*dgxa100.Device)
		d.UUID = UUIDOf(i)
		g := &GPU{Device: d, TemperatureC: NominalC, SlowdownC: SlowdownC, ClockReasons: nvml.ClocksEventReasonGpuIdle, NVLinks: NVLinksPerGPU}
		s.gpus = append(s.gpus, g)
		s.present = append(s.present, i)
		s.wire(i, g)
	}
	s.InitFunc = func() nvml.Return { s.mu.Lock(); defer s.mu.Unlock(); return s.initRet }
	s.DeviceGetCountFunc = func() (int, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.countRet != nvml.SUCCESS {
			return 0, s.countRet
		}
		return len(s.present), nvml.SUCCESS
	}
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i < 0 || i >= len(s.present) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		g := s.gpus[s.present[i]]
		if r, ok := g.Fail[Handle]; ok {
			return nil, r
		}
		return g, nvml.SUCCESS
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-s.events:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	return s
}

// read returns what v reads of g under the server's lock, or the error a test
// set for r.
func read[T any](s *Server, g *GPU, r Reading, v func() T) (T, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ret, ok := g.Fail[r]; ok {
		var zero T
		return zero, ret
	}
	return v(), nvml.SUCCESS
}

// remap is what GetRemappedRows returns.
type remap struct {
	corrected, uncorrected int
	pending, failed        bool
}

// wire sets the health calls of GPU i, each reading g under the server's lock.
func (s *Server) wire(i int, g *GPU) {
	g.GetUUIDFunc = func() (string, nvml.Return) {
		return read(s, g, UUID, func() string { return g.UUID })
	}
	g.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if t != nvml.MEMORY_ERROR_TYPE_UNCORRECTED || c != nvml.VOLATILE_ECC {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return read(s, g, ECC, func() uint64 { return g.ECCUncorrected })
	}
	g.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return read(s, g, RetiredPages, func() nvml.EnableState { return enabled(g.RetiredPagesPending) })
	}
	g.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		r, ret := read(s, g, RemappedRows, func() remap {
			return remap{g.RemapCorrected, g.RemapUncorrected, g.RemapPending, g.RemapFailed}
		})
		return r.corrected, r.uncorrected, r.pending, r.failed, ret
	}
	g.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
		if sensor != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return read(s, g, Temperature, func() uint32 { return g.TemperatureC })
	}
	g.GetTemperatureThresholdFunc = func(t nvml.TemperatureThresholds) (uint32, nvml.Return) {
		if t != nvml.TEMPERATURE_THRESHOLD_SLOWDOWN {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return read(s, g, Threshold, func() uint32 { return g.SlowdownC })
	}
	g.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		return read(s, g, ClockEvents, func() uint64 { return g.ClockReasons })
	}
	g.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) {
		return read(s, g, ClockThrottle, func() uint64 { return g.ClockReasons })
	}
	g.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		// A link the GPU does not have is an invalid argument, whatever fails.
		if has, _ := read(s, g, "", func() bool { return link >= 0 && link < g.NVLinks }); !has {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return read(s, g, NVLinkState, func() nvml.EnableState { return enabled(!g.LinksDown[link]) })
	}
	g.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return read(s, g, EventTypes, func() uint64 { return supportedEvents })
	}
	g.RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
		_, ret := read(s, g, RegisterEvents, func() bool {
			if types&nvml.EventTypeXidCriticalError != 0 {
				s.registered[i] = true
			}
			return true
		})
		return ret
	}
}

func enabled(b bool) nvml.EnableState {
	if b {
		return nvml.FEATURE_ENABLED
	}
	return nvml.FEATURE_DISABLED
}

// Edit changes GPU i (its index when the server was made) under the lock.
func (s *Server) Edit(i int, edit func(*GPU)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gpus[i]
	if g.Fail == nil {
		g.Fail = map[Reading]nvml.Return{}
	}
	if g.LinksDown == nil {
		g.LinksDown = map[int]bool{}
	}
	edit(g)
}

// Remove takes GPU i off the bus: NVML no longer lists it, and the GPUs after
// it move up one index, as after a driver reload.
func (s *Server) Remove(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, p := range s.present {
		if p == i {
			s.present = append(s.present[:k:k], s.present[k+1:]...)
			return
		}
	}
}

// FailCount makes DeviceGetCount return ret (SUCCESS undoes it).
func (s *Server) FailCount(ret nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countRet = ret
}

// FailInit makes Init return ret, e.g. ERROR_LIBRARY_NOT_FOUND.
func (s *Server) FailInit(ret nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.initRet = ret
}

// XID delivers an XID error of GPU gpu (its index when the server was made) to
// every event set; gpu -1 is an event NVML ties to no GPU.
func (s *Server) XID(gpu int, code uint64) {
	e := nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: code}
	if gpu >= 0 {
		s.mu.Lock()
		e.Device = s.gpus[gpu]
		s.mu.Unlock()
	}
	s.events <- e
}

// Event delivers any event, e.g. a single-bit ECC event the agent ignores.
func (s *Server) Event(e nvml.EventData) { s.events <- e }

// Registered reports whether XID events of GPU i were registered.
func (s *Server) Registered(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered[i]
}

// UUIDOf returns the UUID of GPU i.
func UUIDOf(i int) string { return fmt.Sprintf("GPU-a100-%d", i) }
