package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ArtifactServer serves tarballs over HTTP as source-controller's storage
// does, for Flux source objects whose status the test writes.
type ArtifactServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	held  map[string]chan struct{}
}

// NewArtifactServer starts a server that stops when the test ends.
func NewArtifactServer(t testing.TB) *ArtifactServer {
	s := &ArtifactServer{files: map[string][]byte{}, held: map[string]chan struct{}{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		hold := s.held[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(s.Close)
	return s
}

// Put serves a tar.gz of files at path and returns the artifact naming it
// (its URL, revision, sha256 digest and size).
func (s *ArtifactServer) Put(t testing.TB, path, revision string, files map[string][]byte) meta.Artifact {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.files["/"+path] = buf.Bytes()
	s.mu.Unlock()
	size := int64(buf.Len())
	return meta.Artifact{
		Path:           path,
		URL:            s.URL + "/" + path,
		Revision:       revision,
		Digest:         fmt.Sprintf("sha256:%x", sha256.Sum256(buf.Bytes())),
		LastUpdateTime: metav1.Now(),
		Size:           &size,
	}
}

// Hold makes downloads of path wait until release is called.
func (s *ArtifactServer) Hold(path string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held["/"+path] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// SmallRepo is a capacity repository of one kwok cluster, pool, tier and team,
// every name starting with prefix (so that tests sharing a control plane do
// not touch each other's cluster-scoped objects), the team's quota nominal.
func SmallRepo(prefix string, nominal int) []byte {
	return fmt.Appendf(nil, `package capacity

clusters: "%[1]s-lab": {provider: "kwok"}

pools: "%[1]s-pool": {
	cluster:     "%[1]s-lab"
	flavor:      "%[1]s-gpu"
	gpusPerNode: 8
	nodes: {min: 0, max: 8}
	price: {onDemandPerNodeHour: 10}
}

tiers: "%[1]s-tier": {priority: 43}

teams: "%[1]s-team": {
	costCenter: "CC-10"
	quota: "%[1]s-gpu": {nominal: %[2]d}
}
`, prefix, nominal)
}
