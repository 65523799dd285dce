package agent

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/allot-dev/allot/fleet/health"
)

// Facts are what a poll needs to know of the node besides its GPUs.
type Facts struct {
	// BootID identifies the node's boot; a new one clears every fault.
	BootID string
	// GPUs is how many GPUs the node advertises (0: unknown).
	GPUs int
	// State is the health state kept on the node, if any (read at start only).
	State *health.State
}

// Publisher is where the agent's findings go: the node itself, or stdout.
type Publisher interface {
	Load(ctx context.Context) (Facts, error)
	Publish(ctx context.Context, rep health.Report, st health.State) error
}

// Options tune an Agent.
type Options struct {
	// Interval between polls (XID events trigger one at once).
	Interval time.Duration
	// ExpectedGPUs overrides the node's advertised GPU count (0: use it).
	ExpectedGPUs int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Metrics, if set, records every poll.
	Metrics *Metrics
}

// Agent polls the GPUs, folds XID events in, and publishes each report.
type Agent struct {
	reader  *Reader
	watcher *Watcher
	policy  health.Thresholds
	pub     Publisher
	opts    Options

	state  health.State
	loaded bool
	// seenGPUs is the most GPUs NVML listed this boot: a GPU that falls off the
	// bus later is missed even when the device plugin re-registers with fewer.
	seenGPUs int
	bootID   string

	mu   sync.Mutex
	xids []health.XIDEvent
	wake chan struct{}
}

// New returns an Agent; watcher may be nil (no XID events, polls only).
func New(reader *Reader, watcher *Watcher, policy health.Thresholds, pub Publisher, opts Options) *Agent {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	return &Agent{reader: reader, watcher: watcher, policy: policy, pub: pub, opts: opts, wake: make(chan struct{}, 1)}
}

// AddXID queues an XID event for the next poll and wakes the agent.
func (a *Agent) AddXID(ev health.XIDEvent) {
	a.mu.Lock()
	a.xids = append(a.xids, ev)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Agent) drain() []health.XIDEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.xids
	a.xids = nil
	return out
}

// Poll reads the GPUs once, decides and publishes. When the node cannot be
// read, nothing is decided and queued XIDs wait for the next poll; when the
// report cannot be published, the decision is kept and published next time,
// and the node keeps its last written state meanwhile.
func (a *Agent) Poll(ctx context.Context) (health.Report, error) {
	facts, err := a.pub.Load(ctx)
	if err != nil {
		a.opts.Metrics.pollFailed()
		return health.Report{}, err
	}
	now := a.opts.Now()
	if !a.loaded {
		if facts.State != nil {
			a.state = restore(*facts.State, now)
		}
		a.loaded = true
	}
	obs := a.reader.Read()
	obs.BootID = facts.BootID
	obs.ExpectedGPUs = a.expected(facts, obs)
	obs.XIDs = a.drain()
	st, rep := health.Evaluate(a.state, obs, now, a.policy)
	a.state = st
	a.opts.Metrics.observe(rep)
	if err := a.pub.Publish(ctx, rep, st); err != nil {
		a.opts.Metrics.pollFailed()
		return rep, err
	}
	return rep, nil
}

// expected is how many GPUs the node should have: the configured count if any,
// else the most of what the node advertises and what NVML listed this boot.
func (a *Agent) expected(facts Facts, obs health.Observation) int {
	if a.opts.ExpectedGPUs > 0 {
		return a.opts.ExpectedGPUs
	}
	if facts.BootID != a.bootID {
		a.bootID, a.seenGPUs = facts.BootID, 0
	}
	if obs.CountError == "" {
		a.seenGPUs = max(a.seenGPUs, len(obs.GPUs))
	}
	return max(facts.GPUs, a.seenGPUs)
}

// restore takes a state kept on the node by an earlier agent: its faults'
// recovery clocks start over, since nobody watched them in between.
func restore(st health.State, now time.Time) health.State {
	faults := make([]health.Fault, len(st.Faults))
	for i, f := range st.Faults {
		f.LastFailed = now
		faults[i] = f
	}
	st.Faults = faults
	return st
}

// Run polls at once, then every interval and whenever an XID arrives, until ctx
// ends. Poll errors are logged and retried at the next tick. It returns once the
// XID watcher has stopped too, so the caller may then close it.
func (a *Agent) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if a.watcher != nil {
		for _, u := range a.watcher.Unwatched {
			log.Info("XID events not watched", "gpu", u)
		}
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			a.watcher.Run(ctx, a.opts.Now, a.AddXID, func(err error) { log.Error(err, "XID events") })
		}()
	}
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	var last health.Report
	for {
		rep, err := a.Poll(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil // stopped mid-poll: not a failure
		case err != nil:
			log.Error(err, "GPU health poll")
		case rep.Reason != last.Reason || rep.HealthyGPUs != last.HealthyGPUs:
			log.Info("GPU health", "healthy", rep.Healthy, "reason", rep.Reason, "healthyGPUs", rep.HealthyGPUs, "gpus", rep.GPUs, "message", rep.Message)
			last = rep
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.wake:
		}
	}
}
