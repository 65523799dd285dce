package health

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// State is what the decision remembers between polls. It is plain JSON so the
// agent can keep it on the node and a restarted agent forgets nothing.
type State struct {
	// BootID is the boot the faults belong to.
	BootID string `json:"bootID,omitempty"`
	// Faults are the pending, active and recovering faults, by GPU then check.
	Faults []Fault `json:"faults,omitempty"`
	// NVLinksUp is, per GPU index, the most NVLink links seen up this boot: what
	// CheckNVLink expects when the policy does not say.
	NVLinksUp map[int]int `json:"nvlinksUp,omitempty"`
}

// Report is the node-level decision of one poll.
type Report struct {
	Time time.Time `json:"time"`
	// Healthy: no fault counts against the node (GPUHealthy=True).
	Healthy bool `json:"healthy"`
	// Fatal: a counted fault needs the node drained (the gpu-fault taint).
	Fatal bool `json:"fatal"`
	// Reason is "AllChecksPassed" or the failing checks, comma-separated.
	Reason string `json:"reason"`
	// Message details every counted fault.
	Message string `json:"message"`
	// GPUs is how many GPUs the node should have (expected, or else seen).
	GPUs int `json:"gpus"`
	// HealthyGPUs are the GPUs without a counted fault: what work may use.
	HealthyGPUs int `json:"healthyGPUs"`
	// Results are this poll's checks, by GPU then check.
	Results []Result `json:"results"`
	// Faults are the remembered faults; Pending ones do not count yet.
	Faults []Fault `json:"faults,omitempty"`
	// XIDs are this poll's XID events with their classification.
	XIDs []XIDFinding `json:"xids,omitempty"`
}

// XIDFinding is an XID event and how the table classified it.
type XIDFinding struct {
	XIDEvent
	XIDEntry
}

// ReasonHealthy is the GPUHealthy condition's reason when every check passes.
const ReasonHealthy = "AllChecksPassed"

// maxMessage bounds the condition message (the API server takes more, humans don't).
const maxMessage = 1024

// Evaluate folds one observation into the previous state and decides the node's
// health at now. prev is not changed.
func Evaluate(prev State, obs Observation, now time.Time, p Thresholds) (State, Report) {
	st := State{BootID: prev.BootID, Faults: prev.Faults, NVLinksUp: map[int]int{}}
	for k, v := range prev.NVLinksUp {
		st.NVLinksUp[k] = v
	}
	if obs.BootID != "" && prev.BootID != "" && obs.BootID != prev.BootID {
		// The node rebooted: the GPUs were reset, every fault starts over.
		st.Faults, st.NVLinksUp = nil, map[int]int{}
	}
	if obs.BootID != "" {
		st.BootID = obs.BootID
	}
	rep := Report{Time: now}
	rep.Results, rep.XIDs = results(obs, &st, p)
	st.Faults = fold(st.Faults, rep.Results, now, p)
	rep.Faults = st.Faults
	summarize(&rep, obs)
	return st, rep
}

// results runs every check of one observation.
func results(obs Observation, st *State, p Thresholds) ([]Result, []XIDFinding) {
	var out []Result
	node := func(c Check, s Status, fatal bool, detail string) {
		out = append(out, Result{GPU: NodeGPU, Check: c, Status: s, Fatal: fatal, Detail: detail})
	}
	switch {
	case obs.CountError != "":
		node(CheckReadable, Fail, false, "cannot list the GPUs: "+obs.CountError)
	case obs.ExpectedGPUs > 0 && len(obs.GPUs) < obs.ExpectedGPUs:
		node(CheckGPUCount, Fail, true, fmt.Sprintf("%d of %d GPUs visible: a GPU fell off the bus", len(obs.GPUs), obs.ExpectedGPUs))
	case obs.ExpectedGPUs > 0:
		node(CheckGPUCount, Pass, false, fmt.Sprintf("%d of %d GPUs visible", len(obs.GPUs), obs.ExpectedGPUs))
	}
	xids, findings := classifyXIDs(obs.XIDs, p.XIDs)
	seen := map[int]bool{}
	for _, g := range obs.GPUs {
		seen[g.Index] = true
		out = append(out, gpuResults(g, st, p)...)
		out = append(out, xidResult(g.Index, g.UUID, xids[g.Index]))
	}
	// XIDs of GPUs NVML no longer lists still mark them.
	for gpu, ev := range xids {
		if !seen[gpu] {
			out = append(out, xidResult(gpu, ev[0].UUID, ev))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return faultKey{out[i].GPU, out[i].Check}.less(faultKey{out[j].GPU, out[j].Check})
	})
	return out, findings
}

func classifyXIDs(events []XIDEvent, t XIDTable) (map[int][]XIDFinding, []XIDFinding) {
	byGPU := map[int][]XIDFinding{}
	var all []XIDFinding
	for _, e := range events {
		f := XIDFinding{XIDEvent: e, XIDEntry: t.Classify(e.Code)}
		all = append(all, f)
		if f.Class == XIDHardware {
			byGPU[e.GPU] = append(byGPU[e.GPU], f)
		}
	}
	return byGPU, all
}

func xidResult(gpu int, uuid string, hw []XIDFinding) Result {
	r := Result{GPU: gpu, UUID: uuid, Check: CheckXID, Status: Pass}
	if len(hw) == 0 {
		return r
	}
	r.Status = Fail
	var parts []string
	for _, f := range hw {
		r.Fatal = r.Fatal || f.Fatal
		parts = append(parts, fmt.Sprintf("XID %d (%s)", f.Code, f.Description))
	}
	r.Detail = strings.Join(dedupe(parts), ", ")
	return r
}

func gpuResults(g GPUReading, st *State, p Thresholds) []Result {
	res := func(c Check, s Status, fatal bool, detail string) Result {
		if e, ok := g.Errors[c]; ok && s != Fail {
			// A reading that failed is a failed check, never a pass.
			return Result{GPU: g.Index, UUID: g.UUID, Check: c, Status: Fail, Detail: "cannot read: " + e}
		}
		return Result{GPU: g.Index, UUID: g.UUID, Check: c, Status: s, Fatal: fatal, Detail: detail}
	}
	if g.Error != "" {
		return []Result{res(CheckReadable, Fail, g.Lost, g.Error)}
	}
	out := []Result{res(CheckReadable, Pass, false, "")}

	switch {
	case g.ECCUncorrected == nil:
		out = append(out, res(CheckECC, Skipped, false, "not supported"))
	case *g.ECCUncorrected > 0:
		out = append(out, res(CheckECC, Fail, false, fmt.Sprintf("%d uncorrectable ECC errors since the driver loaded", *g.ECCUncorrected)))
	default:
		out = append(out, res(CheckECC, Pass, false, ""))
	}

	switch {
	case g.RetiredPagesPending == nil:
		out = append(out, res(CheckRetiredPages, Skipped, false, "not supported"))
	case *g.RetiredPagesPending:
		out = append(out, res(CheckRetiredPages, Fail, false, "page retirement pending: reset the GPU"))
	default:
		out = append(out, res(CheckRetiredPages, Pass, false, ""))
	}

	switch rr := g.RowRemap; {
	case rr == nil:
		out = append(out, res(CheckRowRemap, Skipped, false, "not supported"))
	case rr.Failed:
		out = append(out, res(CheckRowRemap, Fail, true, fmt.Sprintf("row remapping failed (%d rows remapped for uncorrectable errors): replace the GPU", rr.Uncorrected)))
	case rr.Pending:
		out = append(out, res(CheckRowRemap, Fail, false, "row remapping pending: reset the GPU"))
	default:
		out = append(out, res(CheckRowRemap, Pass, false, ""))
	}

	limit := p.MaxTemperatureC
	if limit == 0 && g.SlowdownC != nil {
		limit = *g.SlowdownC
	}
	switch {
	case g.TemperatureC == nil || limit == 0:
		out = append(out, res(CheckTemperature, Skipped, false, "no temperature or threshold"))
	case *g.TemperatureC >= limit:
		out = append(out, res(CheckTemperature, Fail, false, fmt.Sprintf("%d C, at or above %d C", *g.TemperatureC, limit)))
	default:
		out = append(out, res(CheckTemperature, Pass, false, fmt.Sprintf("%d C", *g.TemperatureC)))
	}

	var throttled []string
	for _, r := range g.Throttle {
		for _, f := range p.ThrottleFaults {
			if r == f {
				throttled = append(throttled, string(r))
			}
		}
	}
	if len(throttled) > 0 {
		out = append(out, res(CheckThrottle, Fail, false, "clocks held down: "+strings.Join(throttled, ", ")))
	} else {
		out = append(out, res(CheckThrottle, Pass, false, ""))
	}

	out = append(out, nvlinkResult(g, st, p, res))
	return out
}

func nvlinkResult(g GPUReading, st *State, p Thresholds, res func(Check, Status, bool, string) Result) Result {
	up := 0
	var down []string
	for _, l := range g.NVLinks {
		if l.Up {
			up++
		} else {
			down = append(down, fmt.Sprint(l.Link))
		}
	}
	if up > st.NVLinksUp[g.Index] {
		st.NVLinksUp[g.Index] = up
	}
	want := p.NVLinksPerGPU
	if want == 0 {
		want = st.NVLinksUp[g.Index]
	}
	switch {
	case want == 0:
		return res(CheckNVLink, Skipped, false, "no NVLink")
	case up < want:
		d := fmt.Sprintf("%d of %d NVLink links up", up, want)
		if len(down) > 0 {
			d += " (down: " + strings.Join(down, ", ") + ")"
		}
		return res(CheckNVLink, Fail, false, d)
	}
	return res(CheckNVLink, Pass, false, fmt.Sprintf("%d NVLink links up", up))
}

// fold merges this poll's results into the remembered faults.
func fold(prev []Fault, rs []Result, now time.Time, p Thresholds) []Fault {
	byKey := make(map[faultKey]Fault, len(prev))
	for _, f := range prev {
		byKey[f.key()] = f
	}
	for _, r := range rs {
		k := faultKey{r.GPU, r.Check}
		f, known := byKey[k]
		switch {
		case r.Status == Fail && !known:
			f = Fault{GPU: r.GPU, UUID: r.UUID, Check: r.Check, Fatal: r.Fatal, Detail: r.Detail, Since: now, LastFailed: now, Phase: Pending}
		case r.Status == Fail:
			f.LastFailed = now
			if r.Fatal || !f.Fatal {
				f.Detail = r.Detail
			}
			f.Fatal = f.Fatal || r.Fatal
			if f.Phase == Recovering {
				f.Phase = Active
			}
		case !known:
			continue
		case f.Phase == Pending:
			// Failed, then passed before it counted: a blip, forgotten.
			delete(byKey, k)
			continue
		case f.Fatal:
			// A fatal fault waits for a reboot, whatever the checks say now.
			f.Phase = Active
		case now.Sub(f.LastFailed) >= p.RecoverAfter:
			delete(byKey, k)
			continue
		default:
			f.Phase = Recovering
		}
		if f.Phase == Pending && now.Sub(f.Since) >= p.Debounce[f.Check] {
			f.Phase = Active
		}
		byKey[k] = f
	}
	out := make([]Fault, 0, len(byKey))
	for _, f := range byKey {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key().less(out[j].key()) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Counts reports whether the fault counts against the node.
func (f Fault) Counts() bool { return f.Phase == Active || f.Phase == Recovering }

func summarize(rep *Report, obs Observation) {
	bad := map[int]bool{}
	var checks []string
	var details []string
	for _, f := range rep.Faults {
		if !f.Counts() {
			continue
		}
		bad[f.GPU] = true
		rep.Fatal = rep.Fatal || f.Fatal
		checks = append(checks, string(f.Check))
		details = append(details, f.describe(rep.Time))
	}
	rep.GPUs = max(obs.ExpectedGPUs, len(obs.GPUs))
	if obs.CountError == "" && !nodeWide(rep.Faults) {
		for _, g := range obs.GPUs {
			if !bad[g.Index] {
				rep.HealthyGPUs++
			}
		}
	}
	if obs.ExpectedGPUs > 0 && rep.HealthyGPUs > obs.ExpectedGPUs {
		rep.HealthyGPUs = obs.ExpectedGPUs
	}
	rep.Healthy = len(checks) == 0
	if rep.Healthy {
		rep.Reason = ReasonHealthy
		rep.Message = fmt.Sprintf("%d of %d GPUs healthy", rep.HealthyGPUs, rep.GPUs)
		return
	}
	rep.Reason = strings.Join(dedupe(checks), ",")
	msg := fmt.Sprintf("%d of %d GPUs healthy: %s", rep.HealthyGPUs, rep.GPUs, strings.Join(details, "; "))
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	rep.Message = msg
}

// nodeWide reports whether a counted fault is on no GPU in particular but
// the node (the GPUs cannot be listed, an XID NVML could not tie to a GPU): then
// no GPU is healthy. A GPU that fell off the bus takes only itself away.
func nodeWide(fs []Fault) bool {
	for _, f := range fs {
		if f.GPU == NodeGPU && f.Check != CheckGPUCount && f.Counts() {
			return true
		}
	}
	return false
}

func (f Fault) describe(now time.Time) string {
	who := "node"
	if f.GPU != NodeGPU {
		who = fmt.Sprintf("GPU %d", f.GPU)
	}
	s := fmt.Sprintf("%s %s: %s", who, f.Check, f.Detail)
	switch {
	case f.Fatal:
		s += " (fatal: until the node reboots)"
	case f.Phase == Recovering:
		s += fmt.Sprintf(" (passing since %s)", f.LastFailed.UTC().Format(time.RFC3339))
	}
	return s
}

func dedupe(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
