package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/allot-dev/allot/controllers/testenv"
)

// TestImageRunsWithoutARuntime builds allot and its image as make image does,
// reads the image back from the tarball, unpacks its filesystem and runs allot
// version and terraform version in it (chroot, as the image's
// non-root user): the image is known to work with no container runtime. It has
// no git: the manager needs none.
func TestImageRunsWithoutARuntime(t *testing.T) {
	dir := t.TempDir()
	allot := filepath.Join(dir, "allot")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-imagetest", "-o", allot, "./cmd/allot")
	build.Dir = testenv.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/allot: %v\n%s", err, out)
	}
	tarPath := filepath.Join(dir, "image.tar")
	if err := run(Options{Allot: allot, CACerts: "/etc/ssl/certs/ca-certificates.crt"}, "registry.example/allot:test", tarPath); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/local/bin/allot" {
		t.Errorf("config user %q, entrypoint %q; want 65532:65532 and /usr/local/bin/allot", cfg.Config.User, cfg.Config.Entrypoint)
	}
	root := filepath.Join(dir, "rootfs")
	unpack(t, mutate.Extract(img), root)
	if _, err := os.Stat(filepath.Join(root, "usr/local/bin/allot")); err != nil {
		t.Fatalf("the image's filesystem: %v", err)
	}
	for _, p := range []string{"usr/bin/git", "usr/lib/git-core"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the image has /%s: the manager needs no git", p)
		}
	}
	// A container runtime gives the image /dev; terraform may open /dev/null. Root makes
	// the device, anyone else an empty file that serves the same here.
	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if syscall.Mknod(filepath.Join(dev, "null"), syscall.S_IFCHR|0o666, 1<<8|3) != nil {
		if err := os.WriteFile(filepath.Join(dev, "null"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dev, "null"), 0o666); err != nil { // past the umask
		t.Fatal(err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"/usr/local/bin/allot", "version"}, "allot v0.0.0-imagetest"},
		{[]string{"/usr/local/bin/terraform", "version"}, "Terraform v"},
	} {
		cmd := exec.Command(c.args[0], c.args[1:]...)
		cmd.Env = cfg.Config.Env
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: User, Gid: User}
		} else { // a user namespace gives an unprivileged user its chroot
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s in the image: %v", c.args[0], err)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s in the image: %v\n%s\nwant %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// unpack writes a flattened image filesystem under root.
func unpack(t *testing.T, rc io.ReadCloser, root string) {
	t.Helper()
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, h.FileInfo().Mode().Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
