package workload

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"strconv"
	"strings"
)

// Reader reads a workload file one job at a time, so a trace of any length
// is converted in bounded memory (allot import). Its jobs' submit times are
// final once Next has returned io.EOF: add Shift to them (a file of dates
// and times counts from its earliest, which may come after the first row).
type Reader struct {
	name   string
	recs   *Records
	cols   map[string]int
	layout *layout
	// first is a record read as the header that is data (a headerless
	// trace): Next returns it first.
	first     []string
	firstLine int
	line      int
	prev      float64 // the DIR-LAB Helios layout's running submit time
	times     clock
	ids       map[uint64]int // job IDs' hashes and lines: hashed, to hold 10^7 in bounded memory
	seed      maphash.Seed
	jobs      int
	done      bool
}

// NewReader reads the header of a workload file (plain, gzip-compressed, or
// a .tar.gz holding one file) and tells its layout from it; name is used
// in errors.
func NewReader(in io.Reader, name string) (*Reader, error) {
	in, err := unpack(in, name)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(in, 64<<10)
	if isJSON(br) {
		return nil, &Error{File: name, Line: 1, Err: errors.New("JSON, not CSV: allot imports CSV traces (Philly's cluster_job_log is JSON: convert it to the normalized trace schema first)")}
	}
	rd := &Reader{name: name, recs: NewRecords(br, name, separator(br)), ids: map[uint64]int{}, seed: maphash.MakeSeed(),
		times: clock{kinds: map[string]timeKind{}}}
	header, _, err := rd.recs.Read()
	if err == io.EOF {
		return nil, &Error{File: name, Line: 1, Err: errors.New("empty file: want a CSV header")}
	}
	if err != nil {
		return nil, err
	}
	if l, cols := headerless(header); l != nil {
		rd.first, rd.firstLine = append([]string(nil), header...), 1
		rd.cols, rd.layout = cols, l
		return rd, nil
	}
	cols := map[string]int{}
	numbers := 0
	for i, h := range header {
		if _, err := strconv.ParseFloat(strings.TrimSpace(h), 64); err == nil {
			numbers++
		}
		h = columnName(h)
		if j, dup := cols[h]; dup && h != "" {
			// Which one is meant? Neither guess is safe.
			return nil, &Error{File: name, Line: 1, Err: fmt.Errorf("column %q appears twice (columns %d and %d)", h, j+1, i+1)}
		} else if !dup {
			cols[h] = i
		}
	}
	l, err := detect(cols)
	if err != nil {
		if numbers*2 >= len(header) {
			err = fmt.Errorf("line 1 holds numbers, not column names: the file needs a header; %w", err)
		}
		return nil, &Error{File: name, Line: 1, Err: err}
	}
	rd.cols, rd.layout = cols, l
	return rd, nil
}

// isJSON tells whether the file starts (after a byte order mark and blanks)
// as JSON does.
func isJSON(br *bufio.Reader) bool {
	head, _ := br.Peek(64)
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\ufeff")), " \t\r\n")
	return len(head) > 0 && (head[0] == '[' || head[0] == '{')
}

// separator tells the fields' separator from the header line: a comma,
// else a tab (TSV), a semicolon (what a spreadsheet writes for CSV where
// the comma is the decimal sign) or a pipe (sacct -P).
func separator(br *bufio.Reader) rune {
	head, _ := br.Peek(br.Size())
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	for _, c := range []byte{',', '\t', ';', '|'} {
		if bytes.IndexByte(head, c) >= 0 {
			return rune(c)
		}
	}
	return ','
}

// columnName is a header's column as the layouts name it: lower case,
// without the byte order mark a spreadsheet writes, spaces and hyphens as
// underscores (DIR-LAB documents its columns as "u id", "gpu num").
func columnName(h string) string {
	h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
	return strings.NewReplacer(" ", "_", "-", "_").Replace(h)
}

// Format is the layout the header told.
func (rd *Reader) Format() Format { return rd.layout.format }

// Line is the line of the job Next returned last.
func (rd *Reader) Line() int { return rd.line }

// Shift is what to add to every job's submit time once Next has returned
// io.EOF: the seconds from the file's earliest dated submit time to its
// first (0 for a file of seconds).
func (rd *Reader) Shift() float64 { return rd.times.origin - rd.times.earliest }

// Next returns the next job; io.EOF after the last one. Rows of jobs
// without GPUs, or without a recorded run, are skipped.
func (rd *Reader) Next() (Spec, error) {
	for !rd.done {
		rec, line, err := rd.record()
		if err == io.EOF {
			rd.done = true
			break
		}
		if err != nil {
			return Spec{}, err
		}
		if blank(rec) {
			continue // an empty line, or a spreadsheet's row of empty cells
		}
		r := &row{cols: rd.cols, rec: rec, line: line, file: rd.name, times: &rd.times}
		job, keep := rd.layout.parse(r, &rd.prev)
		if err := r.err(); err != nil {
			return Spec{}, rd.rowError(err)
		}
		if !keep {
			continue
		}
		if job.Pods > 0 && job.GPUsPerPod > math.MaxInt64/job.Pods {
			return Spec{}, rd.rowError(&Error{File: rd.name, Line: line, Err: fmt.Errorf("job %s: %d pods of %d GPUs: the GPU count does not fit in 63 bits", job.ID, job.Pods, job.GPUsPerPod)})
		}
		h := maphash.String(rd.seed, job.ID)
		if first, dup := rd.ids[h]; dup {
			return Spec{}, &Error{File: rd.name, Line: line, Err: fmt.Errorf("job %s already defined at line %d", job.ID, first)}
		}
		rd.ids[h] = line
		if rd.jobs++; rd.jobs > MaxJobs {
			return Spec{}, &Error{File: rd.name, Line: line, Err: fmt.Errorf("more than %d jobs", MaxJobs)}
		}
		rd.line = line
		return job, nil
	}
	// The latest submit, counted from the earliest, must stay on the clock.
	if c := rd.times; c.set && c.latest+rd.Shift() > MaxSeconds {
		return Spec{}, &Error{File: rd.name, Line: c.latestLine, Err: fmt.Errorf("the submit time is %.0f s after the file's earliest: more than 1e9 (about 31 years)", c.latest+rd.Shift())}
	}
	return Spec{}, io.EOF
}

// rowError names the guessed layout in a trace row's error.
func (rd *Reader) rowError(err error) error {
	var we *Error
	if errors.As(err, &we) && rd.layout.format != FormatAllot {
		we.As = rd.layout.name
	}
	return err
}

func (rd *Reader) record() ([]string, int, error) {
	if rd.first != nil {
		rec := rd.first
		rd.first = nil
		return rec, rd.firstLine, nil
	}
	return rd.recs.Read()
}

func blank(rec []string) bool {
	for _, f := range rec {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// unpack reads through gzip (the Alibaba traces ship as .tar.gz) and a tar
// archive of one file; other archives and compressions are an error that
// says so.
func unpack(in io.Reader, name string) (io.Reader, error) {
	br := bufio.NewReaderSize(in, 64<<10)
	magic, _ := br.Peek(6)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &Error{File: name, Line: 1, Err: fmt.Errorf("reading it as gzip: %w", err)}
		}
		return untar(bufio.NewReaderSize(&unpacked{r: zr}, 64<<10), name)
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")) && strings.HasSuffix(strings.ToLower(name), ".xlsx"),
		bytes.HasPrefix(magic, []byte{0xd0, 0xcf, 0x11, 0xe0}):
		return nil, &Error{File: name, Line: 1, Err: errors.New("a spreadsheet workbook: save the sheet as CSV (comma- or semicolon-separated) and import that")}
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")):
		return nil, &Error{File: name, Line: 1, Err: errors.New("a zip archive: unzip it and import the CSV file in it (HeliosData's cluster_log.csv)")}
	case bytes.HasPrefix(magic, []byte("\xfd7zXZ")), bytes.HasPrefix(magic, []byte("BZh")), bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return nil, &Error{File: name, Line: 1, Err: errors.New("compressed with xz, bzip2 or zstd: decompress it first (allot reads plain and gzip-compressed CSV)")}
	}
	return untar(br, name)
}

// untar returns the one file of a tar archive, or br itself when it is not
// one.
func untar(br *bufio.Reader, name string) (io.Reader, error) {
	head, _ := br.Peek(512)
	if len(head) < 512 || !bytes.Equal(head[257:262], []byte("ustar")) {
		return br, nil
	}
	tr := tar.NewReader(br)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, &Error{File: name, Line: 1, Err: errors.New("a tar archive without a file")}
		}
		if err != nil {
			return nil, &Error{File: name, Line: 1, Err: fmt.Errorf("reading it as a tar archive: %w", err)}
		}
		if h.Typeflag == tar.TypeReg {
			return &unpacked{r: &oneFile{tr: tr, name: name, first: h.Name}}, nil
		}
	}
}

// oneFile reads the first file of a tar archive, and fails at its end when
// another follows: which one is the trace is not for allot to guess.
type oneFile struct {
	tr          *tar.Reader
	name, first string
	err         error // once the first file has ended: every later read's
}

func (f *oneFile) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.tr.Read(p)
	if err != io.EOF {
		return n, err
	}
	for f.err == nil {
		h, err := f.tr.Next()
		switch {
		case err != nil:
			f.err = err // io.EOF: the first file was the only one
		case h.Typeflag == tar.TypeReg:
			f.err = fmt.Errorf("the archive holds %s and %s: extract the one to import", f.first, h.Name)
		}
	}
	return n, f.err
}
