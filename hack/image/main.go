// Command image builds allot's container images without a container daemon or
// a registry (go-containerregistry): an empty base plus the files a binary needs
// at run time, taken from this machine, the CA certificates and a non-root user
// (65532).
//
// The allot image holds allot (static: the CLI and the manager) and terraform
// with its libraries. No git: the manager fetches Git with go-git
// (fluxcd/pkg/git) and Flux artifacts over HTTP, and the rendered Terraform
// modules name no Git module sources. The agent image (-agent) holds
// allot-agent and the C library and loader it is linked with: it dlopens the
// driver's libnvidia-ml, which the NVIDIA container runtime mounts.
//
// It writes a tarball that docker load, podman load, crane push and skopeo copy
// docker-archive: all read.
//
//	go run ./hack/image -allot bin/allot -tag ghcr.io/allot-dev/allot:v1 -o bin/allot-image.tar
//	go run ./hack/image -agent bin/allot-agent -tag ghcr.io/allot-dev/allot-agent:v1 -o bin/allot-agent-image.tar
//
// The image is for the architecture of this machine: build it on each
// architecture to publish several (crane index append joins them).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's user and group: not root.
const User = 65532

// Options name the files the image is made of.
type Options struct {
	Allot     string // the allot binary
	Agent     string // the allot-agent binary: the agent image instead of allot's
	Terraform string // the terraform binary (the allot image only)
	CACerts   string // the CA bundle for https (Git, cloud APIs)
}

func main() {
	var o Options
	tag := flag.String("tag", "ghcr.io/allot-dev/allot:latest", "the image reference written into the tarball")
	out := flag.String("o", "bin/allot-image.tar", "the tarball to write")
	flag.StringVar(&o.Allot, "allot", "bin/allot", "the allot binary")
	flag.StringVar(&o.Agent, "agent", "", "build the agent image of this allot-agent binary instead")
	flag.StringVar(&o.Terraform, "terraform", "", "the terraform binary (default: bin/terraform, else the one on PATH)")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificate bundle")
	flag.Parse()
	if err := run(o, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o Options, tag, out string) error {
	if o.Terraform == "" && o.Agent == "" {
		if _, err := os.Stat("bin/terraform"); err == nil {
			o.Terraform = "bin/terraform"
		} else if o.Terraform, err = exec.LookPath("terraform"); err != nil {
			return errors.New("no terraform in bin/ or on PATH (make terraform builds one)")
		}
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %s: %w", tag, err)
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s: %s (%s)\n", out, ref, d)
	return nil
}

// Build assembles the image: one layer of files, the non-root user, allot (or
// allot-agent) as the entrypoint.
func Build(o Options) (v1.Image, error) {
	fs := newTree()
	fs.dir("/tmp", 0o1777, 0)
	fs.dir("/home/nonroot", 0o755, User)
	entry := "/usr/local/bin/allot"
	bins := map[string]string{o.Allot: entry, o.Terraform: "/usr/local/bin/terraform"}
	if o.Agent != "" {
		entry = "/usr/local/bin/allot-agent"
		bins = map[string]string{o.Agent: entry}
	} else {
		fs.dir("/var/cache/allot", 0o755, User) // the manager's --git-cache-dir
	}
	fs.file("/etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", User, User)))
	fs.file("/etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", User)))
	fs.file("/etc/nsswitch.conf", 0o644, []byte("hosts: files dns\n"))
	if err := fs.copy(o.CACerts, "/etc/ssl/certs/ca-certificates.crt"); err != nil {
		return nil, err
	}
	for src, dst := range bins {
		if err := fs.copy(src, dst); err != nil {
			return nil, err
		}
		if err := fs.libraries(src); err != nil {
			return nil, err
		}
	}
	layer, err := fs.layer()
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile() // keeps the layer's diff ID
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", User, User),
		Entrypoint: []string{entry},
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=/home/nonroot",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{"org.opencontainers.image.source": "https://github.com/allot-dev/allot"},
	}
	return mutate.ConfigFile(img, cfg)
}

// tree is the image's filesystem, built up before it is written as a layer.
type tree struct{ entries map[string]entry }

type entry struct {
	hdr  tar.Header
	data []byte
}

func newTree() *tree { return &tree{entries: map[string]entry{}} }

// epoch is every file's time: the same inputs give the same image digest.
var epoch = time.Unix(0, 0)

func (t *tree) parents(p string) {
	for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
		if _, ok := t.entries[d]; !ok {
			t.dir(d, 0o755, 0)
		}
	}
}

func (t *tree) dir(p string, mode int64, owner int) {
	t.parents(p)
	t.entries[p] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p[1:] + "/", Mode: mode, Uid: owner, Gid: owner, ModTime: epoch}}
}

func (t *tree) file(p string, mode int64, data []byte) {
	t.parents(p)
	t.entries[p] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p[1:], Mode: mode, Size: int64(len(data)), ModTime: epoch}, data: data}
}

// copy puts the file src (symbolic links followed) at dst with its mode.
func (t *tree) copy(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	t.file(dst, int64(fi.Mode().Perm()), data)
	return nil
}

// ldd lines: "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x…)" and the
// loader's "/lib64/ld-linux-x86-64.so.2 (0x…)".
var lddLine = regexp.MustCompile(`(?m)^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$`)

// libraries copies the shared libraries bin is linked with, at the paths the
// loader finds them; a static binary has none.
func (t *tree) libraries(bin string) error {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil
		}
		return fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	for _, m := range lddLine.FindAllSubmatch(out, -1) {
		lib := string(m[1])
		if _, ok := t.entries[lib]; ok {
			continue
		}
		if err := t.copy(lib, lib); err != nil {
			return err
		}
		// The loader is also reached through /lib64 → usr/lib64 and the like:
		// keep the path the binaries name, and its real file's path.
		if real, err := filepath.EvalSymlinks(lib); err == nil && real != lib {
			if err := t.copy(real, real); err != nil {
				return err
			}
		}
	}
	return nil
}

// layer writes the tree as a tar layer, directories first, in path order.
func (t *tree) layer() (v1.Layer, error) {
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := t.entries[p]
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}
