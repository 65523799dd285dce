package capacity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/schema/source"
)

// Artifact is one fetched revision of a capacity repository.
type Artifact struct {
	// Revision names it the way Flux does: main@sha1:<commit>, v1@sha1:<commit>
	// or sha1:<commit>.
	Revision string
	// Files are the .cue files under the source's path.
	Files fs.FS
}

// Fetcher fetches the current revision of a CapacitySource.
type Fetcher interface {
	Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error)
}

// Sources fetches from Git or from Flux, as each CapacitySource says.
type Sources struct {
	Git  *GitFetcher
	Flux *FluxFetcher
}

// Fetch implements Fetcher.
func (s Sources) Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	if err := checkPath(src.Spec.Path); err != nil {
		return Artifact{}, err
	}
	switch {
	case src.Spec.SourceRef != nil:
		return s.Flux.Fetch(ctx, src)
	case src.Spec.URL != "":
		return s.Git.Fetch(ctx, src)
	}
	return Artifact{}, &SpecError{"neither spec.url nor spec.sourceRef is set"}
}

// SpecError is a CapacitySource that cannot work as written: retrying does not
// help until its spec changes.
type SpecError struct{ msg string }

func (e *SpecError) Error() string { return e.msg }

func checkPath(p string) error {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return &SpecError{fmt.Sprintf("spec.path %q leaves the repository", p)}
		}
	}
	return nil
}

// GitFetcher mirrors Git repositories into bare repositories under Dir and
// reads revisions from Git's objects: no work tree is checked out.
type GitFetcher struct {
	// Dir holds one bare mirror per CapacitySource.
	Dir string
}

// Fetch implements Fetcher. Its errors never carry the credentials of the
// URL (userinfo, query): see RedactURL.
func (g *GitFetcher) Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	art, err := g.fetch(ctx, src)
	if err != nil {
		return Artifact{}, redactError(err, src.Spec.URL)
	}
	return art, nil
}

func (g *GitFetcher) fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	repo := filepath.Join(g.Dir, src.Namespace, src.Name+".git")
	if _, err := os.Stat(filepath.Join(repo, "HEAD")); err != nil {
		if err := os.MkdirAll(repo, 0o755); err != nil {
			return Artifact{}, err
		}
		if _, err := git(ctx, repo, "init", "--quiet", "--bare"); err != nil {
			return Artifact{}, err
		}
	}
	ref := src.Spec.Ref
	if ref == nil {
		ref = &allotv1.GitReference{}
	}
	var refspec, local, name string
	switch {
	case ref.Commit != "":
		refspec, local = "+refs/heads/*:refs/heads/*", ref.Commit
	case ref.Tag != "":
		refspec, local, name = "+refs/tags/"+ref.Tag+":refs/tags/"+ref.Tag, "refs/tags/"+ref.Tag, ref.Tag
	default:
		branch := ref.Branch
		if branch == "" {
			branch = "main"
		}
		refspec, local, name = "+refs/heads/"+branch+":refs/heads/"+branch, "refs/heads/"+branch, branch
	}
	if _, err := git(ctx, repo, "fetch", "--quiet", "--force", "--no-tags", "--prune", "--", src.Spec.URL, refspec); err != nil {
		return Artifact{}, err
	}
	out, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", "--end-of-options", local+"^{commit}")
	if err != nil {
		return Artifact{}, fmt.Errorf("git: %q not found in %s", local, RedactURL(src.Spec.URL))
	}
	commit := strings.TrimSpace(string(out))
	files, err := source.GitTree(repo, commit, src.Spec.Path)
	if err != nil {
		return Artifact{}, err
	}
	rev := "sha1:" + commit
	if len(commit) == 64 {
		rev = "sha256:" + commit
	}
	if name != "" {
		rev = name + "@" + rev
	}
	return Artifact{Revision: rev, Files: files}, nil
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("git is not installed: %w", err)
		}
		return nil, fmt.Errorf("git %s: %s", args[0], strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// RedactURL returns a Git URL without what may be a credential: its userinfo
// (user:password, or a token as the user name) becomes "***" and its query
// "?***". A URL that does not parse (git@host:path) is returned as it is: it
// has no place for a password.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return raw
	}
	s := u.Scheme + "://"
	if u.User != nil {
		s += "***@"
	}
	s += u.Host + u.EscapedPath()
	if u.RawQuery != "" || u.ForceQuery {
		s += "?***"
	}
	if u.Fragment != "" {
		s += "#***"
	}
	return s
}

// redactError is err with every credential of the URL raw taken out of its
// text: the URL itself, as given and as git prints it, and each part that
// may be secret (git prints a URL without its password, but with its query).
// The redacted error keeps no link to err: its text is all a condition, an
// event or a log line gets.
func redactError(err error, raw string) error {
	msg := err.Error()
	var secrets []string
	if u, perr := url.Parse(raw); perr == nil {
		if u.User != nil {
			secrets = append(secrets, u.User.String())
			pw, ok := u.User.Password()
			if ok {
				secrets = append(secrets, pw, url.QueryEscape(pw))
			}
			// A user name alone may be a token (https://<token>@host/...);
			// a short one (git, oauth2) is a name, and too common a word to
			// take out of a message.
			if name := u.User.Username(); len(name) >= 20 || !ok && len(name) >= 8 {
				secrets = append(secrets, name)
			}
		}
		if u.RawQuery != "" {
			secrets = append(secrets, u.RawQuery)
			for _, vs := range u.Query() {
				secrets = append(secrets, vs...)
			}
		}
		if u.Fragment != "" {
			secrets = append(secrets, u.Fragment)
		}
	}
	if !strings.Contains(msg, raw) && len(secrets) == 0 {
		return err
	}
	msg = strings.ReplaceAll(msg, raw, RedactURL(raw))
	// Longest first, so that a part inside another goes with it.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	var spec *SpecError
	if errors.As(err, &spec) {
		return &SpecError{msg}
	}
	return errors.New(msg)
}

// GitRepositoryKind is the Flux source a CapacitySource may name.
var GitRepositoryKind = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}

// FluxFetcher downloads the artifact of a Flux GitRepository.
type FluxFetcher struct {
	Client client.Client
	HTTP   *http.Client
}

// ArtifactNotReadyError says the Flux source has no artifact yet.
type ArtifactNotReadyError struct{ Source string }

func (e *ArtifactNotReadyError) Error() string {
	return "GitRepository " + e.Source + " has no artifact yet"
}

// Fetch implements Fetcher.
func (f *FluxFetcher) Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	ref := src.Spec.SourceRef
	if ref.Kind != GitRepositoryKind.Kind {
		return Artifact{}, &SpecError{fmt.Sprintf("spec.sourceRef.kind %q: only GitRepository is supported", ref.Kind)}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = src.Namespace
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GitRepositoryKind)
	if err := f.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, u); err != nil {
		return Artifact{}, fmt.Errorf("GitRepository %s/%s: %w", ns, ref.Name, err)
	}
	url, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "url")
	rev, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "revision")
	digest, _, _ := unstructured.NestedString(u.Object, "status", "artifact", "digest")
	if url == "" || rev == "" {
		return Artifact{}, &ArtifactNotReadyError{ns + "/" + ref.Name}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Artifact{}, err
	}
	hc := f.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Artifact{}, fmt.Errorf("downloading the artifact of GitRepository %s/%s: %w", ns, ref.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Artifact{}, fmt.Errorf("downloading the artifact of GitRepository %s/%s: %s", ns, ref.Name, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, source.MaxArchiveBytes+1))
	if err != nil {
		return Artifact{}, fmt.Errorf("downloading the artifact of GitRepository %s/%s: %w", ns, ref.Name, err)
	}
	if err := verifyDigest(data, digest); err != nil {
		return Artifact{}, fmt.Errorf("artifact of GitRepository %s/%s: %w", ns, ref.Name, err)
	}
	files, err := source.Tarball(bytes.NewReader(data), src.Spec.Path)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact of GitRepository %s/%s: %w", ns, ref.Name, err)
	}
	return Artifact{Revision: rev, Files: files}, nil
}

// verifyDigest checks data against a digest "sha256:<hex>"; an empty digest
// (a Flux older than v1) is not checked.
func verifyDigest(data []byte, digest string) error {
	if digest == "" {
		return nil
	}
	algo, want, ok := strings.Cut(digest, ":")
	if !ok || algo != "sha256" {
		return fmt.Errorf("digest %q: only sha256 is supported", digest)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("digest mismatch: got sha256:%s, want %s", got, digest)
	}
	return nil
}
