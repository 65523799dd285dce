package agent

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/allot-dev/allot/fleet/health"
)

// ErrNoDriver says libnvidia-ml could not be loaded: there is no NVIDIA driver
// on this machine (or it is not mounted into the container).
var ErrNoDriver = errors.New("no NVIDIA driver on this node (or it is not mounted into the container)")

// Library is the file name NVML is loaded from unless told otherwise.
const Library = "libnvidia-ml.so.1"

// Open initializes lib, loaded from name (used in errors). A library that
// cannot be loaded is ErrNoDriver; any other failure names NVML's error. The
// caller calls the returned close function.
func Open(lib nvml.Interface, name string) (func(), error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return func() { _ = lib.Shutdown() }, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("loading %s: %w", name, ErrNoDriver)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("initializing NVML: the NVIDIA kernel driver is not loaded: %w", ret)
	default:
		return nil, fmt.Errorf("initializing NVML: %w", ret)
	}
}

// outcome is what an NVML return means for a check.
type outcome int

const (
	ok          outcome = iota
	unsupported         // the GPU or driver has no such reading: nothing to check
	lost                // the GPU is gone: fatal
	failed              // the reading failed: the check fails
)

func classify(ret nvml.Return) outcome {
	switch ret {
	case nvml.SUCCESS:
		return ok
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return unsupported
	case nvml.ERROR_GPU_IS_LOST:
		return lost
	}
	return failed
}

// Reader reads the health of every GPU through NVML.
type Reader struct{ lib nvml.Interface }

// NewReader returns a Reader of lib, which must be initialized.
func NewReader(lib nvml.Interface) *Reader { return &Reader{lib: lib} }

// Read reads every GPU. It never fails: what cannot be read is in the
// observation as an error, so the GPU is unhealthy rather than assumed healthy.
func (r *Reader) Read() health.Observation {
	var obs health.Observation
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		obs.CountError = ret.Error()
		return obs
	}
	for i := range n {
		obs.GPUs = append(obs.GPUs, r.readGPU(i))
	}
	return obs
}

func (r *Reader) readGPU(i int) health.GPUReading {
	g := health.GPUReading{Index: i}
	d, ret := r.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		g.Error, g.Lost = "opening the GPU: "+ret.Error(), ret == nvml.ERROR_GPU_IS_LOST
		return g
	}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		g.Error, g.Lost = "reading its UUID: "+ret.Error(), ret == nvml.ERROR_GPU_IS_LOST
		return g
	}
	g.UUID = uuid

	// read records one reading's outcome; false stops reading a lost GPU.
	read := func(c health.Check, what string, ret nvml.Return, set func()) bool {
		switch classify(ret) {
		case ok:
			set()
		case lost:
			g.Error, g.Lost = what+": "+ret.Error(), true
			return false
		case failed:
			if g.Errors == nil {
				g.Errors = map[health.Check]string{}
			}
			g.Errors[c] = what + ": " + ret.Error()
		}
		return true
	}

	ecc, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if !read(health.CheckECC, "reading uncorrectable ECC errors", ret, func() { g.ECCUncorrected = &ecc }) {
		return g
	}
	pending, ret := d.GetRetiredPagesPendingStatus()
	if !read(health.CheckRetiredPages, "reading pending page retirement", ret, func() { p := pending == nvml.FEATURE_ENABLED; g.RetiredPagesPending = &p }) {
		return g
	}
	corr, unc, remapPending, remapFailed, ret := d.GetRemappedRows()
	if !read(health.CheckRowRemap, "reading remapped rows", ret, func() {
		g.RowRemap = &health.RowRemap{Corrected: corr, Uncorrected: unc, Pending: remapPending, Failed: remapFailed}
	}) {
		return g
	}
	temp, ret := d.GetTemperature(nvml.TEMPERATURE_GPU)
	if !read(health.CheckTemperature, "reading the temperature", ret, func() { g.TemperatureC = &temp }) {
		return g
	}
	// The slowdown threshold is a setting, not a reading: without it the
	// policy's threshold (if any) applies.
	if slow, ret := d.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); ret == nvml.SUCCESS && slow > 0 {
		g.SlowdownC = &slow
	}
	reasons, ret := d.GetCurrentClocksEventReasons()
	if classify(ret) == unsupported {
		reasons, ret = d.GetCurrentClocksThrottleReasons() // drivers before r535
	}
	if !read(health.CheckThrottle, "reading the clock throttle reasons", ret, func() { g.Throttle = throttleReasons(reasons) }) {
		return g
	}
	for l := range nvml.NVLINK_MAX_LINKS {
		state, ret := d.GetNvLinkState(l)
		if ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no such link on this GPU
		}
		if !read(health.CheckNVLink, fmt.Sprintf("reading NVLink %d", l), ret, func() {
			g.NVLinks = append(g.NVLinks, health.NVLink{Link: l, Up: state == nvml.FEATURE_ENABLED})
		}) {
			return g
		}
	}
	return g
}

// throttleBits maps NVML's clocks event reason bits to the model's names.
var throttleBits = []struct {
	bit    uint64
	reason health.ThrottleReason
}{
	{nvml.ClocksEventReasonApplicationsClocksSetting, health.ThrottleApplicationClock},
	{nvml.ClocksEventReasonSwPowerCap, health.ThrottleSWPowerCap},
	{nvml.ClocksThrottleReasonHwSlowdown, health.ThrottleHWSlowdown},
	{nvml.ClocksEventReasonSyncBoost, health.ThrottleSyncBoost},
	{nvml.ClocksEventReasonSwThermalSlowdown, health.ThrottleSWThermal},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, health.ThrottleHWThermal},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, health.ThrottleHWPowerBrake},
}

func throttleReasons(bits uint64) []health.ThrottleReason {
	var out []health.ThrottleReason
	for _, b := range throttleBits {
		if bits&b.bit != 0 {
			out = append(out, b.reason)
		}
	}
	return out
}
