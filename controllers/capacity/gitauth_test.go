package capacity_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/gittestserver"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
)

// A private repository on a real Git server (fluxcd/pkg/gittestserver) over
// HTTP with basic auth, its credentials in the Secret named by
// spec.secretRef under the keys of Flux's GitRepository: applied. Then the
// Secret's password goes wrong: Ready=False FetchFailed, the password in no
// condition, the last good revision kept.
func TestPrivateRepositoryOverHTTP(t *testing.T) {
	ctx := context.Background()
	const user, password = "allot", "s3cret-pa55word"
	srv, err := gittestserver.NewTempGitServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srv.Root()) })
	srv.Auth(user, password)
	if err := srv.StartHTTP(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.StopHTTP)
	fixture := t.TempDir()
	repo := strings.ReplaceAll(fmt.Sprintf(fetchRepo, 24), "fetch", "auth")
	if err := os.WriteFile(filepath.Join(fixture, "capacity.cue"), []byte(repo), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.InitRepo(fixture, "main", "acme/capacity.git"); err != nil {
		t.Fatal(err)
	}

	key, secret, good := applyPrivate(t, "gitauth", srv.HTTPAddress()+"/acme/capacity.git",
		map[string][]byte{"username": []byte(user), "password": []byte(password)})
	if got := getTeam(t, "authers"); got.Spec.Quota[0].Nominal != 24 {
		t.Fatalf("Team authers nominal = %d, want 24", got.Spec.Quota[0].Nominal)
	}

	secret.Data["password"] = []byte("wrong-pa55word-x")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	msg := waitFetchFailed(t, key, good)
	for _, s := range []string{password, "wrong-pa55word-x"} {
		if strings.Contains(msg, s) {
			t.Errorf("the Ready condition carries a password: %s", msg)
		}
	}
	if !strings.Contains(msg, "authentication required") || !strings.Contains(msg, "revision "+good+" stays in force") {
		t.Errorf("Ready message %q does not say the authentication failed and the last good revision stays", msg)
	}
}

// applyPrivate creates in a new namespace ns a Secret with data and a
// CapacitySource of url naming it, and waits until a revision is applied.
func applyPrivate(t *testing.T, ns, url string, data map[string][]byte) (types.NamespacedName, *corev1.Secret, string) {
	t.Helper()
	ctx := context.Background()
	newNamespace(t, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-creds"}, Data: data}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, secret)
	key := types.NamespacedName{Namespace: ns, Name: "private"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL = url
	src.Spec.SecretRef = &allotv1.LocalObjectReference{Name: secret.Name}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, src)
	var good string
	eventually(t, 60*time.Second, "a revision applied", func() error {
		s := getSource(t, key)
		good = s.Status.LastAppliedRevision
		if !conditions.IsReady(s) || !strings.HasPrefix(good, "main@sha1:") {
			return fmt.Errorf("ready=%v lastAppliedRevision=%q: %s", conditions.IsReady(s), good, conditions.GetMessage(s, allotv1.ReadyCondition))
		}
		return nil
	})
	return key, secret, good
}

// waitFetchFailed waits for Ready=False FetchFailed with the last good
// revision kept, and returns the Ready message.
func waitFetchFailed(t *testing.T, key types.NamespacedName, good string) string {
	t.Helper()
	var msg string
	eventually(t, 30*time.Second, "Ready=False FetchFailed", func() error {
		s := getSource(t, key)
		msg = conditions.GetMessage(s, allotv1.ReadyCondition)
		if conditions.IsReady(s) || conditions.GetReason(s, allotv1.ReadyCondition) != capacity.ReasonFetchFailed {
			return fmt.Errorf("ready=%v %s: %s", conditions.IsReady(s), conditions.GetReason(s, allotv1.ReadyCondition), msg)
		}
		if s.Status.LastAppliedRevision != good {
			t.Errorf("lastAppliedRevision = %q, want the last good %q", s.Status.LastAppliedRevision, good)
		}
		return nil
	})
	return msg
}
