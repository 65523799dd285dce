package source

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
