package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/allot: %v\n%s", err, out)
	}
	img, cfg := writeAndRead(t, Options{Allot: allot, CACerts: "/etc/ssl/certs/ca-certificates.crt"}, "registry.example/allot:test", filepath.Join(dir, "image.tar"))
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/local/bin/allot" {
		t.Errorf("config user %q, entrypoint %q; want 65532:65532 and /usr/local/bin/allot", cfg.Config.User, cfg.Config.Entrypoint)
	}
	root := rootfs(t, img, filepath.Join(dir, "rootfs"))
	if _, err := os.Stat(filepath.Join(root, "usr/local/bin/allot")); err != nil {
		t.Fatalf("the image's filesystem: %v", err)
	}
	for _, p := range []string{"usr/bin/git", "usr/lib/git-core"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the image has /%s: the manager needs no git", p)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"/usr/local/bin/allot", "version"}, "allot v0.0.0-imagetest"},
		{[]string{"/usr/local/bin/terraform", "version"}, "Terraform v"},
	} {
		out, err := chrootRun(t, root, cfg.Config.Env, c.args...)
		if !strings.Contains(out, c.want) {
			t.Errorf("%s in the image: %v\n%s\nwant %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// TestAgentImageRunsWithoutARuntime builds allot-agent and the agent image as
// make image does and runs the agent in it: with no NVIDIA driver here it must
// get as far as loading libnvidia-ml and say on one line that there is none,
// which shows the image holds the C library and loader the agent needs.
func TestAgentImageRunsWithoutARuntime(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "allot-agent")
	build := exec.Command("go", "build", "-o", agent, ".")
	build.Dir = filepath.Join(testenv.Root(), "cmd", "allot-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/allot-agent: %v\n%s", err, out)
	}
	img, cfg := writeAndRead(t, Options{Agent: agent, CACerts: "/etc/ssl/certs/ca-certificates.crt"}, "registry.example/allot-agent:test", filepath.Join(dir, "image.tar"))
	if cfg.Config.User != "65532:65532" || fmt.Sprint(cfg.Config.Entrypoint) != "[/usr/local/bin/allot-agent]" {
		t.Errorf("config user %q, entrypoint %q; want 65532:65532 and /usr/local/bin/allot-agent", cfg.Config.User, cfg.Config.Entrypoint)
	}
	root := rootfs(t, img, filepath.Join(dir, "rootfs"))
	for _, p := range []string{"usr/local/bin/allot", "usr/local/bin/terraform"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the agent image has /%s", p)
		}
	}
	out, err := chrootRun(t, root, cfg.Config.Env, "/usr/local/bin/allot-agent", "--dry-run", "--once", "--node", "n1")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, "loading libnvidia-ml.so.1: no NVIDIA driver") {
		t.Errorf("allot-agent in the image: %v\n%s\nwant exit 2 and no NVIDIA driver", err, out)
	}
}

// writeAndRead writes the image of o to tarPath, as make image does, and reads
// it back with its config.
func writeAndRead(t *testing.T, o Options, tag, tarPath string) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	if err := run(o, tag, tarPath); err != nil {
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
	return img, cfg
}

// rootfs unpacks img's filesystem at root, with the /dev/null a container
// runtime would give it, and returns root.
func rootfs(t *testing.T, img v1.Image, root string) string {
	t.Helper()
	unpack(t, mutate.Extract(img), root)
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

	return root
}

// chrootRun runs args in root (chroot, as the image's non-root user) with env
// and returns what it printed; an exit status other than 0 is an *exec.ExitError.
func chrootRun(t *testing.T, root string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
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
		t.Fatalf("%s in the image: %v", args[0], err)
	}
	return string(out), err
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
