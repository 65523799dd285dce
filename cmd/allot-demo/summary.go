package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
	"github.com/allot-dev/allot/scheduler/runner"
)

// snapshot is the scheduling as the API shows it: the Teams' quota and the
// status the scheduler writes, the pools' nodes, and where each workload runs
// or why it waits.
type snapshot struct {
	teams     []teamRow
	pools     []poolRow
	workloads []workloadRow
}

// teamRow is one flavor of a team's quota; pending is the team's, on every row.
type teamRow struct {
	team, flavor            string
	nominal, used, borrowed int64
	pending                 int64
}

type poolRow struct {
	pool, flavor                    string
	target, nodes, gpus, used, pods int64
}

type workloadRow struct {
	id, tier                string
	pods, gpusPerPod, bound int64
	// where says the pools (and the required domain) of the bound pods.
	where string
	// reason is the PodScheduled=False message the scheduler wrote.
	reason string
}

func (w *workloadRow) running() bool { return w.bound == w.pods }

func (w *workloadRow) state() string {
	switch {
	case w.running():
		return "running"
	case w.bound == 0:
		return "pending"
	}
	return fmt.Sprintf("partial %d/%d", w.bound, w.pods) // a broken gang: the scheduler must never do this
}

// workload returns the row of id, or nil.
func (s *snapshot) workload(id string) *workloadRow {
	for i := range s.workloads {
		if s.workloads[i].id == id {
			return &s.workloads[i]
		}
	}
	return nil
}

// snapshot reads the scheduling. detail is empty when it is consistent: every
// pod is bound or has a pending reason, and every Team's status agrees with
// the bound pods; else it says what does not agree yet.
func (d *demo) snapshot(ctx context.Context) (*snapshot, string, error) {
	var teams allotv1.TeamList
	var pools allotv1.PoolList
	var nodes corev1.NodeList
	var pods corev1.PodList
	for _, l := range []client.ObjectList{&teams, &pools, &nodes} {
		if err := d.c.List(ctx, l); err != nil {
			return nil, "", err
		}
	}
	if err := d.c.List(ctx, &pods, client.HasLabels{contract.LabelTeam}); err != nil {
		return nil, "", err
	}
	nodeByName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		nodeByName[nodes.Items[i].Name] = &nodes.Items[i]
	}

	s := &snapshot{}
	detail := ""
	// used[team][flavor] and pending[team], as the bound pods say.
	used := map[string]map[string]int64{}
	pending := map[string]int64{}
	poolUse := map[string]*poolRow{}
	for _, p := range pools.Items {
		poolUse[p.Name] = &poolRow{pool: p.Name, flavor: p.Spec.Flavor, target: p.Spec.NodesTarget}
	}
	for _, n := range nodes.Items {
		if r := poolUse[n.Labels[contract.LabelPool]]; r != nil {
			q := n.Status.Allocatable[nodestate.ResourceGPU]
			r.nodes++
			r.gpus += q.Value()
		}
	}

	byWorkload := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := p.Name
		if g := p.Labels[contract.LabelGang]; g != "" {
			name = g
		}
		id := p.Namespace + "/" + name
		byWorkload[id] = append(byWorkload[id], p)
	}
	for _, id := range slices.Sorted(maps.Keys(byWorkload)) {
		ps := byWorkload[id]
		first := ps[0]
		team := first.Labels[contract.LabelTeam]
		w := workloadRow{id: id, tier: first.Labels[contract.LabelTier], pods: int64(len(ps)), gpusPerPod: runner.PodGPUs(first)}
		if n, err := strconv.ParseInt(first.Labels[contract.LabelGangSize], 10, 64); err == nil {
			w.pods = n
		}
		inPool := map[string]int64{}
		domains := map[string]bool{}
		for _, p := range ps {
			if p.Spec.NodeName == "" {
				if msg := pendingMessage(p); msg != "" {
					w.reason = msg
				} else if detail == "" {
					detail = "pod " + p.Namespace + "/" + p.Name + " has neither a node nor a pending reason"
				}
				continue
			}
			w.bound++
			n := nodeByName[p.Spec.NodeName]
			if n == nil {
				continue
			}
			pool, flavor := n.Labels[contract.LabelPool], n.Labels[contract.LabelFlavor]
			inPool[pool]++
			if u := used[team]; u == nil {
				used[team] = map[string]int64{}
			}
			used[team][flavor] += runner.PodGPUs(p)
			if r := poolUse[pool]; r != nil {
				r.used += runner.PodGPUs(p)
				r.pods++
			}
			if lvl := first.Labels[contract.LabelRequire]; lvl != "" {
				domains[lvl+" "+n.Labels[contract.TopologyLabel(lvl)]] = true
			}
		}
		if w.bound == 0 {
			pending[team]++
		}
		var where []string
		for _, pool := range slices.Sorted(maps.Keys(inPool)) {
			where = append(where, fmt.Sprintf("%s ×%d", pool, inPool[pool]))
		}
		where = append(where, slices.Sorted(maps.Keys(domains))...)
		w.where = strings.Join(where, ", ")
		s.workloads = append(s.workloads, w)
	}

	for _, t := range teams.Items {
		status := map[string]allotv1.FlavorUsage{}
		for _, f := range t.Status.Flavors {
			status[f.Flavor] = f
		}
		if t.Status.PendingWorkloads != pending[t.Name] && detail == "" {
			detail = fmt.Sprintf("team %s status: %d pending workloads, the pods say %d", t.Name, t.Status.PendingWorkloads, pending[t.Name])
		}
		quota := slices.Clone(t.Spec.Quota)
		slices.SortFunc(quota, func(a, b allotv1.FlavorQuota) int { return cmp.Compare(a.Flavor, b.Flavor) })
		for _, q := range quota {
			st := status[q.Flavor]
			if st.UsedGPUs != used[t.Name][q.Flavor] && detail == "" {
				detail = fmt.Sprintf("team %s status: %d %s GPUs used, the pods say %d", t.Name, st.UsedGPUs, q.Flavor, used[t.Name][q.Flavor])
			}
			s.teams = append(s.teams, teamRow{team: t.Name, flavor: q.Flavor, nominal: q.Nominal, used: st.UsedGPUs, borrowed: st.BorrowedGPUs, pending: t.Status.PendingWorkloads})
		}
	}
	slices.SortFunc(s.teams, func(a, b teamRow) int { return cmp.Or(cmp.Compare(a.team, b.team), cmp.Compare(a.flavor, b.flavor)) })
	for _, name := range slices.Sorted(maps.Keys(poolUse)) {
		s.pools = append(s.pools, *poolUse[name])
	}
	return s, detail, nil
}

// pendingMessage is the message of the pod's PodScheduled=False condition.
func pendingMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

// print writes the snapshot as three tables.
func (s *snapshot) print(w io.Writer) {
	fmt.Fprintln(w, "         Teams (quota from Git; used, borrowed and pending from the scheduler's Team status)")
	t := newTable(w, "TEAM", "FLAVOR", "QUOTA", "USED", "BORROWED", "PENDING")
	prev := ""
	for _, r := range s.teams {
		team, pending := r.team, fmt.Sprint(r.pending)
		if team == prev {
			team, pending = "", ""
		}
		prev = r.team
		t.row(team, r.flavor, r.nominal, r.used, r.borrowed, pending)
	}
	t.flush()
	fmt.Fprintln(w, "\n         Pools")
	t = newTable(w, "POOL", "FLAVOR", "NODES", "GPUS", "USED", "PODS")
	for _, r := range s.pools {
		t.row(r.pool, r.flavor, r.nodes, r.gpus, r.used, r.pods)
	}
	t.flush()
	fmt.Fprintln(w, "\n         Workloads")
	t = newTable(w, "WORKLOAD", "TIER", "PODS", "STATE", "WHERE, OR WHY IT WAITS")
	for _, r := range s.workloads {
		where := r.where
		if !r.running() {
			where = r.reason
		}
		t.row(r.id, r.tier, fmt.Sprintf("%d×%d GPU", r.pods, r.gpusPerPod), r.state(), where)
	}
	t.flush()
}

// String is the snapshot as printed.
func (s *snapshot) String() string {
	var b strings.Builder
	s.print(&b)
	return b.String()
}

// changes says what differs from before, one line each.
func (s *snapshot) changes(before *snapshot) []string {
	var out []string
	arrow := func(what string, a, b int64) string {
		if a == b {
			return ""
		}
		return fmt.Sprintf("%s %d → %d", what, a, b)
	}
	join := func(parts ...string) string {
		return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), ", ")
	}
	teamBefore := map[string]teamRow{}
	for _, r := range before.teams {
		teamBefore[r.team+" "+r.flavor] = r
	}
	pendingSaid := map[string]bool{}
	for _, r := range s.teams {
		b := teamBefore[r.team+" "+r.flavor]
		if c := join(arrow("quota", b.nominal, r.nominal), arrow("used", b.used, r.used), arrow("borrowed", b.borrowed, r.borrowed)); c != "" {
			out = append(out, fmt.Sprintf("team %s %s: %s", r.team, r.flavor, c))
		}
		if c := arrow("pending workloads", b.pending, r.pending); c != "" && !pendingSaid[r.team] {
			pendingSaid[r.team] = true
			out = append(out, fmt.Sprintf("team %s: %s", r.team, c))
		}
	}
	poolBefore := map[string]poolRow{}
	for _, r := range before.pools {
		poolBefore[r.pool] = r
	}
	for _, r := range s.pools {
		b := poolBefore[r.pool]
		if c := join(arrow("nodesTarget", b.target, r.target), arrow("nodes", b.nodes, r.nodes), arrow("GPUs used", b.used, r.used), arrow("pods", b.pods, r.pods)); c != "" {
			out = append(out, fmt.Sprintf("pool %s: %s", r.pool, c))
		}
	}
	for _, r := range s.workloads {
		b := before.workload(r.id)
		switch {
		case b == nil:
			out = append(out, fmt.Sprintf("%s: new, %s", r.id, r.state()))
		case b.state() != r.state() && r.running():
			out = append(out, fmt.Sprintf("%s: %s → running on %s", r.id, b.state(), r.where))
		case b.state() != r.state():
			out = append(out, fmt.Sprintf("%s: %s → %s: %s", r.id, b.state(), r.state(), r.reason))
		case b.where != r.where:
			out = append(out, fmt.Sprintf("%s: moved from %s to %s", r.id, b.where, r.where))
		}
	}
	if len(out) == 0 {
		out = append(out, "nothing")
	}
	return out
}

// table is an aligned table indented under a step.
type table struct {
	w   io.Writer
	buf strings.Builder
	tw  *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	cells := make([]any, len(headers))
	for i, h := range headers {
		cells[i] = h
	}
	t.row(cells...)
	return t
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintf(t.tw, "         %s\n", strings.Join(parts, "\t"))
}

// flush writes the table, without the padding of empty last cells.
func (t *table) flush() {
	t.tw.Flush()
	for l := range strings.Lines(t.buf.String()) {
		fmt.Fprintln(t.w, strings.TrimRight(l, " \n"))
	}
	t.buf.Reset()
}
