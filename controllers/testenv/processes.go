package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartKubeScheduler runs bin/kube-scheduler against env, with the client
// limits allot's runner has, until the test ends (or the stop it returns is
// called). Its log is in the test's temporary directory.
func StartKubeScheduler(t testing.TB, env *Env) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	err := os.WriteFile(cfg, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: `+kc+`
  qps: 5000
  burst: 10000
leaderElection:
  leaderElect: false
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return startProcess(t, dir, "kube-scheduler", "--config", cfg, "--secure-port", "0", "-v", "0")
}

// StartJobController runs bin/kube-controller-manager against env with only
// the Job controller (and the garbage collector, which deletes the pods of a
// deleted Job), with the client limits allot's runner has, until the test
// ends (or the stop it returns is called): a Job's pods are made as in a
// cluster. No kubelet runs them: they stay Pending once bound.
func StartJobController(t testing.TB, env *Env) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, dir, "kube-controller-manager", "--kubeconfig", kc, "--controllers", "job-controller,garbage-collector-controller",
		"--leader-elect=false", "--secure-port", "0", "--kube-api-qps", "5000", "--kube-api-burst", "10000",
		"--concurrent-job-syncs", "50", "-v", "0")
}

// startProcess runs the binary name in the control plane's directory (make
// benchplane builds it) with args, logging to dir.
func startProcess(t testing.TB, dir, name string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(filepath.Join(Assets(), name), args...)
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s (make benchplane builds it): %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// One that refuses its flags exits at once: say so, not wait on it.
	select {
	case err := <-exited:
		logf.Close()
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("%s exited as it started (%v):\n%s", name, err, log)
	case <-time.After(time.Second):
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	}
	t.Cleanup(stop)
	return stop
}
