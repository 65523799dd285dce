package workload

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// repeat reads head, then body over and over up to n bytes in all.
func repeat(head, body string, n int) io.Reader {
	return io.LimitReader(io.MultiReader(strings.NewReader(head), &cycle{s: body}), int64(n))
}

type cycle struct {
	s string
	i int
}

func (c *cycle) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.s[c.i]
		c.i = (c.i + 1) % len(c.s)
	}
	return len(p), nil
}

// hostileRecords are the third line on of files of 32 MB, a record beyond
// a bound starting there (line 3): a line break within quotes does not end
// a record.
var hostileRecords = map[string]struct {
	start, body string // the record, then body over and over
	want        string
}{
	"a line without breaks":              {"", "x", "f.csv:3: field 1 is longer than 16384 bytes (MaxFieldBytes)"},
	"a quoted field of short lines":      {`j2,0,"`, "xxxxxxx\n", "f.csv:3: field 3 is longer than 16384 bytes (MaxFieldBytes)"},
	"a quoted field of commas and lines": {`j2,"`, ",,\n", "f.csv:3: field 2 is longer than 16384 bytes (MaxFieldBytes)"},
	"escaped quotes and lines":           {`"`, `""` + "\n", "f.csv:3: field 1 is longer than 16384 bytes (MaxFieldBytes)"},
	"fields spanning lines":              {"", `"` + strings.Repeat("x", 60) + "\n" + strings.Repeat("x", 40) + `",`, "f.csv:3: a record of more than 65536 bytes (MaxRecordBytes; a quoted field left open?)"},
	"many fields":                        {"", ",", "f.csv:3: a record of more than 1024 fields (MaxFields)"},
}

// TestRecordBounds: a record, a field and the fields of a record are
// bounded, a quoted field spanning lines counted whole, in the workload
// reader and the node list's: the error names the file and the line the
// record starts at, and reading 32 MB of such a record allocates a few
// (MaxRecordBytes, not the file).
func TestRecordBounds(t *testing.T) {
	heads := map[string]string{"workload": "job_id,submit_time,duration,num_gpus\nj1,0,1,1\n", "nodes": "name,gpus,flavor\nn1,1,a\n"}
	for name, tc := range hostileRecords {
		for reader, read := range map[string]func(io.Reader) error{
			"workload": func(in io.Reader) error { _, _, err := Read(in, "f.csv"); return err },
			"nodes":    func(in io.Reader) error { _, err := ReadNodes(in, "f.csv"); return err },
		} {
			t.Run(name+"/"+reader, func(t *testing.T) {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := read(repeat(heads[reader]+tc.start, tc.body, 32<<20))
				runtime.ReadMemStats(&after)
				var we *Error
				if !errors.As(err, &we) || err.Error() != tc.want {
					t.Errorf("err = %v, want %s", err, tc.want)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
					t.Errorf("allocated %d KB reading a 32 MB record; want under 4 MB", grew>>10)
				}
			})
		}
	}
}

// TestQuotedRecordsWithinBounds: quoted fields holding separators, quotes
// and line breaks are one field each, and the records after them keep
// their lines.
func TestQuotedRecordsWithinBounds(t *testing.T) {
	wide := `"` + strings.Repeat(`,""`+"\n", 2000) + `"` // 2,000 separators and 2,000 lines: one field
	in := "job_id,submit_time,duration,num_gpus,note\nj1,0,1,1," + wide + "\nj2,0,1,2,\"a\nb\"\nj3,0,1,3,x\n"
	jobs, _, err := Read(strings.NewReader(in), "f.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 || jobs[2].GPUsPerPod != 3 {
		t.Fatalf("jobs %+v", jobs)
	}
	rd, err := NewReader(strings.NewReader(in), "f.csv")
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
		lines = append(lines, rd.Line())
	}
	if want := []int{2, 2003, 2005}; len(lines) != 3 || lines[0] != want[0] || lines[1] != want[1] || lines[2] != want[2] {
		t.Errorf("lines %v, want %v", lines, want)
	}
}

// TestUnpackedBound: a gzip-compressed file, or a tar archive in one, is
// read up to MaxUnpackedBytes of what it expands to (lowered here to 1 MiB):
// blank lines that compress a thousandfold are an error naming the bound.
func TestUnpackedBound(t *testing.T) {
	defer func(m int64) { maxUnpacked = m }(maxUnpacked)
	maxUnpacked = 1 << 20
	body := "job_id,submit_time,duration,num_gpus\nj1,0,1,1\n" + strings.Repeat("\n", 2<<20)
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	if err := tw.WriteHeader(&tar.Header{Name: "t.csv", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, body)
	tw.Close()
	for name, raw := range map[string][]byte{"gzip": []byte(body), "tar.gz": tarred.Bytes()} {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw)
		zw.Close()
		_, _, err := Read(&gz, "f.csv.gz")
		var we *Error
		if !errors.As(err, &we) || !strings.HasPrefix(err.Error(), "f.csv.gz:") || !strings.Contains(err.Error(), "unpacks to more than 1048576 bytes (MaxUnpackedBytes)") {
			t.Errorf("%s: err = %v, want f.csv.gz:LINE: ... unpacks to more than 1048576 bytes", name, err)
		}
	}
	// Within the bound, the same file reads.
	maxUnpacked = 4 << 20
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, body)
	zw.Close()
	if jobs, _, err := Read(&gz, "f.csv.gz"); err != nil || len(jobs) != 1 {
		t.Errorf("within the bound: %d jobs, %v", len(jobs), err)
	}
}
