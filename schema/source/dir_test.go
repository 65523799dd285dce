package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/allot-dev/allot/schema"
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

// TestLoadBoundsRealRepositories: what the loading process reads from a
// directory and from Git is bounded before it is read. A sparse .cue file of
// 255 MiB was read whole before the 16 MiB bound was checked (250 MB: 329 MB
// of RSS); a Git base whose tree holds a blob of 1 GiB of zeros (1.2 MB in .git) was
// read whole, twice (56 s, 5.3 GB); now each is refused from its size, and
// 10,001 .cue files or 100,001 files in a tree from the tree's listing.
func TestLoadBoundsRealRepositories(t *testing.T) {
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.TotalAlloc
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.cue"), "package capacity\n")
	write(t, filepath.Join(dir, "big.cue"), "package capacity\n")
	if err := os.Truncate(filepath.Join(dir, "big.cue"), 255<<20); err != nil {
		t.Fatal(err)
	}
	fsys, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := heap()
	_, findings := schema.Load(fsys)
	if len(findings) != 1 || findings[0].Rule != schema.RuleLimit || findings[0].Pos.File != "big.cue" || !strings.Contains(findings[0].Message, "hold more than 16 MiB") {
		t.Errorf("a 255 MiB file: findings = %v", findings)
	}
	if n := heap() - before; n > 64<<20 {
		t.Errorf("a 255 MiB file: %d MiB allocated to refuse it", n>>20)
	}

	repo := t.TempDir()
	run(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "a.cue"), "package capacity\n")
	if err := os.WriteFile(filepath.Join(repo, "big.cue"), make([]byte, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-qm", "big")
	before = heap()
	_, err = GitRef(repo, "main")
	if le := (*LimitError)(nil); !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "big.cue at ") || !strings.HasSuffix(err.Error(), "the repository's .cue files hold more than 16 MiB") {
		t.Errorf("a 64 MiB blob: err = %v", err)
	}
	if n := heap() - before; n > 16<<20 {
		t.Errorf("a 64 MiB blob: %d MiB allocated to refuse it", n>>20)
	}

	// Trees of many entries, made from one blob without a work tree.
	blob := gitOut(t, repo, strings.NewReader("package capacity\n"), "hash-object", "-w", "--stdin")
	tree := func(n int, name string) string {
		var list strings.Builder
		for i := range n {
			fmt.Fprintf(&list, "100644 blob %s\t"+name+"\n", blob, i)
		}
		return gitOut(t, repo, strings.NewReader(list.String()), "mktree", "--missing")
	}
	for _, tc := range []struct {
		n          int
		name, want string
	}{
		{schema.MaxSourceFiles + 1, "f%05d.cue", "f10000.cue at %s: the repository holds more than 10000 .cue files"},
		{schema.MaxEntries + 1, "f%06d.md", "f100000.md at %s: the repository holds more than 100000 files"},
	} {
		tr := tree(tc.n, tc.name)
		_, err := GitTree(repo, tr, "")
		if le := (*LimitError)(nil); !errors.As(err, &le) || err.Error() != fmt.Sprintf(tc.want, tr) {
			t.Errorf("%d files: err = %v, want %q", tc.n, err, fmt.Sprintf(tc.want, tr))
		}
	}

	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "big.cue", Typeflag: tar.TypeReg, Size: schema.MaxSourceBytes + 1, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, schema.MaxSourceBytes+1)); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	if _, err := Tarball(&buf, ""); err == nil || err.Error() != "big.cue in the archive: the repository's .cue files hold more than 16 MiB" {
		t.Errorf("Tarball: err = %v", err)
	}
}

func gitOut(t *testing.T, dir string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestLoadFollowsNoLinkLoop: a .cue link to itself, a .cue link to the
// repository's own folder, a folder link to its parent and a link to
// /dev/zero each end at once: an error naming the link, or (the folder link)
// not walked, never a loop or an endless read.
func TestLoadFollowsNoLinkLoop(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.cue"), "package capacity\n")
	for link, target := range map[string]string{"loop.cue": "loop.cue", "dir.cue": ".", "up": "..", "self": ".", "zero.cue": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan schema.Findings, 1)
	go func() { _, f := schema.Load(fsys); done <- f }()
	var findings schema.Findings
	select {
	case findings = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Load does not end")
	}
	got := map[string]string{}
	for _, f := range findings {
		got[f.Pos.File] = f.Message
	}
	want := map[string]string{
		"dir.cue":  "cannot read: read dir.cue: is a directory",
		"loop.cue": "cannot read: open loop.cue: EvalSymlinks: too many links",
		"zero.cue": "cannot read: open zero.cue: a symbolic link to a file outside the repository",
	}
	if len(got) != len(want) {
		t.Errorf("findings = %v", findings)
	}
	for file, msg := range want {
		if !strings.HasPrefix(got[file], msg) {
			t.Errorf("%s: %q, want %q", file, got[file], msg)
		}
	}
}
