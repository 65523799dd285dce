package runner

import (
	"cmp"
	"slices"
	"strings"

	"github.com/allot-dev/allot/scheduler"
)

// Waiting is a gang the scheduler holds back for want of nodes: it fits its
// team's quota, not the free nodes (scheduler.ReasonInsufficientNodes or
// ReasonNoTopologyDomain).
type Waiting struct {
	Team   string
	Flavor string
	// GPUs of the whole gang, and of each of its pods.
	GPUs, PodGPUs int64
	// Level is the topology level all its pods must share a domain of, when
	// that is what it waits for.
	Level string
	// Cluster is the cluster it is pinned to, if any.
	Cluster string
}

// MaxWaiting bounds the gangs Demand returns.
const MaxWaiting = 10000

// Demand returns the gangs that wait for nodes, oldest first, and the nodes
// on which a live pod holds GPUs (allot's or another scheduler's): what a
// pool's burst decides from (fleet/elastic), as the scheduler sees it now.
func (r *Runner) Demand() ([]Waiting, map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	busy := map[string]bool{}
	for _, p := range r.st.pods {
		if p.node != "" && p.gpus > 0 && !p.terminal {
			busy[p.node] = true
		}
	}
	for node, gpus := range r.st.foreignOn {
		if gpus > 0 {
			busy[node] = true
		}
	}
	if r.core == nil {
		return nil, busy
	}
	type entry struct {
		w   Waiting
		at  int64
		key string
	}
	var out []entry
	for id, g := range r.st.gangs {
		if g.phase != queued {
			continue
		}
		why, ok := r.core.Reason(scheduler.WorkloadID(id))
		if !ok || why.Code != scheduler.ReasonInsufficientNodes && why.Code != scheduler.ReasonNoTopologyDomain {
			continue
		}
		w := Waiting{Team: string(g.spec.Team), Flavor: string(why.Flavor), GPUs: g.spec.GPUs(), PodGPUs: g.spec.GPUsPerPod, Cluster: g.spec.Cluster}
		if why.Code == scheduler.ReasonNoTopologyDomain {
			w.Level = why.Level
		}
		out = append(out, entry{w: w, at: g.spec.Submitted.UnixNano(), key: id})
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.key, b.key)) })
	ws := make([]Waiting, 0, min(len(out), MaxWaiting))
	for _, e := range out[:min(len(out), MaxWaiting)] {
		ws = append(ws, e.w)
	}
	return ws, busy
}
