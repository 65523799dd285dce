package capacity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot-dev/allot/schema"
)

// A .cue symbolic link in a cloned repository is an error naming it, as in
// schema/source's Git trees and tarballs, not a file silently left out; the
// regular files are read.
func TestReadCUERefusesLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.cue"), []byte("package capacity\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys, err := readCUE(dir, "")
	if err != nil {
		t.Fatalf("readCUE: %v", err)
	}
	if _, err := fsys.Open("a.cue"); err != nil {
		t.Errorf("a.cue not read: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "teams"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "teams", "b.cue")); err != nil {
		t.Fatal(err)
	}
	if _, err := readCUE(dir, ""); err == nil || !strings.Contains(err.Error(), "teams/b.cue") {
		t.Errorf("readCUE with a .cue link = %v, want an error naming teams/b.cue", err)
	}
}

// spec.path may go through a symbolic link inside the checkout, never through
// one out of it.
func TestReadCUEStaysInTheCheckout(t *testing.T) {
	outside, checkout := t.TempDir(), t.TempDir()
	for _, dir := range []string{filepath.Join(outside, "capacity"), filepath.Join(checkout, "real", "capacity")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.cue"), []byte("package capacity\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"in": "real", "out": outside, "up": ".."} {
		if err := os.Symlink(target, filepath.Join(checkout, name)); err != nil {
			t.Fatal(err)
		}
	}
	if fsys, err := readCUE(checkout, "./in/capacity"); err != nil {
		t.Errorf("through a link inside: %v", err)
	} else if _, err := fs.Stat(fsys, "a.cue"); err != nil {
		t.Errorf("through a link inside, a.cue not read: %v", err)
	}
	for _, p := range []string{"out/capacity", "/out/capacity", "up/" + filepath.Base(outside) + "/capacity"} {
		if _, err := readCUE(checkout, p); err == nil || !strings.Contains(err.Error(), "symbolic link out of the repository") {
			t.Errorf("readCUE(%s) = %v, want a link out of the repository", p, err)
		}
	}
}

// rchar is what this process has read through read(2) and its kin, from
// /proc/self/io.
func rchar(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// A checkout beyond one of schema's bounds of what is read is a *LimitError
// naming the bound and where the walk stopped, found by the walk schema.Load
// makes (schema.WalkSources), and nothing past the bound is read: a sparse
// .cue file of 200 MiB is not read at all (it was read whole, 229 MB of RSS
// for 200,000 small files, 44 s for 4,000 nested folders). Just within each
// bound, the checkout is read.
func TestReadCUEBounded(t *testing.T) {
	pkg := []byte("package capacity\n")
	deep := func(n int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := dir
			for range n {
				p = filepath.Join(p, "d")
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "a.cue"), pkg, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files := func(n int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for i := range n {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.cue", i)), pkg, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	sparse := func(size int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "a.cue"), pkg, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Create(filepath.Join(dir, "big.cue"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, tc := range map[string]struct {
		make      func(t *testing.T, dir string)
		wantPath  string
		wantBound string // "": read
		wantFiles int
	}{
		"32 folders deep":          {make: deep(schema.MaxFolderDepth), wantFiles: 1},
		"33 folders deep":          {make: deep(schema.MaxFolderDepth + 1), wantPath: strings.Repeat("d/", schema.MaxFolderDepth+1), wantBound: "folders nest more than 32 levels deep"},
		"10,001 .cue files":        {make: files(schema.MaxSourceFiles + 1), wantPath: "f10000.cue", wantBound: "more than 10000 .cue files"},
		"16 MiB of .cue":           {make: sparse(schema.MaxSourceBytes - int64(len(pkg))), wantFiles: 2},
		"a sparse file of 200 MiB": {make: sparse(200 << 20), wantPath: "big.cue", wantBound: "more than 16 MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tc.make(t, dir)
			before := rchar(t)
			fsys, err := readCUE(dir, "")
			read := rchar(t) - before
			if read > schema.MaxSourceBytes+8<<20 {
				t.Errorf("read %d bytes, past the bound of %d", read, schema.MaxSourceBytes)
			}
			if tc.wantBound == "" {
				if err != nil {
					t.Fatalf("readCUE: %v", err)
				}
				n := 0
				_ = fs.WalkDir(fsys, ".", func(_ string, d fs.DirEntry, _ error) error {
					if d != nil && !d.IsDir() {
						n++
					}
					return nil
				})
				if n != tc.wantFiles {
					t.Errorf("read %d files, want %d", n, tc.wantFiles)
				}
				return
			}
			var limit *LimitError
			if !errors.As(err, &limit) {
				t.Fatalf("readCUE = %v, want a *LimitError", err)
			}
			if strings.TrimSuffix(limit.Path, "/") != strings.TrimSuffix(tc.wantPath, "/") || !strings.Contains(limit.Bound, tc.wantBound) {
				t.Errorf("LimitError at %q: %q, want at %q: %q", limit.Path, limit.Bound, tc.wantPath, tc.wantBound)
			}
			if !strings.Contains(err.Error(), "rule limit") {
				t.Errorf("error %q does not name the rule", err)
			}
		})
	}
}

// A .cue named pipe in the checkout is an error naming it, never a read that
// hangs the manager.
func TestReadCUERefusesAPipe(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.cue"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := readCUE(dir, ""); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "pipe.cue") || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("readCUE with a .cue pipe = %v, want an error naming pipe.cue, a named pipe", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("readCUE hangs on a .cue named pipe")
	}
}
