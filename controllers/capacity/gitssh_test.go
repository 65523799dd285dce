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
	fluxssh "github.com/fluxcd/pkg/ssh"
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

	key, secret, good := applyPrivate(t, "gitssh", srv.SSHAddress()+"/acme/capacity.git",
		map[string][]byte{"identity": identity.PrivateKey, "known_hosts": knownHosts})
	if got := getTeam(t, "sshxers"); got.Spec.Quota[0].Nominal != 40 {
		t.Fatalf("Team sshxers nominal = %d, want 40", got.Spec.Quota[0].Nominal)
	}

	// The same host, another key: a man in the middle.
	host := "[" + u.Hostname() + "]:" + u.Port()
	secret.Data["known_hosts"] = []byte(host + " " + strings.TrimSpace(string(other.PublicKey)) + "\n")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	msg := waitFetchFailed(t, key, good)
	// The user name git is no secret: the message stays readable.
	if !strings.Contains(msg, "git clone of ssh://***@") || !strings.Contains(msg, "key mismatch") || !strings.Contains(msg, "revision "+good+" stays in force") {
		t.Errorf("Ready message %q does not say the host key mismatches and the last good revision stays", msg)
	}
	if strings.Contains(msg, "PRIVATE KEY") {
		t.Errorf("the Ready condition carries the private key: %s", msg)
	}
}
