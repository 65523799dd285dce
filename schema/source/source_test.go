package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGitRefReadsTheCommittedTreeNotTheWorkTree(t *testing.T) {
	repo := t.TempDir()
	run(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "capacity", "a.cue"), "package capacity\nv: 1\n")
	write(t, filepath.Join(repo, "capacity", "teams", "b.cue"), "package capacity\nw: 1\n")
	write(t, filepath.Join(repo, "capacity", "README.md"), "not cue")
	write(t, filepath.Join(repo, "other.cue"), "package other\n")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-qm", "base")
	// Change the work tree after the commit, including an uncommitted file.
	write(t, filepath.Join(repo, "capacity", "a.cue"), "package capacity\nv: 2\n")
	write(t, filepath.Join(repo, "capacity", "new.cue"), "package capacity\n")
	before, _ := os.ReadFile(filepath.Join(repo, "capacity", "a.cue"))

	fsys, err := GitRef(filepath.Join(repo, "capacity"), "main")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if strings.Join(names, ",") != "a.cue,teams/b.cue" {
		t.Fatalf("files = %v, want a.cue and teams/b.cue", names)
	}
	if b, _ := fs.ReadFile(fsys, "a.cue"); string(b) != "package capacity\nv: 1\n" {
		t.Fatalf("a.cue at main = %q", b)
	}
	after, _ := os.ReadFile(filepath.Join(repo, "capacity", "a.cue"))
	if string(after) != string(before) {
		t.Fatal("the work tree changed")
	}
	if _, err := GitRef(filepath.Join(repo, "capacity"), "no-such-branch"); err == nil || !strings.Contains(err.Error(), "no-such-branch") {
		t.Fatalf("unknown ref: err = %v", err)
	}
	if _, err := GitRef(t.TempDir(), "main"); err == nil {
		t.Fatal("outside a repository: want an error")
	}
}

func TestGitTreeReadsABareRepository(t *testing.T) {
	repo := t.TempDir()
	run(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "fleet", "a.cue"), "package capacity\nv: 1\n")
	write(t, filepath.Join(repo, "fleet", "teams", "b.cue"), "package capacity\nw: 1\n")
	write(t, filepath.Join(repo, "top.cue"), "package other\n")
	run(t, repo, "add", "-A")
	run(t, repo, "commit", "-qm", "base")
	bare := filepath.Join(t.TempDir(), "mirror.git")
	run(t, repo, "clone", "-q", "--bare", repo, bare)
	for _, sub := range []string{"fleet", "/fleet/", "./fleet"} {
		fsys, err := GitTree(bare, "main", sub)
		if err != nil {
			t.Fatal(err)
		}
		got := names(t, fsys)
		if want := "a.cue teams/b.cue"; got != want {
			t.Errorf("GitTree(%q) = %q, want %q", sub, got, want)
		}
	}
	all, err := GitTree(bare, "main", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, all), "fleet/a.cue fleet/teams/b.cue top.cue"; got != want {
		t.Errorf("GitTree(root) = %q, want %q", got, want)
	}
	if _, err := GitTree(bare, "no-such-branch", ""); err == nil {
		t.Error("GitTree of a missing revision: no error")
	}
}

func names(t *testing.T, fsys fs.FS) string {
	t.Helper()
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func tarball(t *testing.T, files map[string]string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func TestTarball(t *testing.T) {
	files := map[string]string{"fleet/a.cue": "package capacity\n", "fleet/teams/b.cue": "package capacity\n", "fleet/README.md": "x", "c.cue": "package other\n"}
	fsys, err := Tarball(tarball(t, files), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, fsys), "a.cue teams/b.cue"; got != want {
		t.Errorf("Tarball(fleet) = %q, want %q", got, want)
	}
	b, err := fs.ReadFile(fsys, "teams/b.cue")
	if err != nil || string(b) != "package capacity\n" {
		t.Errorf("teams/b.cue = %q, %v", b, err)
	}
	for name, content := range map[string]string{"../evil.cue": "x", "/abs.cue": "x", "a/../../b.cue": "x"} {
		if _, err := Tarball(tarball(t, map[string]string{name: content}), ""); err == nil || !strings.Contains(err.Error(), "leaves the archive") {
			t.Errorf("Tarball with %q: err = %v, want one naming the escape", name, err)
		}
	}
	if _, err := Tarball(strings.NewReader("not gzip"), ""); err == nil {
		t.Error("Tarball of garbage: no error")
	}
}
