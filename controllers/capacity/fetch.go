package capacity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	fluxgit "github.com/fluxcd/pkg/git"
	"github.com/fluxcd/pkg/git/gogit"
	"github.com/fluxcd/pkg/git/repository"
	"github.com/fluxcd/pkg/http/fetch"
	"github.com/fluxcd/pkg/tar"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/schema"
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

// GitFetcher clones Git repositories with go-git (fluxcd/pkg/git/gogit):
// HTTPS with basic auth or a bearer token, SSH with a private key and
// known_hosts, from the Secret named by spec.secretRef (the keys of Flux's
// GitRepository). Each fetch is a shallow clone into a fresh directory under
// Dir; no git binary is needed.
type GitFetcher struct {
	// Dir holds the clones while they are read.
	Dir string
	// Secrets reads the Secret named by spec.secretRef; nil: no secretRef
	// may be used.
	Secrets client.Reader
	// MaxBytes bounds a clone on disk, checkout and objects (a repository
	// of large files would otherwise fill Dir); default DefaultMaxCloneBytes.
	// The clone is measured as it is written, every CloneCheckEvery, so it
	// may pass the bound by what is written in that time before it stops.
	MaxBytes int64
}

// DefaultMaxCloneBytes is GitFetcher's default bound: a capacity repository
// is text, and its .cue files are read up to schema.MaxSourceBytes.
const DefaultMaxCloneBytes = 4 * source.MaxArchiveBytes

// CloneCheckEvery is how often a clone's size is measured.
const CloneCheckEvery = 100 * time.Millisecond

// CloneSizeError says a clone grew past GitFetcher.MaxBytes.
type CloneSizeError struct{ Max int64 }

func (e *CloneSizeError) Error() string {
	return fmt.Sprintf("the clone grew past %d bytes on disk (the manager's --git-max-bytes): a capacity repository is text; keep large files out of it", e.Max)
}

// watchSize measures dir every CloneCheckEvery until stop is called, and
// cancels the clone with a *CloneSizeError when it holds more than max bytes.
func watchSize(dir string, max int64, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(CloneCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			var total int64
			_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil // a file go-git just renamed or removed
				}
				if info, err := d.Info(); err == nil && d.Type().IsRegular() {
					total += info.Size()
				}
				return nil
			})
			if total > max {
				cancel(&CloneSizeError{Max: max})
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Fetch implements Fetcher. Its errors never carry the credentials of the
// URL (userinfo, query) nor of the Secret: see RedactURL.
func (g *GitFetcher) Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	art, secrets, err := g.fetch(ctx, src)
	if err != nil {
		return Artifact{}, redactError(err, src.Spec.URL, secrets...)
	}
	return art, nil
}

func (g *GitFetcher) fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, []string, error) {
	u, err := url.Parse(src.Spec.URL)
	if err != nil || u.Scheme == "" {
		return Artifact{}, nil, &SpecError{fmt.Sprintf("spec.url %q: not an https://, http://, ssh:// or file:// URL", RedactURL(src.Spec.URL))}
	}
	var data map[string][]byte
	var secrets []string
	if ref := src.Spec.SecretRef; ref != nil {
		if g.Secrets == nil {
			return Artifact{}, nil, &SpecError{"spec.secretRef: this manager reads no Secrets"}
		}
		var sec corev1.Secret
		if err := g.Secrets.Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: ref.Name}, &sec); err != nil {
			return Artifact{}, nil, fmt.Errorf("spec.secretRef: Secret %s/%s: %w", src.Namespace, ref.Name, err)
		}
		data = sec.Data
		for _, k := range []string{"password", "bearerToken", "identity"} {
			if v := strings.TrimSpace(string(data[k])); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	// A file:// repository (a volume, tests) needs no credentials; the
	// client still wants options of a transport it knows, and go-git
	// ignores those of HTTP for a local path.
	auth := &fluxgit.AuthOptions{Transport: fluxgit.HTTP}
	if u.Scheme != "file" {
		if auth, err = fluxgit.NewAuthOptions(*u, data); err != nil {
			return Artifact{}, secrets, &SpecError{fmt.Sprintf("credentials for %s: %v", RedactURL(src.Spec.URL), err)}
		}
	}
	if err := os.MkdirAll(g.Dir, 0o700); err != nil {
		return Artifact{}, secrets, err
	}
	dir, err := os.MkdirTemp(g.Dir, "clone-")
	if err != nil {
		return Artifact{}, secrets, err
	}
	defer os.RemoveAll(dir)
	opts := []gogit.ClientOption{gogit.WithDiskStorage(), gogit.WithSingleBranch(true)}
	if u.Scheme == "http" {
		// The Secret says so: an http:// URL with credentials is the
		// user's choice (a Git host inside the cluster).
		opts = append(opts, gogit.WithInsecureCredentialsOverHTTP())
	}
	c, err := gogit.NewClient(dir, auth, opts...)
	if err != nil {
		return Artifact{}, secrets, err
	}
	defer c.Close()
	ref := src.Spec.Ref
	if ref == nil {
		ref = &allotv1.GitReference{}
	}
	cfg := repository.CloneConfig{ShallowClone: true}
	switch {
	case ref.Commit != "":
		cfg.Commit, cfg.Branch = ref.Commit, ref.Branch
		cfg.ShallowClone = false
	case ref.SemVer != "":
		cfg.SemVer = ref.SemVer
	case ref.Tag != "":
		cfg.Tag = ref.Tag
	default:
		cfg.Branch = ref.Branch
		if cfg.Branch == "" {
			cfg.Branch = "main"
		}
	}
	cloneCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchSize(dir, cmp.Or(g.MaxBytes, DefaultMaxCloneBytes), cancel)
	commit, err := c.Clone(cloneCtx, src.Spec.URL, cfg)
	stop()
	if se := (*CloneSizeError)(nil); errors.As(context.Cause(cloneCtx), &se) {
		err = se
	}
	if err != nil {
		return Artifact{}, secrets, fmt.Errorf("git clone of %s: %w", RedactURL(src.Spec.URL), err)
	}
	files, err := readCUE(dir, src.Spec.Path)
	if limit := (*LimitError)(nil); errors.As(err, &limit) {
		limit.Revision = commit.String()
	}
	if err != nil {
		return Artifact{}, secrets, err
	}
	return Artifact{Revision: commit.String(), Files: files}, secrets, nil
}

// readCUE reads the .cue files under dir, the path spec.path names in the
// checkout, into memory, through schema.WalkSources, the walk that Load itself
// makes: within schema's bounds of what is read (MaxSourceBytes,
// MaxSourceFiles, MaxEntries, MaxFolderDepth; a *LimitError at the first one
// exceeded, nothing read past it, never a file read whole beyond what remains),
// only the files Load would read (cue.mod, hidden and _-prefixed files and
// folders, .git among them, are not walked), and only inside the checkout: a
// spec.path through a symbolic link the repository points elsewhere is an
// error naming it, and source.Dir serves only regular files inside the
// folder (a symbolic link out of it, a named pipe or a device is an error
// naming the file, never a read that hangs).
func readCUE(checkout, dir string) (fs.FS, error) {
	root, err := os.OpenRoot(checkout)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	start := path.Clean("./" + strings.TrimPrefix(filepath.ToSlash(dir), "/"))
	if err := inside(root, start); err != nil {
		return nil, err
	}
	fsys, err := source.Dir(filepath.Join(checkout, filepath.FromSlash(start)))
	if err != nil {
		return nil, err
	}
	files := fstest.MapFS{}
	findings := schema.WalkSources(fsys, func(p string, src []byte) {
		files[p] = &fstest.MapFile{Data: src, Mode: 0o444}
	})
	var cannot error
	for _, f := range findings {
		if f.Rule == schema.RuleLimit {
			return nil, &LimitError{Path: path.Join(start, f.Pos.File), Bound: f.Message}
		}
		if cannot == nil && f.Severity == schema.SeverityError {
			cannot = fmt.Errorf("reading %s: %s", path.Join(start, f.Pos.File), strings.TrimPrefix(f.Message, "cannot read: "))
		}
	}
	if cannot != nil {
		return nil, cannot
	}
	return files, nil
}

// A LimitError says a revision's .cue files exceed one of schema's bounds of
// what is read (schema.RuleLimit): found while they were read, before any of
// them was loaded, and nothing read past it. Retrying does not help until a
// new revision.
type LimitError struct {
	// Revision is the revision read, once known.
	Revision string
	// Path is the file or folder where the walk stopped, in the repository.
	Path string
	// Bound says which bound, as schema.WalkSources does.
	Bound string
}

func (e *LimitError) Error() string {
	rev := ""
	if e.Revision != "" {
		rev = "revision " + e.Revision + ": "
	}
	return fmt.Sprintf("%s%s: %s (rule %s: nothing past it was read)", rev, e.Path, e.Bound, schema.RuleLimit)
}

// inside checks that each directory of the path p, relative to root, is in
// root: a symbolic link among them must point inside.
func inside(root *os.Root, p string) error {
	if p == "." {
		return nil
	}
	parts := strings.Split(p, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		info, err := root.Lstat(prefix)
		if err != nil {
			return fmt.Errorf("spec.path %s: %w", p, err)
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if _, err := root.Stat(prefix); err != nil {
			return fmt.Errorf("spec.path %s: %s is a symbolic link out of the repository: not followed", p, prefix)
		}
	}
	return nil
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
func redactError(err error, raw string, extra ...string) error {
	msg := err.Error()
	secrets := slices.Clone(extra)
	if u, perr := url.Parse(raw); perr == nil {
		if u.User != nil {
			pw, ok := u.User.Password()
			if ok {
				secrets = append(secrets, u.User.String(), pw, url.QueryEscape(pw))
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
	msg = redact(strings.ReplaceAll(msg, raw, RedactURL(raw)), secrets)
	var spec *SpecError
	if errors.As(err, &spec) {
		return &SpecError{msg}
	}
	if size := (*CloneSizeError)(nil); errors.As(err, &size) {
		return &redactedError{msg: msg, err: size} // which holds no secret
	}
	if limit := (*LimitError)(nil); errors.As(err, &limit) {
		// Its paths are the repository's, its revision a commit: no secret.
		return &redactedError{msg: msg, err: limit}
	}
	return errors.New(msg)
}

// FluxFetcher downloads the artifact of a Flux source (GitRepository,
// OCIRepository or Bucket) with fluxcd/pkg/http/fetch: its digest checked, its
// size bounded, and untarred by fluxcd/pkg/tar (bounded, no path outside the
// directory, symbolic links skipped) into a fresh directory under Dir.
type FluxFetcher struct {
	// Client reads the source objects.
	Client client.Reader
	// Dir holds the artifacts while they are read; default: the system's
	// temporary directory.
	Dir string
	// MaxBytes bounds an artifact, packed and unpacked; default
	// source.MaxArchiveBytes.
	MaxBytes int
}

// ArtifactNotReadyError says the Flux source has no artifact yet.
type ArtifactNotReadyError struct{ Source string }

func (e *ArtifactNotReadyError) Error() string {
	return e.Source + " has no artifact yet"
}

// Fetch implements Fetcher.
func (f *FluxFetcher) Fetch(ctx context.Context, src *allotv1.CapacitySource) (Artifact, error) {
	ref := src.Spec.SourceRef
	obj, err := NewFluxSource(ref.Kind)
	if err != nil {
		return Artifact{}, err
	}
	key := client.ObjectKey{Namespace: cmp.Or(ref.Namespace, src.Namespace), Name: ref.Name}
	name := ref.Kind + " " + key.String()
	if err := f.Client.Get(ctx, key, obj); err != nil {
		return Artifact{}, fmt.Errorf("%s: %w", name, err)
	}
	a := obj.GetArtifact()
	if a == nil || a.URL == "" || a.Revision == "" {
		return Artifact{}, &ArtifactNotReadyError{name}
	}
	if f.Dir != "" {
		if err := os.MkdirAll(f.Dir, 0o700); err != nil {
			return Artifact{}, err
		}
	}
	dir, err := os.MkdirTemp(f.Dir, "artifact-")
	if err != nil {
		return Artifact{}, err
	}
	defer os.RemoveAll(dir)
	max := cmp.Or(f.MaxBytes, source.MaxArchiveBytes)
	fetcher := fetch.New(
		fetch.WithMaxDownloadSize(max),
		fetch.WithUntar(tar.WithMaxUntarSize(max)),
		fetch.WithLogger(log.FromContext(ctx)),
	)
	if err := fetcher.FetchWithContext(ctx, a.URL, a.Digest, dir); err != nil {
		return Artifact{}, fmt.Errorf("artifact %s of %s: %w", a.Revision, name, err)
	}
	files, err := readCUE(dir, src.Spec.Path)
	if limit := (*LimitError)(nil); errors.As(err, &limit) {
		limit.Revision = a.Revision
		return Artifact{}, fmt.Errorf("%s: %w", name, err)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact %s of %s: %w", a.Revision, name, err)
	}
	return Artifact{Revision: a.Revision, Files: files}, nil
}

// FluxSourceKinds are the Flux sources a CapacitySource may name.
var FluxSourceKinds = []string{sourcev1.GitRepositoryKind, sourcev1.OCIRepositoryKind, sourcev1.BucketKind}

// NewFluxSource returns an empty object of the Flux source kind.
func NewFluxSource(kind string) (interface {
	client.Object
	GetArtifact() *meta.Artifact
}, error) {
	switch kind {
	case sourcev1.GitRepositoryKind:
		return &sourcev1.GitRepository{}, nil
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}, nil
	case sourcev1.BucketKind:
		return &sourcev1.Bucket{}, nil
	}
	return nil, &SpecError{fmt.Sprintf("spec.sourceRef.kind %q: not one of %s", kind, strings.Join(FluxSourceKinds, ", "))}
}
