// Package testfiles finds the inputs tests read: the full traces and contract
// repository in ../shared beside the clone when it is there (CI has it), else the
// slices of them that travel with the clone in testdata/. Tests only.
package testfiles

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Shared is the path of rel under ../shared (or $ALLOT_SHARED, which the Makefile
// sets from SHARED: ALLOT_SHARED=none runs the tests as on a bare clone), and
// whether it exists.
func Shared(rel string) (string, bool) {
	dir := os.Getenv("ALLOT_SHARED")
	if dir == "" {
		dir = filepath.Join(Root(), "..", "shared")
	}
	p := filepath.Join(dir, rel)
	_, err := os.Stat(p)
	return p, err == nil
}

// Path is rel (e.g. "traces/helios/helios_15k_users.csv") in ../shared when it is
// there, full true; else its slice in testdata/, full false.
func Path(rel string) (path string, full bool) {
	if p, ok := Shared(rel); ok {
		return p, true
	}
	return Local(rel), false
}

// Local is rel in testdata/, whether or not ../shared is there.
func Local(rel string) string { return filepath.Join(Root(), "testdata", rel) }

// Golden compares got with the file at path, or (update, a test's -update
// flag) rewrites it.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}
