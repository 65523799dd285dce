package health

import (
	"fmt"
	"time"
)

// Thresholds are the limits and times the health decision uses.
type Thresholds struct {
	// MaxTemperatureC fails CheckTemperature at or above it; 0: the GPU's own
	// slowdown threshold (and no check on a GPU that reports none).
	MaxTemperatureC uint32
	// ThrottleFaults are the throttle reasons that count as a fault.
	ThrottleFaults []ThrottleReason
	// Debounce is how long a check must fail, poll after poll, before it counts;
	// absent: it counts at once.
	Debounce map[Check]time.Duration
	// RecoverAfter is how long a non-fatal fault must pass again before it
	// clears. Fatal faults clear only when the node reboots (a new boot ID).
	RecoverAfter time.Duration
	// NVLinksPerGPU is how many NVLink links each GPU should have up; 0: as many
	// as were seen up on that GPU since boot.
	NVLinksPerGPU int
	// XIDs classifies XID codes.
	XIDs XIDTable
}

// DefaultThresholds returns the defaults: the GPU's own slowdown temperature,
// hardware thermal, hardware slowdown and power-brake throttling (and software
// thermal slowdown) as faults once they last a minute, the same minute for
// temperature, recovery after ten minutes passing, and the default XID table.
func DefaultThresholds() Thresholds {
	return Thresholds{
		ThrottleFaults: []ThrottleReason{ThrottleHWSlowdown, ThrottleHWThermal, ThrottleHWPowerBrake, ThrottleSWThermal},
		Debounce:       map[Check]time.Duration{CheckTemperature: time.Minute, CheckThrottle: time.Minute},
		RecoverAfter:   10 * time.Minute,
		XIDs:           DefaultXIDTable(),
	}
}

// Validate says what is wrong with p, if anything.
func (p Thresholds) Validate() error {
	if p.RecoverAfter < 0 {
		return fmt.Errorf("recover-after %s: must not be negative", p.RecoverAfter)
	}
	if p.NVLinksPerGPU < 0 || p.NVLinksPerGPU > maxNVLinks {
		return fmt.Errorf("nvlinks per GPU %d: want 0 (learn) to %d", p.NVLinksPerGPU, maxNVLinks)
	}
	for c, d := range p.Debounce {
		if d < 0 {
			return fmt.Errorf("debounce of %s %s: must not be negative", c, d)
		}
	}
	for _, r := range p.ThrottleFaults {
		if !knownThrottle[r] {
			return fmt.Errorf("throttle reason %q: want one of %s", r, throttleNames())
		}
	}
	return nil
}

// maxNVLinks is NVML's NVLINK_MAX_LINKS.
const maxNVLinks = 18

var knownThrottle = map[ThrottleReason]bool{
	ThrottleSWPowerCap: true, ThrottleHWSlowdown: true, ThrottleSWThermal: true, ThrottleHWThermal: true,
	ThrottleHWPowerBrake: true, ThrottleSyncBoost: true, ThrottleApplicationClock: true,
}

func throttleNames() string {
	return fmt.Sprint([]ThrottleReason{ThrottleSWPowerCap, ThrottleHWSlowdown, ThrottleSWThermal, ThrottleHWThermal, ThrottleHWPowerBrake, ThrottleSyncBoost, ThrottleApplicationClock})
}

// ParseThrottleReasons parses a comma-separated list of throttle reasons.
func ParseThrottleReasons(s string) ([]ThrottleReason, error) {
	var out []ThrottleReason
	for _, f := range splitList(s) {
		r := ThrottleReason(f)
		if !knownThrottle[r] {
			return nil, fmt.Errorf("throttle reason %q: want one of %s", f, throttleNames())
		}
		out = append(out, r)
	}
	return out, nil
}
