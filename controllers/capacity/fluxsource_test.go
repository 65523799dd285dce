package capacity_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
	"github.com/allot-dev/allot/controllers/testenv"
)

// fluxMaxBytes bounds the artifacts of the suite's FluxFetcher.
const fluxMaxBytes = 1 << 20

// setArtifact writes a as the GitRepository's artifact, as source-controller
// does when it has fetched a new revision.
func setArtifact(t *testing.T, key types.NamespacedName, a meta.Artifact) {
	t.Helper()
	var repo sourcev1.GitRepository
	if err := env.Client.Get(context.Background(), key, &repo); err != nil {
		t.Fatal(err)
	}
	repo.Status.Artifact = &a
	if err := env.Client.Status().Update(context.Background(), &repo); err != nil {
		t.Fatal(err)
	}
}

// A CapacitySource naming a Flux GitRepository: each new artifact is applied
// as soon as source-controller publishes it (the interval is an hour); an
// artifact whose digest does not match, or that is larger than the bound, is
// not applied, the last good revision stays in force and the Ready condition
// says why; while an artifact downloads, Reconciling is True.
func TestFluxGitRepositoryArtifacts(t *testing.T) {
	ctx := context.Background()
	arts := testenv.NewArtifactServer(t)
	newNamespace(t, "flux-src")
	repoKey := types.NamespacedName{Namespace: "flux-src", Name: "capacity"}
	repo := &sourcev1.GitRepository{ObjectMeta: metav1.ObjectMeta{Namespace: repoKey.Namespace, Name: repoKey.Name}}
	repo.Spec.URL = "https://git.example/acme/capacity.git"
	repo.Spec.Interval = metav1.Duration{Duration: time.Minute}
	if err := env.Client.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, repo)
	rev1 := "main@sha1:" + strings.Repeat("1", 40)
	setArtifact(t, repoKey, arts.Put(t, "gitrepository/flux-src/capacity/1.tar.gz", rev1, map[string][]byte{
		"capacity/capacity.cue": testenv.SmallRepo("flux", 16),
		"README.md":             []byte("not CUE: not read"),
	}))

	key := types.NamespacedName{Namespace: "flux-src", Name: "from-flux"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.SourceRef = &allotv1.SourceReference{Kind: sourcev1.GitRepositoryKind, Name: repoKey.Name}
	src.Spec.Path = "capacity"
	src.Spec.Interval = metav1.Duration{Duration: time.Hour}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, src)
	waitRevision(t, key, rev1, true)
	if got := getTeam(t, "flux-team").Spec.Quota[0].Nominal; got != 16 {
		t.Fatalf("flux-team nominal = %d, want 16", got)
	}

	// A new artifact: applied within seconds, not at the hour's interval.
	rev2 := "main@sha1:" + strings.Repeat("2", 40)
	start := time.Now()
	setArtifact(t, repoKey, arts.Put(t, "gitrepository/flux-src/capacity/2.tar.gz", rev2, map[string][]byte{
		"capacity/capacity.cue": testenv.SmallRepo("flux", 24),
	}))
	eventually(t, 15*time.Second, "revision 2 applied", func() error {
		s := getSource(t, key)
		if s.Status.LastAppliedRevision != rev2 || !conditions.IsReady(s) {
			return fmt.Errorf("last applied %q, ready %v: %s", s.Status.LastAppliedRevision, conditions.IsReady(s), conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
	t.Logf("artifact to applied revision: %v", time.Since(start).Round(time.Millisecond))
	if got := getTeam(t, "flux-team").Spec.Quota[0].Nominal; got != 24 {
		t.Fatalf("flux-team nominal = %d after revision 2, want 24", got)
	}

	// While an artifact downloads, the source says it is Reconciling, and
	// what stays in force meanwhile.
	rev3 := "main@sha1:" + strings.Repeat("3", 40)
	release := arts.Hold("gitrepository/flux-src/capacity/3.tar.gz")
	defer release()
	setArtifact(t, repoKey, arts.Put(t, "gitrepository/flux-src/capacity/3.tar.gz", rev3, map[string][]byte{
		"capacity/capacity.cue": testenv.SmallRepo("flux", 24),
	}))
	eventually(t, 15*time.Second, "Reconciling=True mid-run", func() error {
		s := getSource(t, key)
		if !conditions.IsReconciling(s) || s.Status.LastAppliedRevision != rev2 {
			return fmt.Errorf("reconciling=%v, last applied %q", conditions.IsReconciling(s), s.Status.LastAppliedRevision)
		}
		if msg := conditions.GetMessage(s, allotv1.ReconcilingCondition); !strings.Contains(msg, "revision "+rev2+" stays in force") {
			return fmt.Errorf("Reconciling message %q", msg)
		}
		return nil
	})
	release()
	waitRevision(t, key, rev3, true)
	good := rev3

	for _, tc := range []struct {
		name  string
		files map[string][]byte
		spoil func(*meta.Artifact)
		why   string
	}{
		{
			name:  "a digest that does not match",
			files: map[string][]byte{"capacity/capacity.cue": testenv.SmallRepo("flux", 99)},
			spoil: func(a *meta.Artifact) { a.Digest = fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("something else"))) },
			why:   "computed digest doesn't match",
		},
		{
			name:  "an artifact larger than the bound",
			files: map[string][]byte{"capacity/capacity.cue": testenv.SmallRepo("flux", 99), "capacity/noise.bin": random(t, 2*fluxMaxBytes)},
			spoil: func(*meta.Artifact) {},
			why:   "greater than the max download size",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := "main@sha1:" + fmt.Sprintf("%x", sha256.Sum256([]byte(tc.name)))[:40]
			a := arts.Put(t, "gitrepository/flux-src/capacity/"+rev+".tar.gz", rev, tc.files)
			tc.spoil(&a)
			setArtifact(t, repoKey, a)
			var msg string
			eventually(t, 15*time.Second, "Ready=False FetchFailed", func() error {
				s := getSource(t, key)
				msg = conditions.GetMessage(s, allotv1.ReadyCondition)
				if conditions.IsReady(s) || conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonFetchFailed || !strings.Contains(msg, tc.why) {
					return fmt.Errorf("ready=%v %s: %s", conditions.IsReady(s), conditions.GetReason(s, allotv1.ReadyCondition), msg)
				}
				if s.Status.LastAppliedRevision != good {
					return fmt.Errorf("last applied revision %q, want the last good %q", s.Status.LastAppliedRevision, good)
				}
				return nil
			})
			if !strings.Contains(msg, "revision "+good+" stays in force") || !strings.Contains(msg, rev) {
				t.Errorf("Ready message %q does not name the artifact %s and the revision in force", msg, rev)
			}
			if got := getTeam(t, "flux-team").Spec.Quota[0].Nominal; got != 24 {
				t.Errorf("flux-team nominal = %d, want 24 (revision 3 in force)", got)
			}
		})
	}
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// A source naming a Flux OCIRepository that has no artifact yet says so in its
// Ready condition, and applies the artifact as soon as it comes.
func TestFluxSourceNotReady(t *testing.T) {
	ctx := context.Background()
	newNamespace(t, "flux-wait")
	oci := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "flux-wait", Name: "capacity"}}
	oci.Spec.URL = "oci://registry.example/acme/capacity"
	oci.Spec.Interval = metav1.Duration{Duration: time.Minute}
	if err := env.Client.Create(ctx, oci); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, oci)
	key := types.NamespacedName{Namespace: "flux-wait", Name: "from-oci"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.SourceRef = &allotv1.SourceReference{Kind: sourcev1.OCIRepositoryKind, Name: oci.Name}
	src.Spec.Interval = metav1.Duration{Duration: time.Hour}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, src)
	eventually(t, 15*time.Second, "Ready=False: no artifact", func() error {
		s := getSource(t, key)
		if msg := conditions.GetMessage(s, allotv1.ReadyCondition); conditions.IsReady(s) || !strings.Contains(msg, "OCIRepository flux-wait/capacity has no artifact yet") {
			return fmt.Errorf("ready=%v: %s", conditions.IsReady(s), msg)
		}
		return nil
	})

	// The artifact arrives: applied at once, through the watch on
	// OCIRepositories.
	rev := "v1.0.0@sha256:" + strings.Repeat("3", 64)
	a := testenv.NewArtifactServer(t).Put(t, "ocirepository/flux-wait/capacity/1.tar.gz", rev, map[string][]byte{
		"capacity.cue": testenv.SmallRepo("oci", 8),
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(oci), oci); err != nil {
		t.Fatal(err)
	}
	oci.Status.Artifact = &a
	if err := env.Client.Status().Update(ctx, oci); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the OCI artifact applied", func() error {
		if s := getSource(t, key); s.Status.LastAppliedRevision != rev || !conditions.IsReady(s) {
			return fmt.Errorf("last applied %q: %s", s.Status.LastAppliedRevision, conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
	if got := getTeam(t, "oci-team").Spec.Quota[0].Nominal; got != 8 {
		t.Errorf("oci-team nominal = %d, want 8", got)
	}
}
