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
)

// Dir returns the files under dir, or an error when dir is not a readable
// directory. Only regular files inside dir can be opened: a symbolic link is
// followed only while it stays inside dir, and a named pipe, a device or a
// socket is an error naming the file (never a read that hangs), as is a file
// over MaxArchiveBytes.
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
	case st.Size() > MaxArchiveBytes:
		err = fmt.Errorf("more than %d bytes", MaxArchiveBytes)
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
// repo, which may be bare. Only Git's objects are read.
func GitTree(repo, rev, sub string) (fs.FS, error) {
	sub = strings.Trim(path.Clean("/"+sub), "/")
	prefixPath := ""
	if sub != "" {
		prefixPath = sub + "/"
	}
	args := []string{"ls-tree", "-r", "-z", "--full-tree", rev}
	if prefixPath != "" {
		args = append(args, "--", prefixPath)
	}
	list, err := git(repo, nil, args...)
	if err != nil {
		return nil, err
	}
	type entry struct{ name, sha string }
	var entries []entry
	for _, rec := range bytes.Split(list, []byte{0}) {
		meta, name, ok := strings.Cut(string(rec), "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type sha
		if len(f) != 3 || f[1] != "blob" || path.Ext(name) != ".cue" {
			continue
		}
		if f[0] != "100644" && f[0] != "100755" {
			return nil, fmt.Errorf("%s at %s: a symbolic link (mode %s), not a regular file", strings.TrimPrefix(name, prefixPath), rev, f[0])
		}
		rel := strings.TrimPrefix(name, prefixPath)
		entries = append(entries, entry{rel, f[2]})
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
// an error, as is an archive over MaxArchiveBytes.
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
		total += h.Size
		if total > MaxArchiveBytes {
			return nil, fmt.Errorf("reading the archive: more than %d bytes of .cue files", MaxArchiveBytes)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the archive: %w", h.Name, err)
		}
		files[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return files, nil
}
