package capacity_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fluxgit "github.com/fluxcd/pkg/git"
	"github.com/fluxcd/pkg/gittestserver"
	"github.com/fluxcd/pkg/runtime/conditions"
	fluxssh "github.com/fluxcd/pkg/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/controllers/capacity"
)

// A private repository on a real Git server over SSH, with a private key and
// the server's host key in known_hosts from spec.secretRef: applied. Then
// known_hosts names another key for the host: FetchFailed, the last good
// revision kept, the private key in no condition.
func TestPrivateRepositoryOverSSH(t *testing.T) {
	ctx := context.Background()
	srv, err := gittestserver.NewTempGitServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srv.Root()) })
	srv.KeyDir(t.TempDir())
	if err := srv.ListenSSH(); err != nil {
		t.Fatal(err)
	}
	go srv.StartSSH()
	t.Cleanup(func() { srv.StopSSH() })
	fixture := t.TempDir()
	repo := strings.ReplaceAll(fmt.Sprintf(fetchRepo, 40), "fetch", "sshx")
	if err := os.WriteFile(filepath.Join(fixture, "capacity.cue"), []byte(repo), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.InitRepo(fixture, "main", "acme/capacity.git"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.SSHAddress())
	if err != nil {
		t.Fatal(err)
	}
	knownHosts, err := fluxssh.ScanHostKey(u.Host, 5*time.Second, fluxgit.HostKeyAlgos, false)
	if err != nil {
		t.Fatal(err)
	}
	identity, err := fluxssh.NewEd25519Generator().Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := fluxssh.NewRSAGenerator(2048).Generate()
	if err != nil {
		t.Fatal(err)
	}

	newNamespace(t, "gitssh")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gitssh", Name: "git-ssh"},
		Data: map[string][]byte{"identity": identity.PrivateKey, "known_hosts": knownHosts}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "gitssh", Name: "private"}
	src := &allotv1.CapacitySource{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	src.Spec.URL = srv.SSHAddress() + "/acme/capacity.git"
	src.Spec.SecretRef = &allotv1.LocalObjectReference{Name: secret.Name}
	src.Spec.Interval = metav1.Duration{Duration: time.Second}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	good := waitRevision(t, key, "", true).Status.LastAppliedRevision
	if !strings.HasPrefix(good, "main@sha1:") {
		t.Fatalf("lastAppliedRevision = %q, want main@sha1:<commit>", good)
	}
	if got := getTeam(t, "sshxers"); got.Spec.Quota[0].Nominal != 40 {
		t.Fatalf("Team sshxers nominal = %d, want 40", got.Spec.Quota[0].Nominal)
	}

	// The same host, another key: a man in the middle.
	host := "[" + u.Hostname() + "]:" + u.Port()
	secret.Data["known_hosts"] = []byte(host + " " + strings.TrimSpace(string(other.PublicKey)) + "\n")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
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
	// The user name git is no secret: the message stays readable.
	if !strings.Contains(msg, "git clone of ssh://***@") || !strings.Contains(msg, "key mismatch") || !strings.Contains(msg, "revision "+good+" stays in force") {
		t.Errorf("Ready message %q does not say the host key mismatches and the last good revision stays", msg)
	}
	if strings.Contains(msg, "PRIVATE KEY") {
		t.Errorf("the Ready condition carries the private key: %s", msg)
	}
}
