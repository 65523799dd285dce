package health

import "time"

// Observation is what the agent read from NVML in one poll, plus the XID events
// that arrived since the previous one.
type Observation struct {
	// BootID identifies the node's current boot; a new one clears every fault.
	BootID string
	// ExpectedGPUs is how many GPUs the node should have; 0: unknown (the GPU
	// count is not checked).
	ExpectedGPUs int
	// CountError is set when NVML could not even count the GPUs: every expected
	// GPU is then unreadable.
	CountError string
	// GPUs are the GPUs NVML reports, in index order.
	GPUs []GPUReading
	// XIDs are the XID events since the previous observation.
	XIDs []XIDEvent
}

// GPUReading is what was read from one GPU. A nil pointer means the GPU does
// not support the reading (NVML "not supported"); a failed read is in Errors.
type GPUReading struct {
	Index int
	UUID  string
	// Error is set when the GPU could not be opened or read at all.
	Error string
	// Lost: NVML reported the GPU lost (NVML_ERROR_GPU_IS_LOST).
	Lost bool
	// Errors are reads that failed, by the check they feed.
	Errors map[Check]string

	// ECCUncorrected is the volatile uncorrectable ECC error count.
	ECCUncorrected *uint64
	// RetiredPagesPending: pages are waiting to be retired at the next reset.
	RetiredPagesPending *bool
	// RowRemap is the row-remapping state.
	RowRemap *RowRemap
	// TemperatureC is the GPU core temperature.
	TemperatureC *uint32
	// SlowdownC is the GPU's own slowdown temperature threshold, if it has one.
	SlowdownC *uint32
	// Throttle are the reasons the clocks are held down now.
	Throttle []ThrottleReason
	// NVLinks are the GPU's NVLink links NVML reports, with their state.
	NVLinks []NVLink
}

// RowRemap is a GPU's row-remapping state (nvmlDeviceGetRemappedRows).
type RowRemap struct {
	Corrected, Uncorrected int
	Pending, Failed        bool
}

// NVLink is one NVLink link of a GPU.
type NVLink struct {
	Link int
	Up   bool
}

// XIDEvent is one XID error NVML reported for a GPU; GPU is NodeGPU when NVML
// could not tie it to one, and then it marks them all.
type XIDEvent struct {
	GPU  int
	UUID string
	Code uint64
	Time time.Time
}

// ThrottleReason is one reason NVML gives for holding a GPU's clocks down
// (nvmlClocksEventReasons).
type ThrottleReason string

// The throttle reasons the agent reports.
const (
	ThrottleSWPowerCap       ThrottleReason = "SwPowerCap"
	ThrottleHWSlowdown       ThrottleReason = "HwSlowdown"
	ThrottleSWThermal        ThrottleReason = "SwThermalSlowdown"
	ThrottleHWThermal        ThrottleReason = "HwThermalSlowdown"
	ThrottleHWPowerBrake     ThrottleReason = "HwPowerBrakeSlowdown"
	ThrottleSyncBoost        ThrottleReason = "SyncBoost"
	ThrottleApplicationClock ThrottleReason = "ApplicationsClocksSetting"
)
