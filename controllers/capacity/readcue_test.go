package capacity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A .cue symbolic link in a cloned repository is an error naming it, as in
// schema/source's Git trees and tarballs, not a file silently left out; the
// regular files are read.
func TestReadCUERefusesLinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.cue"), []byte("package capacity\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys, err := readCUE(dir)
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
	if _, err := readCUE(dir); err == nil || !strings.Contains(err.Error(), "teams/b.cue") {
		t.Errorf("readCUE with a .cue link = %v, want an error naming teams/b.cue", err)
	}
}
