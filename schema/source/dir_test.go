package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDirReadsOnlyRegularFilesInside: a named pipe called x.cue is an error
// naming it, at once (it used to block the read forever); a symbolic link that
// leaves the directory is an error naming it (it used to be followed and
// merged); a link to a device is an error; a link that stays inside is read.
func TestDirReadsOnlyRegularFilesInside(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret.cue"), "package capacity\nsecret: 1\n")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.cue"), "package capacity\n")
	write(t, filepath.Join(dir, "teams", "b.cue"), "package capacity\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "x.cue"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"leak.cue":        filepath.Join(outside, "secret.cue"),
		"teams/up.cue":    "../../" + filepath.Base(outside) + "/secret.cue",
		"null.cue":        "/dev/null",
		"inside.cue":      "teams/b.cue",
		"teams/again.cue": "../a.cue",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"x.cue":        "open x.cue: a named pipe (FIFO), not a regular file",
		"leak.cue":     "open leak.cue: a symbolic link to a file outside the repository",
		"teams/up.cue": "open teams/up.cue: a symbolic link to a file outside the repository",
		"null.cue":     "open null.cue: a symbolic link to a file outside the repository",
		"missing.cue":  "open missing.cue: no such file or directory",
		"../a.cue":     "open ../a.cue: invalid argument",
	} {
		done := make(chan error, 1)
		go func() { _, err := fs.ReadFile(fsys, name); done <- err }()
		select {
		case err := <-done:
			if err == nil || err.Error() != want {
				t.Errorf("reading %s: err = %v, want %q", name, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reading %s blocks", name)
		}
	}
	for _, name := range []string{"a.cue", "inside.cue", "teams/again.cue"} {
		if b, err := fs.ReadFile(fsys, name); err != nil || !strings.HasPrefix(string(b), "package capacity") {
			t.Errorf("reading %s: %q, %v", name, b, err)
		}
	}
	entries, err := fs.ReadDir(fsys, "teams")
	if err != nil || len(entries) != 3 {
		t.Errorf("ReadDir(teams) = %v, %v", entries, err)
	}
}

// TestDirRefusesADeviceInside: a device node inside the directory is refused
// even though it does not leave it.
func TestDirRefusesADeviceInside(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mknod(filepath.Join(dir, "dev.cue"), syscall.S_IFCHR|0o644, 0x103); err != nil { // 1,3: /dev/null
		t.Skipf("cannot create a device node here (needs CAP_MKNOD): %v", err)
	}
	fsys, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(fsys, "dev.cue"); err == nil || err.Error() != "open dev.cue: a device, not a regular file" {
		t.Errorf("err = %v", err)
	}
}

// TestGitAndTarballRefuseLinks: a .cue symbolic link committed to Git or packed
// in an archive is an error naming it, not a file whose content is the link.
func TestGitAndTarballRefuseLinks(t *testing.T) {
	repo := t.TempDir()
	run(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "a.cue"), "package capacity\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(repo, "leak.cue")); err != nil {
		t.Fatal(err)
	}
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-qm", "link")
	if _, err := GitRef(repo, "main"); err == nil || !strings.HasPrefix(err.Error(), "leak.cue at ") || !strings.Contains(err.Error(), "a symbolic link") {
		t.Errorf("GitRef: err = %v, want one naming leak.cue", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "leak.cue", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	if _, err := Tarball(&buf, ""); err == nil || !strings.Contains(err.Error(), "leak.cue is not a regular file") {
		t.Errorf("Tarball: err = %v, want one naming leak.cue", err)
	}
}
