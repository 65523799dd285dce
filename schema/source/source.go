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

// GitRef returns the files that the directory dir holds at ref (a branch, tag or
// commit of the Git repository that contains dir), read from Git's objects. Only
// .cue files are read; the work tree and the index are not touched.
func GitRef(dir, ref string) (fs.FS, error) {
	top, err := git(dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotARepository)
	}
	prefix, err := git(dir, nil, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, err
	}
	root, prefixPath := strings.TrimSpace(string(top)), strings.TrimSpace(string(prefix))
	commit, err := git(root, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("git ref %q: not found in %s", ref, root)
	}
	return GitTree(root, strings.TrimSpace(string(commit)), prefixPath)
}

// GitTree returns the .cue files under the directory sub (relative to the
// repository root, "" for the root) of commit rev in the Git repository at
// repo, which may be bare. Only Git's objects are read, and only once the
// tree's listing shows them within schema's bounds (a *LimitError otherwise):
// a blob of a gigabyte of zeros, a few kilobytes in Git, is never read.
func GitTree(repo, rev, sub string) (fs.FS, error) {
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
	err := gitRecords(repo, args, func(rec string) error {
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
	out, err := git(repo, &in, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	files := fstest.MapFS{}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, e := range entries {
		header, err := r.ReadString('\n')
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
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("reading %s at %s: %w", e.name, rev, err)
		}
		if _, err := r.Discard(1); err != nil { // the newline after each object
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

// gitRecords runs git in dir and calls fn with each NUL-terminated record of
// its output as it comes, never holding the output whole; an error of fn
// stops git and is returned.
func gitRecords(dir string, args []string, fn func(string) error) error {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
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
	r := bufio.NewReaderSize(out, maxRecord)
	var fnErr error
	for fnErr == nil {
		rec, err := r.ReadSlice(0)
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

func git(dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("git is not installed: %w", err)
		}
		return nil, fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(stderr.String()))
	}
	return out, nil
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
