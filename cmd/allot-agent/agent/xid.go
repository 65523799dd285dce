package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/allot-dev/allot/fleet/health"
)

// Watcher waits on an NVML event set for XID errors of every GPU.
type Watcher struct {
	set  nvml.EventSet
	free func()
	// Unwatched lists the GPUs whose XIDs cannot be watched, and why.
	Unwatched []string
}

// waitMillis bounds one wait on the event set, so a cancelled context is
// noticed within it (a variable for tests).
var waitMillis uint32 = 500

// NewWatcher creates an event set and registers every GPU that supports XID
// events on it. A GPU that does not is listed in Unwatched (its other checks
// still run); failing to create the set at all is an error.
func NewWatcher(lib nvml.Interface) (*Watcher, error) {
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("creating the NVML event set: %w", ret)
	}
	w := &Watcher{set: set, free: func() { _ = set.Free() }}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		w.free()
		return nil, fmt.Errorf("counting GPUs for XID events: %w", ret)
	}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			w.Unwatched = append(w.Unwatched, fmt.Sprintf("GPU %d: %v", i, ret))
			continue
		}
		types, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 {
			w.Unwatched = append(w.Unwatched, fmt.Sprintf("GPU %d: XID events not supported (%v)", i, ret))
			continue
		}
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			w.Unwatched = append(w.Unwatched, fmt.Sprintf("GPU %d: registering XID events: %v", i, ret))
		}
	}
	return w, nil
}

// Close frees the event set.
func (w *Watcher) Close() { w.free() }

// Run waits for XID events until ctx ends, passing each to emit with the time
// now() gives. A wait that fails for another reason than a timeout is retried
// after a second; the error goes to onError.
func (w *Watcher) Run(ctx context.Context, now func() time.Time, emit func(health.XIDEvent), onError func(error)) {
	for ctx.Err() == nil {
		e, ret := w.set.Wait(waitMillis)
		switch ret {
		case nvml.SUCCESS:
			if e.EventType&nvml.EventTypeXidCriticalError != 0 {
				emit(xidEvent(e, now()))
			}
		case nvml.ERROR_TIMEOUT:
		default:
			onError(fmt.Errorf("waiting for XID events: %w", ret))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// xidEvent ties an event to its GPU; an event NVML cannot tie to one (no
// device, or one that cannot be read) is the whole node's.
func xidEvent(e nvml.EventData, at time.Time) health.XIDEvent {
	ev := health.XIDEvent{GPU: health.NodeGPU, Code: e.EventData, Time: at}
	if e.Device == nil {
		return ev
	}
	i, ret := e.Device.GetIndex()
	if ret != nvml.SUCCESS {
		return ev
	}
	ev.GPU = i
	if u, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
		ev.UUID = u
	}
	return ev
}
