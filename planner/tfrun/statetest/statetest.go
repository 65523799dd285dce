// Package statetest is a remote Terraform state store for tests: the http
// backend's protocol, with locking, in a real HTTP server.
package statetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/allot-dev/allot/planner/render/terraform"
)

// Server is a remote state store for Terraform's http backend, with
// locking: a lock outlives the process that took it, as with gcs or s3, so a
// terraform killed while it holds the lock leaves it behind.
type Server struct {
	*httptest.Server
	// Auth, when set, is the password every request must carry.
	Auth string

	mu    sync.Mutex
	state []byte
	lock  []byte // the holder's lock info, as Terraform sent it
}

// New starts a server that stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Auth != "" {
		if _, pw, ok := r.BasicAuth(); !ok || pw != s.Auth {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	switch r.Method {
	case http.MethodGet:
		if s.state == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write(s.state)
	case http.MethodPost:
		if s.lock != nil && r.URL.Query().Get("ID") != lockID(s.lock) {
			w.WriteHeader(http.StatusConflict)
			return
		}
		s.state = body
	case "LOCK":
		if s.lock != nil {
			w.WriteHeader(http.StatusLocked)
			w.Write(s.lock)
			return
		}
		s.lock = body
	case "UNLOCK":
		// Terraform's force-unlock sends no lock info: it releases any lock,
		// as GitLab's state store does.
		if s.lock == nil || len(body) > 0 && lockID(body) != lockID(s.lock) {
			w.WriteHeader(http.StatusConflict)
			return
		}
		s.lock = nil
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// Held returns the ID of the lock held, or "".
func (s *Server) Held() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ""
	}
	return lockID(s.lock)
}

// Lock takes the lock for a run that is not there (a CI job or a laptop
// that died holding it), as Terraform would record it.
func (s *Server) Lock(id, who string, created time.Time) {
	info, _ := json.Marshal(map[string]any{"ID": id, "Operation": "OperationTypeApply", "Who": who, "Version": "1.11.0", "Created": created, "Path": ""})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lock = info
}

// State returns the stored state.
func (s *Server) State() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.state...)
}

func lockID(info []byte) string {
	var l struct{ ID string }
	_ = json.Unmarshal(info, &l)
	return l.ID
}

// Backend is the module's backend block for the server.
func (s *Server) Backend() terraform.Backend {
	return terraform.Backend{Type: "http", Config: map[string]string{
		"address":        s.URL + "/state",
		"lock_address":   s.URL + "/state",
		"unlock_address": s.URL + "/state",
		"retry_max":      "0",
	}}
}
