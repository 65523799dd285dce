// Package testfiles finds the inputs tests read: the full traces and contract
// repository in ../shared beside the clone when it is there (CI has it), else the
// slices of them that travel with the clone in testdata/. Tests only.
package testfiles

import (
	"os"
	"path/filepath"
	"runtime"
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
