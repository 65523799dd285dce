package runner

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/allot-dev/allot/planner/render/terraform"
)

// stateServer is a remote state store for Terraform's http backend, with
// locking: a lock outlives the process that took it, as with gcs or s3, so a
// terraform killed while it holds the lock leaves it behind.
type stateServer struct {
	*httptest.Server
	mu    sync.Mutex
	state []byte
	lock  []byte // the holder's lock info, as Terraform sent it
	// auth, when set, is the password every request must carry.
	auth string
}

func newStateServer(t *testing.T) *stateServer {
	s := &stateServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *stateServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.auth != "" {
		if _, pw, ok := r.BasicAuth(); !ok || pw != s.auth {
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

// held returns the ID of the lock held, or "".
func (s *stateServer) held() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ""
	}
	return lockID(s.lock)
}

func lockID(info []byte) string {
	var l struct{ ID string }
	_ = json.Unmarshal(info, &l)
	return l.ID
}

// backend is the module's backend block for the server.
func (s *stateServer) backend() terraform.Backend {
	return terraform.Backend{Type: "http", Config: map[string]string{
		"address":        s.URL + "/state",
		"lock_address":   s.URL + "/state",
		"unlock_address": s.URL + "/state",
		"retry_max":      "0",
	}}
}
