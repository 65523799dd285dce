package capacity_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
	"github.com/allot-dev/allot/planner/render/terraform"
	"github.com/allot-dev/allot/planner/tfrun/kwok"
)

var (
	env         *testenv.Env
	metricsAddr string
)

// TestMain starts one control plane and one manager running the capacity
// reconciler for every test of the package.
func TestMain(m *testing.M) {
	if os.Getenv(terraform.EnvAction) != "" {
		// Terraform runs this binary as the kwok module's node hook.
		if err := kwok.Main(context.Background(), os.Getenv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var stop func() error
	var err error
	env, stop, err = testenv.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer stop()
	metricsAddr, err = testenv.FreeAddr()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "allot-capacity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	r := &capacity.Reconciler{
		Client:   mgr.GetClient(),
		Fetcher:  capacity.Sources{Git: &capacity.GitFetcher{Dir: dir, Secrets: mgr.GetAPIReader()}, Flux: &capacity.FluxFetcher{Client: mgr.GetClient(), Dir: dir, MaxBytes: fluxMaxBytes}},
		Recorder: mgr.GetEventRecorder("allot-capacity"),
		Metrics:  capacity.NewMetrics(ctrlmetrics.Registry),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := env.FinalizeNamespaces(ctx); err != nil {
		cancel()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// gitRepo is a real Git repository with a work tree the test commits to.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *gitRepo) write(path, data string) {
	r.t.Helper()
	p := filepath.Join(r.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *gitRepo) read(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, path))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// commit commits everything and returns the commit ID.
func (r *gitRepo) commit(msg string) string {
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// copyExamples copies the repository's examples (the .cue files) under dst.
func (r *gitRepo) copyExamples(dst string) {
	r.t.Helper()
	src := filepath.Join(testenv.Root(), "examples")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".cue" {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r.write(filepath.Join(dst, rel), string(b))
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// getSource fetches a CapacitySource.
func getSource(t *testing.T, key types.NamespacedName) *allotv1.CapacitySource {
	t.Helper()
	s := &allotv1.CapacitySource{}
	if err := env.Client.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitRevision waits until the source has attempted rev and its Ready condition
// has the given status.
func waitRevision(t *testing.T, key types.NamespacedName, rev string, ready bool) *allotv1.CapacitySource {
	t.Helper()
	var s *allotv1.CapacitySource
	eventually(t, 60*time.Second, "revision "+rev, func() error {
		s = getSource(t, key)
		if !strings.HasSuffix(s.Status.LastAttemptedRevision, rev) {
			return fmt.Errorf("last attempted revision %q", s.Status.LastAttemptedRevision)
		}
		if conditions.IsReady(s) != ready || conditions.IsReconciling(s) {
			return fmt.Errorf("ready=%v reconciling=%v: %s", conditions.IsReady(s), conditions.IsReconciling(s), conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
	return s
}

func newNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.Name = name
	if err := env.Client.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

// deleteAtCleanup deletes objs when the test ends and waits until they are
// gone (a namespace's objects with it: run finalizes namespaces), so that the
// test can run again on the suite's API server (go test -count=2).
func deleteAtCleanup(t *testing.T, objs ...client.Object) {
	t.Cleanup(func() {
		ctx := context.Background()
		for _, o := range objs {
			if err := env.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", client.ObjectKeyFromObject(o), err)
			}
		}
		for _, o := range objs {
			eventually(t, 30*time.Second, fmt.Sprintf("%T %s deleted", o, client.ObjectKeyFromObject(o)), func() error {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			})
		}
	})
}

func init() { ctrl.SetLogger(logr.Discard()) }

var eventually = testenv.Eventually

// check asks the source's reconciler for a reconcile (Flux's requestedAt)
// and returns the source once it has handled it.
func check(t *testing.T, c client.Client, key types.NamespacedName) *allotv1.CapacitySource {
	t.Helper()
	s := &allotv1.CapacitySource{}
	if err := c.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(s.DeepCopy())
	token := time.Now().Format(time.RFC3339Nano)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := c.Patch(context.Background(), s, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "reconcile "+token+" handled", func() error {
		if err := c.Get(context.Background(), key, s); err != nil {
			return err
		}
		if s.Status.LastHandledReconcileAt != token {
			return fmt.Errorf("lastHandledReconcileAt = %q", s.Status.LastHandledReconcileAt)
		}
		return nil
	})
	return s
}
