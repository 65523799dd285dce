package workload

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Spec is one workload as a workload file describes it (one row): a gang of
// Pods pods of GPUsPerPod GPUs each.
type Spec struct {
	ID string
	// Submit and Duration are seconds; the duration is what the job runs once
	// started, and only the simulator sees it.
	Submit   float64
	Duration float64
	Team     string
	Tier     string
	Pods     int64
	// GPUsPerPod is whole GPUs; a fractional share of a GPU counts as one.
	GPUsPerPod int64
	// Flavors the job accepts; empty means any.
	Flavors []string
	Require string
	Prefer  string
	// Cluster pins the job to one cluster of the fleet; empty lets allot
	// route it.
	Cluster string
	// User is the trace's user, when the source has one.
	User string
}

// GPUs returns the job's GPUs in all.
func (j Spec) GPUs() int64 { return j.Pods * j.GPUsPerPod }

// Format names a workload file layout.
type Format string

// The layouts Read understands, told apart by their header.
const (
	FormatAllot      Format = "allot"
	FormatNormalized Format = "normalized"
	FormatHelios     Format = "helios"
	FormatOpenB      Format = "openb"
)

// Error is a problem at one line of a workload file.
type Error struct {
	File string
	Line int
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// MaxJobs bounds the rows read, so a hostile file cannot exhaust memory.
const MaxJobs = 10_000_000

// row reads named columns of one CSV record.
type row struct {
	cols map[string]int
	rec  []string
	line int
	file string
	errs []error
}

func (r *row) str(name string) string {
	i, ok := r.cols[name]
	if !ok || i >= len(r.rec) {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

func (r *row) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// MaxSeconds is the latest arrival and the longest run a history may hold:
// 1e9 seconds, about 31.7 years (the simulator's clock counts microseconds in
// 64 bits, and an arrival plus a run must stay on it).
const MaxSeconds = 1e9

// num parses a finite, non-negative number of seconds up to MaxSeconds;
// blank gives def.
func (r *row) num(name string, def float64) float64 {
	s := r.str(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > MaxSeconds {
		r.fail("column %s: %q is not a non-negative number of seconds up to 1e9 (about 31 years)", name, s)
		return def
	}
	return v
}

// count parses a non-negative whole number; blank gives def.
func (r *row) count(name string, def int64) int64 {
	s := r.str(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || f < 0 || f > 1<<40 {
			r.fail("column %s: %q is not a whole number", name, s)
			return def
		}
		v = int64(f)
	}
	if v < 0 || v > 1<<40 {
		r.fail("column %s: %d is out of range", name, v)
		return def
	}
	return v
}

func (r *row) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return &Error{File: r.file, Line: r.line, Err: errors.Join(r.errs...)}
}

// Read reads a workload file of any known layout; name is used in errors.
func Read(in io.Reader, name string) ([]Spec, Format, error) { return ReadChecked(in, name, nil) }

// ReadChecked is Read with check called on every job read (with the file's
// layout): its error is the file's, at the job's line.
func ReadChecked(in io.Reader, name string, check func(Format, Spec) error) ([]Spec, Format, error) {
	cr := csv.NewReader(in)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, "", &Error{File: name, Line: 1, Err: errors.New("empty file: want a CSV header")}
	}
	if err != nil {
		return nil, "", csvError(name, err)
	}
	cols := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if j, dup := cols[h]; dup && h != "" {
			// Which one is meant? Neither guess is safe.
			return nil, "", &Error{File: name, Line: 1, Err: fmt.Errorf("column %q appears twice (columns %d and %d)", h, j+1, i+1)}
		} else if !dup {
			cols[h] = i
		}
	}
	format, parse, err := detect(cols)
	if err != nil {
		return nil, "", &Error{File: name, Line: 1, Err: err}
	}
	var jobs []Spec
	ids := map[string]int{}
	var prevSubmit float64
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		r := &row{cols: cols, rec: rec, line: line, file: name}
		job, keep := parse(r, &prevSubmit)
		if err := r.err(); err != nil {
			return nil, "", err
		}
		if !keep {
			continue
		}
		if job.Pods > 0 && job.GPUsPerPod > math.MaxInt64/job.Pods {
			return nil, "", &Error{File: name, Line: line, Err: fmt.Errorf("job %s: %d pods of %d GPUs: the GPU count does not fit in 63 bits", job.ID, job.Pods, job.GPUsPerPod)}
		}
		if first, dup := ids[job.ID]; dup {
			return nil, "", &Error{File: name, Line: line, Err: fmt.Errorf("job %s already defined at line %d", job.ID, first)}
		}
		if check != nil {
			if err := check(format, job); err != nil {
				return nil, "", &Error{File: name, Line: line, Err: fmt.Errorf("job %s: %w", job.ID, err)}
			}
		}
		ids[job.ID] = line
		if len(jobs) >= MaxJobs {
			return nil, "", &Error{File: name, Line: line, Err: fmt.Errorf("more than %d jobs", MaxJobs)}
		}
		jobs = append(jobs, job)
	}
	return jobs, format, nil
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Line, Err: pe.Err}
	}
	return fmt.Errorf("reading %s: %w", name, err)
}

type parser func(r *row, prevSubmit *float64) (Spec, bool)

func has(cols map[string]int, names ...string) bool {
	for _, n := range names {
		if _, ok := cols[n]; !ok {
			return false
		}
	}
	return true
}

func detect(cols map[string]int) (Format, parser, error) {
	switch {
	case has(cols, "id", "submit", "duration", "team", "tier", "pods", "gpus_per_pod"):
		return FormatAllot, parseAllot, nil
	case has(cols, "job_id", "submit_time", "duration", "num_gpus"):
		return FormatNormalized, parseNormalized, nil
	case has(cols, "u_id", "user", "gpu_num", "node_num", "interval", "run_time"):
		return FormatHelios, parseHelios, nil
	case has(cols, "name", "num_gpu", "gpu_milli", "creation_time", "deletion_time"):
		return FormatOpenB, parseOpenB, nil
	}
	return "", nil, errors.New("unknown header: want id,submit,duration,team,tier,pods,gpus_per_pod[,flavor,require,prefer], the normalized trace schema (job_id,submit_time,duration,num_gpus,...), Helios (u_id,user,gpu_num,...) or openb pods (name,num_gpu,gpu_milli,...)")
}

func parseAllot(r *row, _ *float64) (Spec, bool) {
	j := Spec{
		ID: r.str("id"), Submit: r.num("submit", 0), Duration: r.num("duration", 0),
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
	gpus := r.count("num_gpus", 0)
	milli := r.count("gpu_milli", 1000)
	j := Spec{ID: r.str("job_id"), Submit: r.num("submit_time", 0), Duration: r.num("duration", 0),
		User: r.str("user"), Team: r.str("team"), Tier: r.str("priority")}
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
	j := Spec{ID: "helios-" + r.str("u_id"), Submit: *prev, Duration: r.num("run_time", 0), User: "u" + r.str("user")}
	j.Team = j.User
	gpus := r.count("gpu_num", 0)
	if gpus == 0 {
		return j, false
	}
	j.Pods, j.GPUsPerPod = gang(gpus, r.count("node_num", 1), 0)
	return j, true
}

func parseOpenB(r *row, _ *float64) (Spec, bool) {
	j := Spec{ID: r.str("name"), Submit: r.num("creation_time", 0), Tier: r.str("qos"), Team: "openb"}
	gpus, milli := r.count("num_gpu", 0), r.count("gpu_milli", 1000)
	start := r.num("scheduled_time", j.Submit)
	end := r.num("deletion_time", -1)
	if j.ID == "" {
		r.fail("column name is empty")
	}
	if gpus == 0 || milli == 0 || end < 0 {
		return j, false // a CPU pod, or one with no recorded end
	}
	j.Duration = max(0, end-start)
	j.Pods, j.GPUsPerPod = 1, gpus
	if s := r.str("gpu_spec"); s != "" {
		j.Flavors = strings.Split(s, "|")
	}
	return j, true
}

// Write writes jobs in the project's CSV layout (with a cluster column when
// a job names one).
func Write(out io.Writer, jobs []Spec) error {
	cw := csv.NewWriter(out)
	header := []string{"id", "submit", "duration", "team", "tier", "pods", "gpus_per_pod", "flavor", "require", "prefer"}
	pinned := slices.ContainsFunc(jobs, func(j Spec) bool { return j.Cluster != "" })
	if pinned {
		header = append(header, "cluster")
	}
	_ = cw.Write(header)
	for _, j := range jobs {
		rec := []string{j.ID, fmtNum(j.Submit), fmtNum(j.Duration), j.Team, j.Tier,
			strconv.FormatInt(j.Pods, 10), strconv.FormatInt(j.GPUsPerPod, 10), strings.Join(j.Flavors, "|"), j.Require, j.Prefer}
		if pinned {
			rec = append(rec, j.Cluster)
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
