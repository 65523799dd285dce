package capacity

import (
	"io/fs"
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
