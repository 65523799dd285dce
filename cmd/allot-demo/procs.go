package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// manager is 'allot manager' running as a child process.
type manager struct {
	cmd    *exec.Cmd
	logf   string
	probes string
	// exited is closed once the process is gone; err is its exit status.
	exited chan struct{}
	err    error
}

// startManager starts bin as the manager against kubeconfig, with its Git cache
// and log under dir. The child has its own process group, so a terminal's ^C
// reaches only the demo, which stops it in order.
func startManager(bin, kubeconfig, dir string) (*manager, error) {
	return startManagerAs(bin, kubeconfig, dir, "manager",
		"--git-cache-dir", filepath.Join(dir, "git-cache"),
		"--terraform-dir", filepath.Join(dir, "terraform"), "--terraform-clusters", labCluster)
}

// startManagerAs starts bin as a manager with the demo's common flags and
// args, its log in dir/NAME.log.
func startManagerAs(bin, kubeconfig, dir, name string, args ...string) (*manager, error) {
	probes, err := freeAddr()
	if err != nil {
		return nil, err
	}
	m := &manager{logf: filepath.Join(dir, name+".log"), probes: probes, exited: make(chan struct{})}
	logf, err := os.Create(m.logf)
	if err != nil {
		return nil, err
	}
	// No kubelet runs the demo's pods: the gang timeout, which counts until
	// every pod of a gang runs, is off.
	m.cmd = exec.Command(bin, append([]string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=false",
		// No metrics server: the demo does not read it, and a port picked
		// free here can be taken by another process before the manager binds
		// it (TestDemoStalled failed so once on a busy machine).
		"--metrics-bind-address", "0", "--health-probe-bind-address", probes,
		"--status-interval", "1s", "--gang-timeout", "0"}, args...)...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = childProcAttr()
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s manager: %w", bin, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		logf.Close()
		close(m.exited)
	}()
	return m, nil
}

// ready reports whether the manager answers /readyz.
func (m *manager) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.probes+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// gone returns a non-nil error once the manager has exited.
func (m *manager) gone() error {
	select {
	case <-m.exited:
		return fmt.Errorf("allot manager exited (%v): %s", m.err, m.lastLog())
	default:
		return nil
	}
}

// stop asks the manager to stop (SIGTERM), and kills it if it has not within
// 15 seconds.
func (m *manager) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(15 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// lastLog is the manager's last log line that says something, for an error.
func (m *manager) lastLog() string {
	f, err := os.Open(m.logf)
	if err != nil {
		return "no log"
	}
	defer f.Close()
	last := "empty log"
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// gitRepo is the demo's capacity repository: a real Git repository with a work
// tree the demo commits to.
type gitRepo struct{ dir string }

func (r gitRepo) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", r.dir, "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=allot demo", "GIT_AUTHOR_EMAIL=demo@allot.dev",
		"GIT_COMMITTER_NAME=allot demo", "GIT_COMMITTER_EMAIL=demo@allot.dev")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// commit commits every change and returns the commit ID.
func (r gitRepo) commit(ctx context.Context, msg string) (string, error) {
	if _, err := r.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "commit", "-q", "-m", msg); err != nil {
		return "", err
	}
	return r.git(ctx, "rev-parse", "HEAD")
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
