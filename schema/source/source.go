package source

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing/fstest"

	"github.com/allot-dev/allot/schema"
)

// Dir returns the files under dir, or an error when dir is not a readable
// directory. Only regular files inside dir can be opened: a symbolic link is
// followed only while it stays inside dir, and a named pipe, a device or a
// socket is an error naming the file (never a read that hangs). How much is
// read is schema.Load's to bound (schema.MaxSourceBytes): it reads a file no
// larger than what remains of it.
func Dir(dir string) (fs.FS, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	root, err := filepath.Abs(dir)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return dirFS(root), nil
}

// pathErr is the cause of a *fs.PathError (its path is added again), or err.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// dirFS is a directory that serves only regular files and directories inside it.
type dirFS string

func (root dirFS) Open(name string) (fs.File, error) {
	fail := func(err error) (fs.File, error) { return nil, &fs.PathError{Op: "open", Path: name, Err: err} }
	if !fs.ValidPath(name) {
		return fail(fs.ErrInvalid)
	}
	r := string(root)
	resolved, err := filepath.EvalSymlinks(filepath.Join(r, filepath.FromSlash(name)))
	if err != nil {
		return fail(pathErr(err))
	}
	if resolved != r && !strings.HasPrefix(resolved, r+string(filepath.Separator)) {
		return fail(errors.New("a symbolic link to a file outside the repository"))
	}
	// O_NONBLOCK: a named pipe put in place after the check below still
	// cannot block the open.
	f, err := os.OpenFile(resolved, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail(pathErr(err))
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case st.IsDir():
		return f, nil
	case st.Mode()&fs.ModeNamedPipe != 0:
		err = errors.New("a named pipe (FIFO), not a regular file")
	case st.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		err = errors.New("a device, not a regular file")
	case !st.Mode().IsRegular():
		err = fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	default:
		return f, nil
	}
	f.Close()
	return fail(err)
}

// ErrNotARepository is returned when dir is not inside a Git work tree.
var ErrNotARepository = errors.New("not inside a Git repository")

// Repo is a Git repository named explicitly: its Git directory and the top of
// its work tree. Git is only read there, never obeyed: every command names
// GitDir and runs with none of the programs, hooks, attributes or
// configuration beyond GitDir's own that Git would otherwise apply (run).
type Repo struct{ GitDir, Top string }

// FindRepo returns the repository whose work tree holds dir, and dir's path
// inside it ("" for the top, slash-separated). The repository is the one of
// the working directory when dir is inside its work tree, else the nearest
// folder above dir (or dir) that holds a .git entry. A folder that merely
// looks like a bare repository (HEAD, config, objects, refs: plain files a
// commit can hold) is never one: a commit cannot hold a .git entry, so the
// repository found is the checkout's, never one that the files under review
// make up.
func FindRepo(dir string) (Repo, string, error) {
	abs, err := realPath(dir)
	if err != nil {
		return Repo{}, "", fmt.Errorf("%s: %w", dir, err)
	}
	if wd, err := os.Getwd(); err == nil {
		if wd, err := realPath(wd); err == nil {
			if r, ok := discover(wd); ok {
				if sub, ok := inside(r.Top, abs); ok {
					return r, sub, nil
				}
			}
		}
	}
	if r, ok := discover(abs); ok {
		if sub, ok := inside(r.Top, abs); ok {
			return r, sub, nil
		}
	}
	return Repo{}, "", fmt.Errorf("%s: %w", dir, ErrNotARepository)
}

func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// inside returns p's path under top, slash-separated, when p is top or below it.
func inside(top, p string) (string, bool) {
	rel, err := filepath.Rel(top, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	if rel == "." {
		return "", true
	}
	return filepath.ToSlash(rel), true
}

// maxGitFile bounds a .git file (a worktree's or a submodule's "gitdir: PATH").
const maxGitFile = 4 << 10

// discover walks up from dir to the first folder holding a .git directory, or
// a .git file naming one; it never takes a folder for a bare repository.
func discover(dir string) (Repo, bool) {
	for d := dir; ; {
		dot := filepath.Join(d, ".git")
		if st, err := os.Stat(dot); err == nil {
			switch {
			case st.IsDir():
				return Repo{GitDir: dot, Top: d}, true
			case st.Mode().IsRegular() && st.Size() <= maxGitFile:
				b, err := os.ReadFile(dot)
				if target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); err == nil && ok {
					if !filepath.IsAbs(target) {
						target = filepath.Join(d, target)
					}
					return Repo{GitDir: filepath.Clean(target), Top: d}, true
				}
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return Repo{}, false
		}
		d = parent
	}
}

// GitRef returns the files that the directory dir holds at ref (a branch, tag or
// commit of the Git repository that contains dir, FindRepo's), read from Git's
// objects. Only .cue files are read; the work tree and the index are not touched.
func GitRef(dir, ref string) (fs.FS, error) {
	r, sub, err := FindRepo(dir)
	if err != nil {
		return nil, err
	}
	commit, err := r.Commit(ref)
	if err != nil {
		return nil, err
	}
	return r.Tree(commit, sub)
}

// Commit returns the commit that ref names in r.
func (r Repo) Commit(ref string) (string, error) {
	out, err := r.Output(nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil || len(out) == 0 {
		return "", fmt.Errorf("git ref %q: not found in %s", ref, r.Top)
	}
	return string(out), nil
}

// GitTree returns the .cue files under the directory sub of commit rev in the
// Git repository at repo: a work tree's top (its .git is read) or a Git
// directory, which may be bare. See Repo.Tree.
func GitTree(repo, rev, sub string) (fs.FS, error) {
	r := Repo{GitDir: repo, Top: repo}
	if st, err := os.Stat(filepath.Join(repo, ".git")); err == nil && st.IsDir() {
		r.GitDir = filepath.Join(repo, ".git")
	}
	return r.Tree(rev, sub)
}

// Tree returns the .cue files under the directory sub (relative to the
// repository root, "" for the root) of commit rev. Only Git's objects are
// read, and only once the tree's listing shows them within schema's bounds (a
// *LimitError otherwise): a blob of a gigabyte of zeros, a few kilobytes in
// Git, is never read.
func (r Repo) Tree(rev, sub string) (fs.FS, error) {
	sub = strings.Trim(path.Clean("/"+sub), "/")
	prefixPath := ""
	if sub != "" {
		prefixPath = sub + "/"
	}
	args := []string{"ls-tree", "-r", "-z", "-l", "--full-tree", rev}
	if prefixPath != "" {
		args = append(args, "--", prefixPath)
	}
	type entry struct{ name, sha string }
	var entries []entry
	var total int64
	n := 0
	err := r.records(args, func(rec string) error {
		meta, name, ok := strings.Cut(rec, "\t")
		if !ok {
			return nil
		}
		if n++; n > schema.MaxEntries {
			return &LimitError{fmt.Sprintf("%s at %s: the repository holds more than %d files", strings.TrimPrefix(name, prefixPath), rev, schema.MaxEntries)}
		}
		f := strings.Fields(meta) // mode type sha size
		if len(f) != 4 || f[1] != "blob" || path.Ext(name) != ".cue" {
			return nil
		}
		rel := strings.TrimPrefix(name, prefixPath)
		if f[0] != "100644" && f[0] != "100755" {
			return fmt.Errorf("%s at %s: a symbolic link (mode %s), not a regular file", rel, rev, f[0])
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("reading %s at %s: size %q: %w", rel, rev, f[3], err)
		}
		if total += size; total > schema.MaxSourceBytes {
			return &LimitError{fmt.Sprintf("%s at %s: the repository's .cue files hold more than %d MiB", rel, rev, schema.MaxSourceBytes>>20)}
		}
		if entries = append(entries, entry{rel, f[2]}); len(entries) > schema.MaxSourceFiles {
			return &LimitError{fmt.Sprintf("%s at %s: the repository holds more than %d .cue files", rel, rev, schema.MaxSourceFiles)}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for _, e := range entries {
		in.WriteString(e.sha + "\n")
	}
	out, err := r.Output(&in, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	files := fstest.MapFS{}
	br := bufio.NewReader(bytes.NewReader(out))
	for _, e := range entries {
		header, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", e.name, rev, err)
		}
		h := strings.Fields(header) // sha type size
		if len(h) != 3 {
			return nil, fmt.Errorf("reading %s at %s: unexpected header %q", e.name, rev, header)
		}
		size, err := strconv.Atoi(h[2])
		if err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", e.name, rev, err)
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", e.name, rev, err)
		}
		if _, err := br.Discard(1); err != nil { // the newline after each object
			return nil, fmt.Errorf("reading %s at %s: %w", e.name, rev, err)
		}
		files[e.name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return files, nil
}

// A LimitError says a repository read from Git exceeds one of schema's bounds
// of what is read (schema.MaxSourceBytes, MaxSourceFiles, MaxEntries); it is
// found from the tree's listing, before any file is read.
type LimitError struct{ msg string }

func (e *LimitError) Error() string { return e.msg }

// maxRecord bounds one record of git's output that gitRecords reads: a path
// and its mode, type, object name and size.
const maxRecord = 64 << 10

// records runs git in r and calls fn with each NUL-terminated record of its
// output as it comes, never holding the output whole; an error of fn stops git
// and is returned.
func (r Repo) records(args []string, fn func(string) error) error {
	cmd := r.command(args...)
	stderr := &headBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("git is not installed: %w", err)
		}
		return err
	}
	br := bufio.NewReaderSize(out, maxRecord)
	var fnErr error
	for fnErr == nil {
		rec, err := br.ReadSlice(0)
		if err == bufio.ErrBufferFull {
			fnErr = fmt.Errorf("git %s: a record over %d bytes", args[0], maxRecord)
			break
		}
		if len(rec) > 0 && err == nil {
			fnErr = fn(string(rec[:len(rec)-1]))
		}
		if err != nil {
			break
		}
	}
	if fnErr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fnErr
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(string(stderr.b)))
	}
	return nil
}

// Output runs git in r with stdin (may be nil) and returns its output, with
// surrounding white space trimmed unless it is cat-file's.
func (r Repo) Output(stdin io.Reader, args ...string) ([]byte, error) {
	cmd := r.command(args...)
	cmd.Stdin = stdin
	stderr := &headBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("git is not installed: %w", err)
		}
		return nil, fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(string(stderr.b)))
	}
	if args[0] != "cat-file" {
		out = bytes.TrimSpace(out)
	}
	return out, nil
}

// readOnly is what every git command of this package runs with, before its
// own arguments: the repository is named (--git-dir; a bare repository only
// so), and nothing of the machine's or the repository's choosing that runs a
// program or changes what is read applies: no hooks, no file system monitor,
// no attributes (textconv, filters), no signature verification, no pager, no
// replace refs, no credential helper, no transport (a promisor's lazy fetch),
// no automatic gc.
var readOnly = []string{
	"-c", "safe.bareRepository=explicit",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.attributesFile=/dev/null",
	"-c", "core.pager=cat",
	"-c", "core.sshCommand=false",
	"-c", "log.showSignature=false",
	"-c", "diff.external=",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"--no-replace-objects",
}

// readEnv replaces every GIT_* variable of the environment (GIT_DIR,
// GIT_CONFIG_*, GIT_EXTERNAL_DIFF, GIT_SSH_COMMAND...): none applies.
var readEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
	"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_NO_REPLACE_OBJECTS=1",
	"GIT_ALLOW_PROTOCOL=none", "GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C",
}

// command is git with args, reading r only (readOnly, readEnv), started in
// r's Git directory: never in a folder of the work tree.
func (r Repo) command(args ...string) *exec.Cmd {
	argv := append([]string{"--git-dir=" + r.GitDir}, readOnly...)
	cmd := exec.Command("git", append(argv, args...)...)
	cmd.Dir = r.GitDir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") && !strings.HasPrefix(kv, "PAGER=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, readEnv...)
	return cmd
}

// MaxArchiveBytes bounds what Tarball reads: a capacity repository is text.
const MaxArchiveBytes = 256 << 20

// Tarball returns the .cue files under the directory sub of a gzip-compressed
// tar archive (a Flux source artifact). Paths that leave the archive's root are
// an error, as is an archive over MaxArchiveBytes unpacked, and .cue files
// beyond schema.MaxSourceBytes or MaxSourceFiles (a *LimitError).
func Tarball(r io.Reader, sub string) (fs.FS, error) {
	sub = strings.Trim(path.Clean("/"+sub), "/")
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(io.LimitReader(zr, MaxArchiveBytes+1))
	files := fstest.MapFS{}
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive: %w", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if strings.HasPrefix(h.Name, "/") || slices.Contains(strings.Split(h.Name, "/"), "..") {
			return nil, fmt.Errorf("reading the archive: entry %q leaves the archive's root", h.Name)
		}
		if path.Ext(name) != ".cue" || h.Typeflag == tar.TypeDir {
			continue
		}
		if sub != "" {
			rel, ok := strings.CutPrefix(name, sub+"/")
			if !ok {
				continue
			}
			name = rel
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("reading the archive: %s is not a regular file (a link or a special file)", h.Name)
		}
		if total += h.Size; total > schema.MaxSourceBytes {
			return nil, &LimitError{fmt.Sprintf("%s in the archive: the repository's .cue files hold more than %d MiB", h.Name, schema.MaxSourceBytes>>20)}
		}
		if len(files) >= schema.MaxSourceFiles {
			return nil, &LimitError{fmt.Sprintf("%s in the archive: the repository holds more than %d .cue files", h.Name, schema.MaxSourceFiles)}
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the archive: %w", h.Name, err)
		}
		files[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return files, nil
}
