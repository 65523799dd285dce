package capacity_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
)

// gitServer serves the repository in dir over Git's smart HTTP protocol (git
// http-backend) to requests with the basic-auth password given, as a Git host
// taking credentials in the URL would.
func gitServer(t *testing.T, dir, password string) *httptest.Server {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fetchRepo is a small capacity repository whose names no other test uses.
const fetchRepo = `package capacity

clusters: "fetch-lab": {provider: "kwok"}

pools: "fetch-pool": {
	cluster:     "fetch-lab"
	flavor:      "fetch-gpu"
	gpusPerNode: 8
	nodes: {min: 0, max: 8}
	price: {onDemandPerNodeHour: 10}
}

tiers: "fetch-tier": {priority: 42}

teams: fetchers: {
	costCenter: "CC-9"
	owners: ["@fetchers"]
	quota: "fetch-gpu": {nominal: %d}
}
`

// A CapacitySource whose URL holds a password: applied;
// then a commit that is not there, then the Git host unreachable. Each
// failure keeps the last good revision (its objects untouched), says why in
// the Ready condition and a Warning event, and no credential reaches the
// condition, the event or the fetch's error.
func TestGitFailuresKeepTheLastGoodRevision(t *testing.T) {
	ctx := context.Background()
	const password = "pa55-w0rd-x"
	repo := newGitRepo(t)
	repo.write("capacity.cue", fmt.Sprintf(fetchRepo, 16))
	head := repo.commit("fetchers: 16")
	srv := gitServer(t, repo.dir, password)
	url := strings.Replace(srv.URL, "http://", "http://allot:"+password+"@", 1) + "/" + filepath.Base(repo.dir) + "/.git"
	noSecret := func(what, s string) {
		t.Helper()
		for _, secret := range []string{password} {
			if strings.Contains(s, secret) {
				t.Errorf("%s carries a credential (%s): %s", what, secret, s)
			}
		}
	}

	newNamespace(t, "fetch")
	key := types.NamespacedName{Namespace: "fetch", Name: "creds"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL = url
	src.Spec.Ref = &allotv1.GitReference{Branch: "main"}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, src)
	good := waitRevision(t, key, head, true).Status.LastAppliedRevision
	team := getTeam(t, "fetchers")

	// The fetcher's own error, as the reconciler returns it (and
	// controller-runtime logs it).
	fetchErr := func(ref allotv1.GitReference) error {
		s := src.DeepCopy()
		s.Spec.Ref = &ref
		_, err := (&capacity.GitFetcher{Dir: t.TempDir()}).Fetch(ctx, s)
		if err == nil {
			t.Fatalf("fetching %+v succeeded", ref)
		}
		return err
	}
	missing := strings.Repeat("0123456789", 4)
	for _, tc := range []struct {
		name string
		ref  allotv1.GitReference
		stop bool   // the Git host goes away
		why  string // in the condition
	}{
		{"a commit not in the repository", allotv1.GitReference{Commit: missing}, false, missing},
		{"a branch not in the repository", allotv1.GitReference{Branch: "nope"}, false, "refs/heads/nope"},
		{"the Git host unreachable", allotv1.GitReference{Branch: "main"}, true, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stop {
				srv.Close()
			}
			noSecret("the fetch error", fetchErr(tc.ref).Error())
			s := getSource(t, key)
			patch := client.MergeFrom(s.DeepCopy())
			s.Spec.Ref = &tc.ref
			if err := env.Client.Patch(ctx, s, patch); err != nil {
				t.Fatal(err)
			}
			var msg string
			eventually(t, 30*time.Second, "Ready=False FetchFailed", func() error {
				s = getSource(t, key)
				msg = conditions.GetMessage(s, allotv1.ReadyCondition)
				if conditions.IsReady(s) || conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonFetchFailed || !strings.Contains(msg, tc.why) {
					return fmt.Errorf("ready=%v %s: %s", conditions.IsReady(s), conditions.GetReason(s, allotv1.ReadyCondition), msg)
				}
				return nil
			})
			noSecret("the Ready condition", msg)
			if !strings.Contains(msg, "revision "+good+" stays in force") {
				t.Errorf("Ready message %q does not say the last good revision stays in force", msg)
			}
			if s.Status.LastAppliedRevision != good {
				t.Errorf("lastAppliedRevision = %q, want the last good %q", s.Status.LastAppliedRevision, good)
			}
			if got := getTeam(t, "fetchers"); got.ResourceVersion != team.ResourceVersion || got.Spec.Quota[0].Nominal != 16 {
				t.Errorf("Team fetchers changed by a failed fetch: nominal %d", got.Spec.Quota[0].Nominal)
			}
			var notes []string
			eventually(t, 10*time.Second, "a FetchFailed event", func() error {
				var evs eventsv1.EventList
				if err := env.Client.List(ctx, &evs, client.InNamespace(key.Namespace)); err != nil {
					return err
				}
				notes = nil
				for _, e := range evs.Items {
					if e.Regarding.Name == key.Name && e.Reason == capacity.ReasonFetchFailed && e.Type == corev1.EventTypeWarning {
						notes = append(notes, e.Note)
					}
				}
				for _, n := range notes {
					if strings.Contains(n, tc.why) {
						return nil
					}
				}
				return errors.New("none yet: " + strings.Join(notes, " | "))
			})
			for _, n := range notes {
				noSecret("a FetchFailed event", n)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:pw@git.example/acme/capacity.git":      "https://***@git.example/acme/capacity.git",
		"https://ghp_0123456789abcdef@github.com/acme/c.git": "https://***@github.com/acme/c.git",
		"https://git.example/acme/c.git?private_token=abc#x": "https://git.example/acme/c.git?***#***",
		"ssh://git@github.com/acme/c.git":                    "ssh://***@github.com/acme/c.git",
		"git@github.com:acme/c.git":                          "git@github.com:acme/c.git",
		"file:///srv/git/capacity":                           "file:///srv/git/capacity",
		"https://git.example/acme/capacity.git":              "https://git.example/acme/capacity.git",
	} {
		if got := capacity.RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestCloneBounded: a repository with a large file (here 24 MiB of random
// bytes, which Git cannot compress) is not cloned past GitFetcher.MaxBytes:
// the fetch fails with a *CloneSizeError that says what to do, and the clone
// is gone from Dir. Under the bound the same repository is fetched. Without
// the bound a repository of multi-GB files filled the manager's disk.
func TestCloneBounded(t *testing.T) {
	repo := newGitRepo(t)
	repo.write("capacity.cue", "package capacity\n")
	big := make([]byte, 24<<20)
	rand.NewChaCha8([32]byte{1}).Read(big)
	repo.write("weights.bin", string(big))
	head := repo.commit("a large file")
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"}}
	src.Spec.URL = "file://" + repo.dir
	ctx := context.Background()

	dir := t.TempDir()
	_, err := (&capacity.GitFetcher{Dir: dir, MaxBytes: 4 << 20}).Fetch(ctx, src)
	var se *capacity.CloneSizeError
	if !errors.As(err, &se) || se.Max != 4<<20 || !strings.Contains(err.Error(), "keep large files out of it") {
		t.Fatalf("fetch bounded at 4 MiB: %v, want a *CloneSizeError", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "clone-*")); len(left) > 0 {
		t.Errorf("the stopped clone is left in Dir: %v", left)
	}
	art, err := (&capacity.GitFetcher{Dir: dir, MaxBytes: 256 << 20}).Fetch(ctx, src)
	if err != nil || !strings.HasSuffix(art.Revision, head) {
		t.Fatalf("fetch bounded at 256 MiB: revision %q, %v; want %s", art.Revision, err, head)
	}
}
