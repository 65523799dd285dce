package health

import "time"

// Check names one health check. The names of the failing checks, joined by
// commas, are the reason of the node's GPUHealthy condition.
type Check string

// The checks, per GPU unless said otherwise.
const (
	// CheckReadable: NVML can open and read the GPU. A GPU that cannot be read is
	// unhealthy, never assumed healthy; a lost GPU (NVML_ERROR_GPU_IS_LOST) is fatal.
	CheckReadable Check = "Readable"
	// CheckXID: no hardware XID error was reported (application XIDs do not count).
	CheckXID Check = "XID"
	// CheckECC: the volatile uncorrectable ECC error count is zero.
	CheckECC Check = "ECC"
	// CheckRetiredPages: no page retirement is pending (pre-Ampere GPUs).
	CheckRetiredPages Check = "RetiredPages"
	// CheckRowRemap: no row remapping is pending or has failed (Ampere and later).
	// A failed remapping is fatal: the GPU needs replacing.
	CheckRowRemap Check = "RowRemap"
	// CheckGPUCount (node-level): NVML sees as many GPUs as the node should have;
	// fewer means a GPU fell off the bus, which is fatal.
	CheckGPUCount Check = "GPUCount"
	// CheckTemperature: the GPU is below the temperature threshold.
	CheckTemperature Check = "Temperature"
	// CheckThrottle: the GPU's clocks are not held down for a reason the policy
	// counts as a fault (thermal or power-brake slowdown by default).
	CheckThrottle Check = "Throttle"
	// CheckNVLink: every NVLink link expected up is up.
	CheckNVLink Check = "NVLink"
)

// Checks lists every check, in the order reports show them.
var Checks = []Check{CheckReadable, CheckGPUCount, CheckXID, CheckECC, CheckRetiredPages, CheckRowRemap, CheckTemperature, CheckThrottle, CheckNVLink}

// NodeGPU is the GPU index of node-level results and faults.
const NodeGPU = -1

// Status is the outcome of one check on one GPU in one poll.
type Status string

// Check outcomes.
const (
	Pass Status = "Pass"
	Fail Status = "Fail"
	// Skipped: the GPU does not support what the check reads (NVML "not
	// supported"): there is nothing to check, which is not a fault.
	Skipped Status = "Skipped"
)

// Result is one check on one GPU (or the node, GPU NodeGPU) in one poll.
type Result struct {
	GPU    int    `json:"gpu"`
	UUID   string `json:"uuid,omitempty"`
	Check  Check  `json:"check"`
	Status Status `json:"status"`
	// Fatal: the fault needs the node drained and reset (the node is tainted).
	Fatal bool `json:"fatal,omitempty"`
	// Detail says what was read, e.g. "XID 79 (GPU has fallen off the bus)".
	Detail string `json:"detail,omitempty"`
}

// Phase is where a fault stands.
type Phase string

// Fault phases.
const (
	// Pending: failing, but not yet for the check's debounce time; not counted.
	Pending Phase = "Pending"
	// Active: counts against the node.
	Active Phase = "Active"
	// Recovering: active, and passing again since LastFailed; it clears once it
	// has passed for the policy's RecoverAfter (fatal faults wait for a reboot).
	Recovering Phase = "Recovering"
)

// Fault is a check that failed on a GPU (or the node), remembered across polls
// so that recovery is explicit.
type Fault struct {
	GPU    int    `json:"gpu"`
	UUID   string `json:"uuid,omitempty"`
	Check  Check  `json:"check"`
	Fatal  bool   `json:"fatal,omitempty"`
	Detail string `json:"detail"`
	Phase  Phase  `json:"phase"`
	// Since is when the check first failed in this run of failures.
	Since time.Time `json:"since"`
	// LastFailed is the last poll at which the check failed.
	LastFailed time.Time `json:"lastFailed"`
}

func (f Fault) key() faultKey { return faultKey{f.GPU, f.Check} }

type faultKey struct {
	gpu   int
	check Check
}

func (k faultKey) less(o faultKey) bool {
	if k.gpu != o.gpu {
		return k.gpu < o.gpu
	}
	return checkOrder(k.check) < checkOrder(o.check)
}

func checkOrder(c Check) int {
	for i, x := range Checks {
		if x == c {
			return i
		}
	}
	return len(Checks)
}
