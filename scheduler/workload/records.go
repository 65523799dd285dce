package workload

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
)

// Bounds of one record of a CSV file allot reads (a workload or trace, a
// node list, an events file). encoding/csv holds a record whole while it
// reads it, and a quoted field may span any number of lines: the bounds are
// on the record, its quoted line breaks included, not on a line. The widest
// record of the real traces (Helios, Alibaba openb and PAI) is under 400
// bytes and 27 fields.
const (
	// MaxRecordBytes bounds one record, a quoted field spanning lines
	// counted whole.
	MaxRecordBytes = 64 << 10
	// MaxFieldBytes bounds one field of a record.
	MaxFieldBytes = 16 << 10
	// MaxFields bounds the fields of one record (csv keeps two offsets and
	// a string header for each, whatever its length).
	MaxFields = 1024
)

// MaxUnpackedBytes bounds what a gzip-compressed file (or a tar archive in
// one) expands to: as much as allot reads of a plain file, where a workload
// of MaxJobs rows fits. A few megabytes of gzip can expand to terabytes.
const MaxUnpackedBytes = 2 << 30

// Records reads a CSV file record by record within MaxRecordBytes,
// MaxFieldBytes and MaxFields, so that no file holds more than one bounded
// record in memory at a time. Every error is an *Error at its line.
type Records struct {
	name  string
	cr    *csv.Reader
	guard *recordGuard
}

// NewRecords reads in, a CSV file of fields separated by comma (',', '\t'
// or ';'); name is used in errors. The records Read returns are reused:
// copy what is kept.
func NewRecords(in io.Reader, name string, comma rune) *Records {
	g := &recordGuard{r: in, comma: byte(comma), line: 1, start: 1}
	cr := csv.NewReader(g)
	cr.Comma = comma
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	return &Records{name: name, cr: cr, guard: g}
}

// Read returns the next record and the line it starts at; io.EOF after the
// last one.
func (r *Records) Read() ([]string, int, error) {
	rec, err := r.cr.Read()
	if err != nil {
		return nil, 0, r.error(err)
	}
	line, _ := r.cr.FieldPos(0)
	return rec, line, nil
}

func (r *Records) error(err error) error {
	var pe *csv.ParseError
	var be *boundError
	var we *Error
	switch {
	case err == io.EOF:
		return err
	case errors.As(err, &we):
		return we
	case errors.As(err, &be):
		return &Error{File: r.name, Line: be.line, Err: be}
	case errors.As(err, &pe):
		return &Error{File: r.name, Line: pe.Line, Err: pe.Err}
	}
	// A failure of what the file is read through (gzip, tar): at the line
	// it stopped in.
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("the compressed file ends early (truncated?): %w", err)
	}
	return &Error{File: r.name, Line: r.guard.line, Err: err}
}

// recordGuard follows the records of a CSV stream as encoding/csv reads
// them (RFC 4180 quoting, strict quotes, no comments) and fails the read
// where a record or a field grows beyond its bound. Where csv would find a
// quote out of place, it has failed already; what the guard reads after
// that does not matter.
type recordGuard struct {
	r     io.Reader
	comma byte
	line  int // the line being read
	start int // the line the record being read starts at
	state csvState
	// bytes of the record and of the field, and the fields before it
	record, field, fields int
	err                   error
}

type csvState uint8

const (
	fieldStart csvState = iota
	unquoted            // a field not quoted
	quoted              // within the quotes of a field
	quote               // a quote within a quoted field: "" or its end
)

// boundError is a record or field beyond its bound, at the line its record
// starts.
type boundError struct {
	line int
	what string
}

func (e *boundError) Error() string { return e.what }

func (g *recordGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	for i, c := range p[:n] {
		if e := g.step(c); e != nil {
			// What came before is csv's to read; the record stops here.
			g.err = e
			return i, e
		}
	}
	return n, err
}

func (g *recordGuard) step(c byte) error {
	if c == '\n' {
		g.line++
	}
	if g.record == 0 && c != '\n' {
		g.start = g.line
	}
	switch g.state {
	case fieldStart:
		switch c {
		case '"':
			g.state = quoted
		case '\n':
			g.endRecord()
			return nil
		case g.comma:
			return g.nextField()
		default:
			g.state = unquoted
		}
	case unquoted:
		switch c {
		case '\n':
			g.endRecord()
			return nil
		case g.comma:
			return g.nextField()
		}
	case quoted:
		if c == '"' {
			g.state = quote
		}
	case quote:
		switch c {
		case '"':
			g.state = quoted
		case '\n':
			g.endRecord()
			return nil
		case g.comma:
			return g.nextField()
		case '\r': // csv reads "\r\n" as "\n"
		default:
			g.state = unquoted // csv has failed: a bare quote
		}
	}
	g.record++
	g.field++
	switch {
	case g.record > MaxRecordBytes:
		return &boundError{line: g.start, what: fmt.Sprintf("a record of more than %d bytes (MaxRecordBytes; a quoted field left open?)", MaxRecordBytes)}
	case g.field > MaxFieldBytes:
		return &boundError{line: g.start, what: fmt.Sprintf("field %d is longer than %d bytes (MaxFieldBytes)", g.fields+1, MaxFieldBytes)}
	}
	return nil
}

func (g *recordGuard) nextField() error {
	g.state = fieldStart
	g.record++
	g.field = 0
	if g.fields++; g.fields >= MaxFields {
		return &boundError{line: g.start, what: fmt.Sprintf("a record of more than %d fields (MaxFields)", MaxFields)}
	}
	return nil
}

func (g *recordGuard) endRecord() {
	g.state = fieldStart
	g.record, g.field, g.fields = 0, 0, 0
}

// maxUnpacked is MaxUnpackedBytes, which a test lowers to reach it quickly.
var maxUnpacked int64 = MaxUnpackedBytes

// unpacked fails a read of a decompressed stream (gzip's, or a file of a
// tar archive, which may be sparse) beyond MaxUnpackedBytes.
type unpacked struct {
	r io.Reader
	n int64
}

func (u *unpacked) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if u.n += int64(n); u.n > maxUnpacked {
		return 0, fmt.Errorf("it unpacks to more than %d bytes (MaxUnpackedBytes): split the trace", maxUnpacked)
	}
	return n, err
}
