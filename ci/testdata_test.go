package ci

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/testfiles"
)

// TestTestdataSlicesMatchShared checks that every file under testdata/ that has a
// full copy in ../shared is that copy (contract/) or whole rows of it in its order
// (traces/), and that each trace folder keeps its licence beside the slices. The
// comparison needs ../shared; the licence check does not.
func TestTestdataSlicesMatchShared(t *testing.T) {
	root := testfiles.Local("")
	for _, dir := range []string{"traces/helios", "traces/openb"} {
		lic, _ := filepath.Glob(filepath.Join(root, dir, "LICENSE*"))
		if len(lic) == 0 {
			t.Errorf("testdata/%s: no LICENSE file beside the slices", dir)
		}
	}
	compared := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) == "README.md" && filepath.Dir(path) == filepath.Clean(root) {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		full, ok := testfiles.Shared(rel)
		if !ok {
			return nil
		}
		slice, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		whole, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		compared++
		if !strings.HasPrefix(rel, "traces/") || !strings.HasSuffix(rel, ".csv") {
			if !bytes.Equal(slice, whole) {
				t.Errorf("testdata/%s differs from %s: copy it again", rel, full)
			}
			return nil
		}
		if !isSubsequence(lines(slice), lines(whole)) {
			t.Errorf("testdata/%s is not whole rows of %s in their order", rel, full)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := testfiles.Shared("traces"); ok && compared == 0 {
		t.Error("../shared is there but no file of testdata/ was compared with it")
	}
}

func lines(b []byte) []string { return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") }

// isSubsequence reports whether every line of sub is in all, in the same order.
func isSubsequence(sub, all []string) bool {
	i := 0
	for _, l := range all {
		if i < len(sub) && sub[i] == l {
			i++
		}
	}
	return i == len(sub)
}
