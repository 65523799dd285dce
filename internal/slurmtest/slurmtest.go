// Package slurmtest starts a real Slurm for tests, as envtest starts a real
// kube-apiserver: munged, MariaDB, slurmdbd, slurmctld and several slurmd
// with fake GPUs, from the distribution's packages, in a temporary folder,
// on free ports, as the user running the test. Stop cancels the jobs, stops
// every daemon and checks that no process it started is left.
//
// Without the binaries a test skips with one line saying how to install them;
// with ALLOT_REQUIRE_SLURM=1 (CI) it fails instead.
package slurmtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Install is the command that installs what the harness runs (Debian 12).
const Install = "apt-get install -y slurm-wlm slurmdbd slurm-wlm-mysql-plugin mariadb-server munge"

// RequireEnv set to 1 turns a missing binary into a failure instead of a skip.
const RequireEnv = "ALLOT_REQUIRE_SLURM"

// markerEnv is set on every process the harness starts, to the harness's
// folder; Slurm passes it on to slurmstepd and the jobs, so that Stop finds
// every process that belongs to this harness and to no other.
const markerEnv = "ALLOT_SLURMTEST"

// binaries are the programs the harness runs.
var binaries = []string{"munged", "mariadbd", "mariadb-install-db", "mariadb",
	"slurmdbd", "slurmctld", "slurmd", "sacctmgr", "sinfo", "squeue", "scancel", "sbatch"}

// Options shape the cluster. Zero values take the defaults.
type Options struct {
	// Nodes is the number of slurmd (default 2); they are named n1, n2, ...
	Nodes int
	// GPUsPerNode is the number of fake GPUs on every node (default 8).
	GPUsPerNode int
	// GPUType is the GRES type of the GPUs (default h100).
	GPUType string
	// Partition names the one partition holding every node (default gpu).
	Partition string
	// CPUsPerNode is the CPUs every node declares (default 16).
	CPUsPerNode int
	// SlurmConf is appended to the generated slurm.conf.
	SlurmConf string
}

func (o *Options) defaults() {
	if o.Nodes <= 0 {
		o.Nodes = 2
	}
	if o.GPUsPerNode <= 0 {
		o.GPUsPerNode = 8
	}
	if o.GPUType == "" {
		o.GPUType = "h100"
	}
	if o.Partition == "" {
		o.Partition = "gpu"
	}
	if o.CPUsPerNode <= 0 {
		o.CPUsPerNode = 16
	}
}

// Cluster is a running Slurm.
type Cluster struct {
	// Name is the cluster's ClusterName.
	Name string
	// Dir holds the configuration, state, spool, logs and sockets.
	Dir string
	// Conf is the path of slurm.conf; Env sets SLURM_CONF to it.
	Conf string
	// Nodes are the node names.
	Nodes   []string
	Options Options

	env     []string
	daemons []*daemon // in start order
	stopped bool
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Require skips t, or fails it when ALLOT_REQUIRE_SLURM=1, unless every
// binary the harness runs is on PATH.
func Require(t testing.TB) {
	t.Helper()
	missing := Missing()
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("slurm harness: %s not on PATH; install with: %s", strings.Join(missing, ", "), Install)
	if os.Getenv(RequireEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Start starts a cluster and waits until every node is idle; t's cleanup
// stops it and fails t when a process is left.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	Require(t)
	opts.defaults()
	c, err := start(opts)
	if c != nil {
		t.Cleanup(func() {
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Missing names the binaries the harness runs that are not on PATH.
func Missing() []string {
	var missing []string
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// New starts a cluster outside a test (make demo-slurm) and waits until
// every node is idle; the caller stops it. On an error nothing is left
// running.
func New(opts Options) (*Cluster, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("%s not on PATH; install with: %s", strings.Join(missing, ", "), Install)
	}
	opts.defaults()
	c, err := start(opts)
	if err != nil && c != nil {
		err = errors.Join(err, c.Stop())
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

func start(opts Options) (*Cluster, error) {
	// Unix socket paths are bounded (108 bytes): a short folder, not t.TempDir.
	dir, err := os.MkdirTemp("", "slurm")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: "allot", Dir: dir, Conf: filepath.Join(dir, "etc", "slurm.conf"), Options: opts}
	c.env = append(os.Environ(), "SLURM_CONF="+c.Conf, markerEnv+"="+dir)
	for i := 1; i <= opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, "n"+strconv.Itoa(i))
	}
	if err := c.boot(); err != nil {
		return c, fmt.Errorf("starting slurm in %s: %w%s", dir, err, c.logTail())
	}
	return c, nil
}

func (c *Cluster) boot() error {
	for _, d := range []string{"etc", "munge", "state", "spool", "log", "dev"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	// munged warns unless every folder above its socket is searchable.
	if err := os.Chmod(c.Dir, 0o711); err != nil {
		return err
	}
	ports, err := freePorts(3 + len(c.Nodes))
	if err != nil {
		return err
	}
	dbPort, dbdPort, ctldPort, nodePorts := ports[0], ports[1], ports[2], ports[3:]
	if err := c.startMunge(); err != nil {
		return err
	}
	if err := c.startMariaDB(dbPort); err != nil {
		return err
	}
	if err := c.writeConfig(dbPort, dbdPort, ctldPort, nodePorts); err != nil {
		return err
	}
	if err := c.spawn("slurmdbd", "slurmdbd", "-D"); err != nil {
		return err
	}
	// The cluster must be known to slurmdbd before slurmctld registers.
	if err := c.poll("slurmdbd", 30*time.Second, func() error {
		_, err := c.Output("sacctmgr", "-i", "add", "cluster", c.Name)
		return err
	}); err != nil {
		return err
	}
	if err := c.spawn("slurmctld", "slurmctld", "-D"); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.spawn("slurmd-"+n, "slurmd", "-D", "-N", n); err != nil {
			return err
		}
	}
	return c.poll("nodes idle", 60*time.Second, func() error {
		out, err := c.Output("sinfo", "-h", "-N", "-o", "%N %T")
		if err != nil {
			return err
		}
		idle := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		if idle != len(c.Nodes) {
			return fmt.Errorf("%d of %d nodes idle: %s", idle, len(c.Nodes), out)
		}
		return nil
	})
}

func (c *Cluster) startMunge() error {
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	m := filepath.Join(c.Dir, "munge")
	if err := os.WriteFile(filepath.Join(m, "key"), key, 0o600); err != nil {
		return err
	}
	if err := c.spawn("munged", "munged", "-F", "--force", "--key-file="+m+"/key",
		"--socket="+c.mungeSocket(), "--pid-file="+m+"/pid", "--log-file="+c.Dir+"/log/munged.log",
		"--seed-file="+m+"/seed"); err != nil {
		return err
	}
	return c.poll("munged", 10*time.Second, func() error {
		_, err := os.Stat(c.mungeSocket())
		return err
	})
}

func (c *Cluster) mungeSocket() string { return filepath.Join(c.Dir, "munge", "sock") }

func (c *Cluster) startMariaDB(port int) error {
	data := filepath.Join(c.Dir, "db")
	if err := mariaDBTemplate(data); err != nil {
		return err
	}
	sock := filepath.Join(c.Dir, "db.sock")
	if err := c.spawn("mariadbd", "mariadbd", "--no-defaults", "--datadir="+data, "--socket="+sock,
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--pid-file="+c.Dir+"/db.pid",
		"--user="+currentUser(), "--log-error="+c.Dir+"/log/mariadb.log", "--skip-name-resolve",
		"--skip-log-bin", "--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M"); err != nil {
		return err
	}
	return c.poll("mariadbd", 30*time.Second, func() error {
		_, err := c.Output("mariadb", "--no-defaults", "--socket="+sock, "-uroot", "-e",
			"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1'; GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'")
		return err
	})
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" && os.Getuid() != 0 {
		return u
	}
	return "root"
}

// mariaDBTemplate copies into data an initialised MariaDB data folder, made
// once per MariaDB version in the user's cache (mariadb-install-db takes
// seconds; a copy takes milliseconds).
func mariaDBTemplate(data string) error {
	ver, err := exec.Command("mariadbd", "--version").Output()
	if err != nil {
		return fmt.Errorf("mariadbd --version: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	tpl := filepath.Join(cache, "allot", "slurmtest", fmt.Sprintf("mariadb-%x", fnv(ver)))
	if _, err := os.Stat(filepath.Join(tpl, "mysql")); err != nil {
		if err := os.MkdirAll(filepath.Dir(tpl), 0o700); err != nil {
			return err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(tpl), "tmp")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+tmp,
			"--auth-root-authentication-method=normal", "--user="+currentUser(), "--skip-test-db",
			"--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M").CombinedOutput()
		if err != nil {
			return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
		}
		// Another test process may have made it meanwhile: either copy is good.
		if err := os.Rename(tmp, tpl); err != nil && !errors.Is(err, os.ErrExist) && !isNotEmpty(err) {
			return err
		}
	}
	return copyTree(tpl, data)
}

func isNotEmpty(err error) bool { return errors.Is(err, syscall.ENOTEMPTY) }

func fnv(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
}

func (c *Cluster) writeConfig(dbPort, dbdPort, ctldPort int, nodePorts []int) error {
	o, d, sock := c.Options, c.Dir, c.mungeSocket()
	user := currentUser()
	dbd := fmt.Sprintf(`AuthType=auth/munge
AuthInfo=socket=%[1]s
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=%[2]d
SlurmUser=%[3]s
PidFile=%[4]s/slurmdbd.pid
LogFile=%[4]s/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=%[5]d
StorageUser=slurm
StorageLoc=slurm_acct_db
`, sock, dbdPort, user, d, dbPort)
	gpuTRES := "gres/gpu,gres/gpu:" + o.GPUType
	var conf strings.Builder
	fmt.Fprintf(&conf, `ClusterName=%[1]s
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%[2]d
SlurmUser=%[3]s
SlurmdUser=%[3]s
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool/%%n
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd-%%n.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd-%%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=%[6]d
AccountingStoragePass=%[4]s
AccountingStorageEnforce=associations,limits,qos,safe
AccountingStorageTRES=%[7]s
JobAcctGatherType=jobacct_gather/none
PriorityType=priority/multifactor
PreemptType=preempt/qos
PreemptMode=REQUEUE
ReturnToService=2
KillWait=2
SchedulerParameters=sched_interval=1
`, c.Name, ctldPort, user, sock, d, dbdPort, gpuTRES)
	var gres strings.Builder
	gres.WriteString("AutoDetect=off\n")
	for i, n := range c.Nodes {
		fmt.Fprintf(&conf, "NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=1000 Gres=gpu:%s:%d State=UNKNOWN\n",
			n, nodePorts[i], o.CPUsPerNode, o.GPUType, o.GPUsPerNode)
		// slurmd drops GPUs without File=; /dev/null stands in for each.
		for g := 0; g < o.GPUsPerNode; g++ {
			if err := os.Symlink(os.DevNull, filepath.Join(d, "dev", fmt.Sprintf("%s-gpu%d", n, g))); err != nil {
				return err
			}
		}
		fmt.Fprintf(&gres, "NodeName=%s Name=gpu Type=%s File=%s/dev/%s-gpu[0-%d]\n", n, o.GPUType, d, n, o.GPUsPerNode-1)
	}
	fmt.Fprintf(&conf, "PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", o.Partition, strings.Join(c.Nodes, ","))
	conf.WriteString(o.SlurmConf)
	for name, text := range map[string]string{"slurm.conf": conf.String(), "gres.conf": gres.String(), "slurmdbd.conf": dbd} {
		// slurmdbd refuses a slurmdbd.conf others can read.
		if err := os.WriteFile(filepath.Join(d, "etc", name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1: the
// kernel picks them, so two harnesses at once get different ones.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) spawn(name, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = c.env, c.Dir
	out, err := os.Create(filepath.Join(c.Dir, "log", name+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
	return nil
}

// poll calls f until it succeeds, a daemon exits or the time is up.
func (c *Cluster) poll(what string, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		for _, d := range c.daemons {
			select {
			case <-d.done:
				return fmt.Errorf("waiting for %s: %s exited: %v", what, d.name, d.cmd.ProcessState)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Command returns a command that talks to this cluster (SLURM_CONF set).
// Its arguments are passed as they are, never through a shell.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = c.env, c.Dir
	return cmd
}

// Env is the environment of the commands that talk to this cluster.
func (c *Cluster) Env() []string { return append([]string(nil), c.env...) }

// Output runs a command against the cluster and returns its standard output;
// the error carries its standard error.
func (c *Cluster) Output(name string, args ...string) (string, error) {
	cmd := c.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Run is Output that fails t on an error.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := c.Output(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Stop cancels every job, waits for them to end (else slurmstepd stays
// behind), stops the daemons in the reverse order of their start and removes
// the folder. It returns an error naming any process of this harness still
// alive afterwards (which it then kills). Stop is idempotent.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	if c.running("slurmctld") {
		if err := c.cancelJobs(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
			errs = append(errs, fmt.Errorf("slurm harness: %s did not stop on SIGTERM within 20s; killed", d.name))
		}
	}
	if left := c.Leftovers(); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		errs = append(errs, fmt.Errorf("slurm harness: processes left after stop: %v", left))
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New(c.logTail()))
	} else {
		os.RemoveAll(c.Dir)
	}
	return errors.Join(errs...)
}

func (c *Cluster) running(name string) bool {
	for _, d := range c.daemons {
		if d.name == name {
			select {
			case <-d.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

func (c *Cluster) cancelJobs() error {
	out, err := c.Output("squeue", "-h", "-o", "%i")
	if err != nil {
		return err
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil
	}
	if _, err := c.Output("scancel", ids...); err != nil {
		return err
	}
	return c.poll("jobs to end", 30*time.Second, func() error {
		out, err := c.Output("squeue", "-h", "-o", "%i")
		if err == nil && strings.TrimSpace(out) != "" {
			err = fmt.Errorf("jobs left: %s", strings.Join(strings.Fields(out), " "))
		}
		if err == nil && len(c.stepds()) > 0 {
			err = fmt.Errorf("slurmstepd left: %v", c.stepds())
		}
		return err
	})
}

func (c *Cluster) stepds() []Process {
	var out []Process
	for _, p := range c.Leftovers() {
		// Exe is unreadable when slurmstepd made itself non-dumpable.
		if strings.Contains(p.Exe+" "+p.Args, "slurmstepd") {
			out = append(out, p)
		}
	}
	return out
}

// Process is a process of the harness.
type Process struct {
	PID int
	// Exe is the program's path; Args its command line, which slurmstepd
	// rewrites once started.
	Exe, Args string
}

func (p Process) String() string { return fmt.Sprintf("%d %q", p.PID, p.Args) }

// Leftovers lists the live processes that carry this harness's marker in
// their environment: before Stop its daemons, jobs and their slurmstepd;
// after Stop, none.
func (c *Cluster) Leftovers() []Process {
	marker := []byte(markerEnv + "=" + c.Dir + "\x00")
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), marker) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			continue // a zombie awaiting its parent's wait
		}
		args, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		out = append(out, Process{PID: pid, Exe: exe, Args: strings.TrimSpace(string(bytes.ReplaceAll(args, []byte{0}, []byte{' '})))})
	}
	return out
}

// logTail returns the last lines of every log, to explain a failure.
func (c *Cluster) logTail() string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		fmt.Fprintf(&b, "\n--- %s\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
	return b.String()
}

// WaitJob waits up to 30 s until job id is in state (RUNNING, PENDING, ...)
// and, when reason is not empty, pends for that reason (AssocGrpGRES, ...).
func (c *Cluster) WaitJob(t testing.TB, id, state, reason string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		got = strings.TrimSpace(c.Run(t, "squeue", "-h", "-j", id, "-o", "%T %r"))
		if f := strings.Fields(got); len(f) == 2 && f[0] == state && (reason == "" || f[1] == reason) {
			return
		}
	}
	t.Fatalf("job %s: %q, want %s %s", id, got, state, reason)
}
