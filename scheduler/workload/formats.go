package workload

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

type parser func(r *row, prevSubmit *float64) (Spec, bool)

// layout is one file layout Read understands, told by its header.
type layout struct {
	format Format
	name   string   // in errors
	need   []string // the columns it cannot do without
	// also, when set, is a further need on the header's columns.
	also  func(cols map[string]int) error
	parse parser
	hint  string // added to the error of a header that almost matches
}

var layouts = []*layout{
	{format: FormatAllot, name: "allot's workload CSV", need: []string{"id", "submit", "duration", "team", "tier", "pods", "gpus_per_pod"}, parse: parseAllot},
	{format: FormatNormalized, name: "the normalized trace schema", need: []string{"job_id", "submit_time", "duration", "num_gpus"}, parse: parseNormalized},
	{format: FormatHeliosLog, name: "a HeliosData cluster_log.csv", need: []string{"job_id", "gpu_num", "submit_time"}, parse: parseHeliosLog,
		also: func(cols map[string]int) error {
			if !has(cols, "duration") && !has(cols, "start_time", "end_time") {
				return errors.New("it has neither duration nor start_time and end_time: a job needs how long it ran")
			}
			return nil
		}},
	{format: FormatHelios, name: "the Helios trace in DIR-LAB's layout", need: []string{"u_id", "gpu_num", "interval", "run_time"}, parse: parseHelios},
	{format: FormatOpenB, name: "an openb pod list of cluster-trace-gpu-v2023", need: []string{"name", "num_gpu", "creation_time", "deletion_time"}, parse: parseOpenB,
		hint: "; the openb_pod_list_multigpu* files have no times: a replay needs each pod's creation and deletion time"},
	{format: FormatPAI, name: "the pai_task_table of Alibaba's cluster-trace-gpu-v2020", need: []string{"job_name", "task_name", "inst_num", "start_time", "end_time", "plan_gpu"}, parse: parsePAI,
		hint: "; pai_job_table has no GPU counts: import pai_task_table"},
	{format: FormatSacct, name: "Slurm's sacct -P output", need: []string{"jobid", "submit", "start"}, also: sacctNeed, parse: parseSacct,
		hint: "; run sacct -a -X -P -o JobID,Account,User,Partition,QOS,Submit,Start,End,State,NNodes,AllocTRES"},
}

// paiColumns is pai_task_table's header, which the trace ships apart
// (pai_task_table.header).
var paiColumns = []string{"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"}

func has(cols map[string]int, names ...string) bool {
	for _, n := range names {
		if _, ok := cols[n]; !ok {
			return false
		}
	}
	return true
}

// detect tells the layout of a header. When none matches, the error names
// the layout the header comes closest to and the columns it lacks.
func detect(cols map[string]int) (*layout, error) {
	var best *layout
	var bestHas, bestLacks []string
	for _, l := range layouts {
		var in, out []string
		for _, c := range l.need {
			if has(cols, c) {
				in = append(in, c)
			} else {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			if l.also != nil {
				if err := l.also(cols); err != nil {
					return nil, fmt.Errorf("the header looks like %s, but %w", l.name, err)
				}
			}
			return l, nil
		}
		// The closest: most of its columns there (a share, so that a short
		// layout is not outweighed by a long one).
		if len(in) >= 2 && (best == nil || len(in)*len(best.need) > len(bestHas)*len(l.need)) {
			best, bestHas, bestLacks = l, in, out
		}
	}
	if best != nil {
		return nil, fmt.Errorf("the header looks like %s (it has %s) but lacks %s%s", best.name, strings.Join(bestHas, ", "), strings.Join(bestLacks, ", "), best.hint)
	}
	var want []string
	for _, l := range layouts {
		want = append(want, fmt.Sprintf("%s (%s)", l.name, strings.Join(l.need, ",")))
	}
	return nil, fmt.Errorf("unknown header: want the columns of %s", strings.Join(want, "; or "))
}

// headerless returns the layout and columns of a file whose first line is
// data: Alibaba's pai_task_table as it ships, without its header.
func headerless(rec []string) (*layout, map[string]int) {
	if len(rec) != len(paiColumns) {
		return nil, nil
	}
	switch strings.TrimSpace(rec[3]) { // status
	case "Terminated", "Failed", "Running", "Waiting":
	default:
		return nil, nil
	}
	for _, i := range []int{2, 4, 5, 8} { // inst_num, start_time, end_time, plan_gpu
		if s := strings.TrimSpace(rec[i]); s != "" {
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return nil, nil
			}
		}
	}
	cols := map[string]int{}
	for i, c := range paiColumns {
		cols[c] = i
	}
	for _, l := range layouts {
		if l.format == FormatPAI {
			return &layout{format: l.format, name: l.name + " without its header", parse: l.parse}, cols
		}
	}
	return nil, nil
}

// flavors splits a list of GPU models; "nan" (pandas' blank) is none, and a
// model listed twice is kept once.
func flavors(s string) []string {
	if s == "" || strings.EqualFold(s, "nan") || s == "None" {
		return nil
	}
	var out []string
	for _, f := range strings.Split(s, "|") {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func parseAllot(r *row, _ *float64) (Spec, bool) {
	j := Spec{
		ID: r.str("id"), Submit: r.submit("submit"), Duration: r.num("duration", 0),
		Team: r.str("team"), Tier: r.str("tier"),
		Pods: r.count("pods", 1), GPUsPerPod: r.count("gpus_per_pod", 0),
		Require: r.str("require"), Prefer: r.str("prefer"), Cluster: r.str("cluster"),
	}
	if f := r.str("flavor"); f != "" {
		j.Flavors = strings.Split(f, "|")
	}
	for name, v := range map[string]string{"id": j.ID, "team": j.Team, "tier": j.Tier} {
		if v == "" {
			r.fail("column %s is empty", name)
		}
	}
	if r.str("pods") != "" && j.Pods < 1 {
		r.fail("column pods: want at least 1")
	}
	if r.str("gpus_per_pod") == "" || j.GPUsPerPod < 1 {
		r.fail("column gpus_per_pod: want at least 1")
	}
	return j, true
}

// gang maps a job of gpus GPUs over nodes nodes (perNode each when known) to pods.
func gang(gpus, nodes, perNode int64) (pods, gpp int64) {
	if nodes <= 1 {
		return 1, gpus
	}
	if perNode <= 0 {
		perNode = (gpus + nodes - 1) / nodes
	}
	return nodes, perNode
}

func parseNormalized(r *row, _ *float64) (Spec, bool) {
	j := Spec{ID: r.str("job_id"), Submit: r.submit("submit_time"), Duration: r.num("duration", 0),
		User: r.str("user"), Team: r.str("team"), Tier: r.str("priority")}
	gpus := r.count("num_gpus", 0)
	milli := r.count("gpu_milli", 1000)
	if j.ID == "" {
		r.fail("column job_id is empty")
	}
	if gpus == 0 || milli == 0 {
		return j, false // a CPU job: nothing for a GPU scheduler
	}
	j.Pods, j.GPUsPerPod = gang(gpus, r.count("num_nodes", 1), r.count("gpus_per_node", 0))
	if j.Team == "" {
		j.Team = j.User
	}
	return j, true
}

func parseHelios(r *row, prev *float64) (Spec, bool) {
	*prev += r.num("interval", 0)
	j := Spec{ID: "helios-" + r.str("u_id"), Submit: *prev, Duration: r.num("run_time", 0)}
	if *prev > MaxSeconds {
		r.fail("column interval: the submit time, their running sum, passes 1e9 seconds (about 31 years)")
	}
	if u := r.str("user"); u != "" {
		j.User = "u" + u
	}
	j.Team = j.User
	if r.str("u_id") == "" {
		r.fail("column u_id is empty")
	}
	gpus := r.count("gpu_num", 0)
	if gpus == 0 {
		return j, false
	}
	j.Pods, j.GPUsPerPod = gang(gpus, r.count("node_num", 1), 0)
	return j, true
}

// parseHeliosLog reads a Slurm job of HeliosData: its virtual cluster (vc)
// is its team. Whatever its state (COMPLETED, FAILED, CANCELLED, TIMEOUT,
// NODE_FAIL), a job that ran is replayed for as long as it ran; one that
// never started (no start_time) or has not ended (no duration, no end_time:
// RUNNING, PENDING) is left out.
func parseHeliosLog(r *row, _ *float64) (Spec, bool) {
	j := Spec{ID: r.str("job_id"), Submit: r.submit("submit_time"), User: r.str("user"), Team: r.str("vc")}
	if j.Team == "" {
		j.Team = j.User
	}
	if j.ID == "" {
		r.fail("column job_id is empty")
	}
	gpus := r.count("gpu_num", 0)
	ran := false
	switch {
	case r.str("duration") != "":
		j.Duration, ran = r.num("duration", 0), true
		if has(r.cols, "start_time") {
			_, _, ran = r.instant("start_time")
		}
	case has(r.cols, "start_time", "end_time"):
		j.Duration, ran = r.span("start_time", "end_time")
	}
	if gpus == 0 || !ran {
		return j, false
	}
	j.Pods, j.GPUsPerPod = gang(gpus, r.count("node_num", 1), 0)
	return j, true
}

// parseOpenB reads an openb pod: it runs from its scheduling (its creation
// when it never was: a Pending pod, deleted while waiting) to its deletion.
func parseOpenB(r *row, _ *float64) (Spec, bool) {
	j := Spec{ID: r.str("name"), Submit: r.submit("creation_time"), Tier: r.str("qos")} // no user: no Team
	gpus, milli := r.count("num_gpu", 0), r.count("gpu_milli", 1000)
	start := j.Submit
	if r.str("scheduled_time") != "" {
		start = r.submit("scheduled_time")
	}
	end := r.submit("deletion_time")
	if j.ID == "" {
		r.fail("column name is empty")
	}
	if r.str("deletion_time") == "" {
		return j, false // no recorded end
	}
	if end < start {
		r.fail("column deletion_time: %s is before the pod's start %s (a negative run)", r.str("deletion_time"), fmtNum(start))
	}
	if gpus == 0 || milli == 0 {
		return j, false // a CPU pod
	}
	j.Duration = end - start
	j.Pods, j.GPUsPerPod = 1, gpus
	j.Flavors = flavors(r.str("gpu_spec"))
	return j, true
}

// parsePAI reads a task of pai_task_table as a gang of its instances, each
// of plan_gpu percent of a GPU (50 is half a GPU, which counts as one; 800
// is eight). The table records when a task was launched, not when its job
// was submitted: a replay's wait counts from the launch. A task that never
// launched or has not ended (Waiting, Running) is left out.
func parsePAI(r *row, _ *float64) (Spec, bool) {
	j := Spec{ID: r.str("job_name") + "/" + r.str("task_name"), Submit: r.submit("start_time")}
	if r.str("job_name") == "" {
		r.fail("column job_name is empty")
	}
	pods := r.count("inst_num", 1)
	gpu := 0.0
	if s := r.str("plan_gpu"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 100<<20 {
			r.fail("column plan_gpu: %q is not a percentage of GPUs (50 is half a GPU, 800 eight)", s)
		}
		gpu = v
	}
	end := r.submit("end_time")
	if r.str("start_time") == "" || r.str("end_time") == "" {
		return j, false
	}
	if end < j.Submit {
		r.fail("column end_time: %s is before start_time %s (a negative run)", r.str("end_time"), r.str("start_time"))
	}
	if gpu == 0 || pods == 0 {
		return j, false // a CPU task (a parameter server)
	}
	j.Duration = end - j.Submit
	j.Pods, j.GPUsPerPod = pods, int64(math.Ceil(gpu/100))
	return j, true
}
