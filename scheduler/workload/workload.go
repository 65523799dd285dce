package workload

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
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
	// Slurm is what Slurm's accounting says of a job read from sacct's
	// output; nil for other layouts.
	Slurm *SlurmJob
}

// GPUs returns the job's GPUs in all.
func (j Spec) GPUs() int64 { return j.Pods * j.GPUsPerPod }

// Format names a workload file layout.
type Format string

// The layouts Read understands, told apart by their header.
const (
	FormatAllot      Format = "allot"
	FormatNormalized Format = "normalized"
	// FormatHelios is the Helios trace in DIR-LAB's layout (u_id, interval, ...).
	FormatHelios Format = "helios"
	// FormatHeliosLog is a HeliosData cluster_log.csv (Venus, Earth, Saturn,
	// Uranus): Slurm jobs with date-time submit, start and end times.
	FormatHeliosLog Format = "helios-cluster-log"
	FormatOpenB     Format = "openb"
	// FormatPAI is Alibaba's cluster-trace-gpu-v2020 pai_task_table, with its
	// header or without it (as the trace ships).
	FormatPAI Format = "pai-task"
	// FormatSacct is the output of Slurm's sacct --parsable2 (-P) or
	// --parsable (-p): its jobs' accounts, partitions and GRES types in
	// Spec.Slurm.
	FormatSacct Format = "sacct"
)

// Error is a problem at one line of a workload file.
type Error struct {
	File string
	Line int
	Err  error
	// As names the layout the file was read as, for a trace's rows: the
	// reader guessed it from the header.
	As string
}

func (e *Error) Error() string {
	if e.As != "" {
		return fmt.Sprintf("%s:%d: %v (read as %s)", e.File, e.Line, e.Err, e.As)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// MaxJobs bounds the rows read, so a hostile file cannot exhaust memory.
const MaxJobs = 10_000_000

// MaxSeconds is the latest arrival and the longest run a history may hold:
// 1e9 seconds, about 31.7 years (the simulator's clock counts microseconds in
// 64 bits, and an arrival plus a run must stay on it).
const MaxSeconds = 1e9

// row reads named columns of one CSV record.
type row struct {
	cols  map[string]int
	rec   []string
	line  int
	file  string
	errs  []error
	times *clock // the file's date-time columns; nil reads numbers only
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

// num parses a finite, non-negative number of seconds up to MaxSeconds;
// blank gives def.
func (r *row) num(name string, def float64) float64 {
	s := r.str(name)
	if s == "" {
		return def
	}
	v, ok := seconds(s)
	if !ok {
		r.fail("column %s: %q is not a non-negative number of seconds up to 1e9 (about 31 years)%s", name, s, epochHint(s))
		return def
	}
	return v
}

// seconds parses a finite, non-negative number up to MaxSeconds.
func seconds(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= MaxSeconds
}

// epochHint explains a number that reads as a Unix time: the times of a
// workload count from the trace's start.
func epochHint(s string) string {
	if v, err := strconv.ParseFloat(s, 64); err == nil && v > MaxSeconds && v < 1e11 {
		return "; a Unix time? give seconds from the trace's start, or a date and time (2020-06-09 18:41:01)"
	}
	return ""
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
	rd, err := NewReader(in, name)
	if err != nil {
		return nil, "", err
	}
	var jobs []Spec
	for {
		job, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if check != nil {
			if err := check(rd.Format(), job); err != nil {
				return nil, "", &Error{File: name, Line: rd.Line(), Err: fmt.Errorf("job %s: %w", job.ID, err)}
			}
		}
		jobs = append(jobs, job)
	}
	if shift := rd.Shift(); shift != 0 {
		for i := range jobs {
			jobs[i].Submit += shift
		}
	}
	return jobs, rd.Format(), nil
}

// Writer writes jobs in the project's CSV layout, one at a time.
type Writer struct {
	cw     *csv.Writer
	pinned bool
	header bool
}

// NewWriter returns a Writer to out; pinned adds the cluster column (jobs
// that name a cluster need it).
func NewWriter(out io.Writer, pinned bool) *Writer {
	return &Writer{cw: csv.NewWriter(out), pinned: pinned}
}

// Write writes one job (the header first).
func (w *Writer) Write(j Spec) error {
	if err := w.writeHeader(); err != nil {
		return err
	}
	rec := []string{j.ID, fmtNum(j.Submit), fmtNum(j.Duration), j.Team, j.Tier,
		strconv.FormatInt(j.Pods, 10), strconv.FormatInt(j.GPUsPerPod, 10), strings.Join(j.Flavors, "|"), j.Require, j.Prefer}
	if w.pinned {
		rec = append(rec, j.Cluster)
	} else if j.Cluster != "" {
		return fmt.Errorf("job %s names cluster %s: the writer has no cluster column", j.ID, j.Cluster)
	}
	return w.cw.Write(rec)
}

func (w *Writer) writeHeader() error {
	if w.header {
		return nil
	}
	w.header = true
	header := []string{"id", "submit", "duration", "team", "tier", "pods", "gpus_per_pod", "flavor", "require", "prefer"}
	if w.pinned {
		header = append(header, "cluster")
	}
	return w.cw.Write(header)
}

// Flush writes the header if no job was written, and what is buffered.
func (w *Writer) Flush() error {
	if err := w.writeHeader(); err != nil {
		return err
	}
	w.cw.Flush()
	return w.cw.Error()
}

// Write writes jobs in the project's CSV layout (with a cluster column when
// a job names one).
func Write(out io.Writer, jobs []Spec) error {
	pinned := false
	for _, j := range jobs {
		pinned = pinned || j.Cluster != ""
	}
	w := NewWriter(out, pinned)
	for _, j := range jobs {
		if err := w.Write(j); err != nil {
			return err
		}
	}
	return w.Flush()
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
