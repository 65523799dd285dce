package tfrun

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"github.com/allot-dev/allot/schema"
)

// BinaryError says the terraform binary is missing or does not run.
type BinaryError struct {
	Path string // what was looked for: "terraform" on PATH, or the given path
	Err  error
}

func (e *BinaryError) Error() string {
	return fmt.Sprintf("terraform binary %s: %v (install Terraform %s or point allot at it)", e.Path, e.Err, MinVersion)
}

func (e *BinaryError) Unwrap() error { return e.Err }

// VersionError says the terraform binary is older than the modules need.
type VersionError struct {
	Path  string
	Found string
	Min   string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("terraform %s at %s is too old: the modules need %s or newer", e.Found, e.Path, e.Min)
}

// LockError says another run holds the state lock. When no run is going on,
// the lock is stale: 'terraform force-unlock ID' in the working directory
// releases it.
type LockError struct {
	ID        string
	Path      string
	Operation string
	Who       string
	Created   string
	Detail    string // Terraform's message, e.g. "resource temporarily unavailable"
}

func (e *LockError) Error() string {
	s := "the state is locked"
	if e.Who != "" {
		s += " by " + e.Who
	}
	if e.Created != "" {
		s += " since " + e.Created
	}
	if e.ID != "" {
		s += fmt.Sprintf(" (lock ID %s)", e.ID)
	}
	return s + ": another terraform run holds it; if none does, 'terraform force-unlock " + cmp.Or(e.ID, "ID") + "' releases it"
}

// ProviderError says a provider could not be installed, started or configured,
// credentials included (Credentials is then true).
type ProviderError struct {
	Credentials bool
	Summary     string
	Detail      string
}

func (e *ProviderError) Error() string {
	return failure("provider failure", "provider credentials", e.Credentials, e.Summary, e.Detail)
}

// BackendError says the state backend could not be initialised or read (a
// missing bucket, a changed backend configuration that needs 'terraform init
// -migrate-state', no access to the state: Credentials is then true).
type BackendError struct {
	Credentials bool
	Summary     string
	Detail      string
}

func (e *BackendError) Error() string {
	return failure("state backend", "state backend credentials", e.Credentials, e.Summary, e.Detail)
}

// failure is what failed and Terraform's diagnostic; credentials names what
// failed when they are the cause.
func failure(what, credentials string, creds bool, summary, detail string) string {
	if creds {
		what = credentials
	}
	return what + ": " + joinDiag(summary, detail)
}

// HookError says a node hook (the local-exec command of an onprem or kwok
// module) failed. Terraform marks that node's resource tainted: the next apply
// runs the hook again, so hooks must be idempotent.
type HookError struct {
	Resource string // e.g. terraform_data.a100_nodes["a100-3"]
	Output   string
}

func (e *HookError) Error() string {
	s := "node hook failed"
	if e.Resource != "" {
		s += " for " + e.Resource
	}
	if e.Output != "" {
		s += ": " + e.Output
	}
	return s
}

// DriftError says the real state differs from what allot's last apply left
// or from what allot planned: resources changed outside Terraform (found by
// the plan's refresh, e.g. a gke pool resized by hand), another run changed
// the state, the state moved on since a saved plan was made, or a pool's
// nodes in the cluster are not as many as the state says. Plan again, look at
// the drift, and apply the new plan to correct it (ApplyOptions.CorrectDrift).
// For an onprem or kwok node that is gone from the cluster but not from the
// state, plan with PlanOptions.Replace of its terraform.NodeAddress.
type DriftError struct {
	Reason    string      // how the state moved, if it did
	Resources []string    // addresses of resources changed outside Terraform
	Pools     []PoolDrift // pools whose observed size differs from the state
}

// PoolDrift is a pool whose nodes in the cluster differ from its nodes in the
// Terraform state.
type PoolDrift struct {
	Pool     schema.PoolName
	State    int64 // nodes in the state (after refresh)
	Observed int64 // nodes seen in the cluster
}

func (e *DriftError) Error() string {
	var parts []string
	if e.Reason != "" {
		parts = append(parts, e.Reason)
	}
	if len(e.Resources) > 0 {
		parts = append(parts, "changed outside Terraform: "+strings.Join(e.Resources, ", "))
	}
	for _, p := range e.Pools {
		parts = append(parts, fmt.Sprintf("pool %s has %d nodes in the cluster, %d in the Terraform state", p.Pool, p.Observed, p.State))
	}
	return "drift: " + strings.Join(parts, "; ")
}

// Error is any other failure of a terraform command, with Terraform's own
// diagnostics.
type Error struct {
	Diagnostics []string
	Err         error
}

func (e *Error) Error() string {
	if len(e.Diagnostics) == 0 {
		// Terraform's message without diagnostics: "exit status 1" and
		// stderr, on one line.
		status, rest, _ := strings.Cut(e.Err.Error(), "\n")
		if rest = strings.Join(strings.Fields(rest), " "); rest != "" {
			return rest + " (" + status + ")"
		}
		return status
	}
	return strings.Join(e.Diagnostics, "; ")
}

func (e *Error) Unwrap() error { return e.Err }

// diagnostic is one "Error: summary" block of Terraform's output.
type diagnostic struct {
	Summary string
	Detail  []string
}

func (d diagnostic) text() string { return joinDiag(d.Summary, strings.Join(d.Detail, " ")) }

func joinDiag(summary, detail string) string {
	if detail == "" {
		return summary
	}
	return summary + ": " + detail
}

// errorDiagnostics reads the error diagnostics out of Terraform's stderr, with
// or without the box drawing of colourless output.
func errorDiagnostics(stderr string) []diagnostic {
	var out []diagnostic
	var cur *diagnostic
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimLeft(line, "╷│╵ ")
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Error: "):
			out = append(out, diagnostic{Summary: strings.TrimPrefix(line, "Error: ")})
			cur = &out[len(out)-1]
		case strings.HasPrefix(line, "Warning: "):
			cur = nil
		case cur != nil && line != "":
			cur.Detail = append(cur.Detail, line)
		}
	}
	return out
}

var (
	lockField   = regexp.MustCompile(`(?m)^\s*[│]?\s*(ID|Path|Operation|Who|Created):\s*(.*?)\s*$`)
	heldID      = regexp.MustCompile(`already locked:\s*ID=(\S+)`)
	hookAddress = regexp.MustCompile(`(?m)^\s*[│]?\s*with (\S+),\s*$`)
	hookOutput  = regexp.MustCompile(`(?s)Error running command .*?Output:\s*(.*)$`)
)

// Substrings of Terraform's and the providers' messages, by what the operator
// has to fix.
var (
	credentialMarks = []string{
		"no valid credential sources", "could not find default credentials",
		"application default credentials", "failed to refresh cached credentials",
		"invalidclienttokenid", "expiredtoken", "unrecognizedclientexception",
		"security token included in the request is invalid", "invalid_grant",
		"oauth2: cannot fetch token", "permission_denied", "accessdenied", "403 forbidden",
		"statuscode: 403", "error 403", "requires auth", "invalid auth", "401 unauthorized",
	}
	providerMarks = []string{
		"failed to query available provider packages", "failed to install provider",
		"failed to load plugin schemas", "required plugins are not installed",
		"inconsistent dependency lock file", "missing required provider",
		"invalid provider configuration", "failed to instantiate provider",
		"could not load plugin", "plugin did not respond", "configuring terraform aws provider",
		"error configuring", "provider produced",
	}
	backendMarks = []string{
		"backend initialization required", "backend configuration changed",
		"error loading state", "failed to get existing workspaces",
		"error configuring the backend", "failed to load state", "error refreshing state",
		"unsupported backend type", "backend",
	}
)

// classify turns a failed terraform command's error (whose text ends with its
// stderr) into the typed error an operator acts on.
func classify(err error) error {
	text := err.Error()
	diags := errorDiagnostics(text)
	for _, d := range diags {
		low := strings.ToLower(d.text())
		switch {
		case strings.Contains(low, "error acquiring the state lock"):
			le := &LockError{}
			for _, m := range lockField.FindAllStringSubmatch(text, -1) {
				switch m[1] {
				case "ID":
					le.ID = m[2]
				case "Path":
					le.Path = m[2]
				case "Operation":
					le.Operation = m[2]
				case "Who":
					le.Who = m[2]
				case "Created":
					le.Created = m[2]
				}
			}
			// The message runs until the lock info, wrapped over lines.
			var msg []string
			for _, l := range d.Detail {
				if l == "Lock Info:" {
					break
				}
				msg = append(msg, l)
			}
			le.Detail = strings.TrimPrefix(strings.Join(msg, " "), "Error message: ")
			// Some backends (http) print the lock info of the run that
			// asked, not of the holder, and name the holder's lock in the
			// message only.
			if m := heldID.FindStringSubmatch(le.Detail); m != nil && m[1] != le.ID {
				*le = LockError{ID: m[1], Path: le.Path, Detail: le.Detail}
			}
			return le
		case strings.Contains(low, "saved plan is stale"):
			return &DriftError{Reason: "the state changed since the plan was made"}
		case strings.Contains(low, "local-exec provisioner error"):
			he := &HookError{}
			if m := hookAddress.FindStringSubmatch(text); m != nil {
				he.Resource = m[1]
			}
			if m := hookOutput.FindStringSubmatch(text); m != nil {
				he.Output = strings.TrimSpace(m[1])
			}
			if he.Output == "" {
				he.Output = strings.Join(d.Detail, " ")
			}
			return he
		}
	}
	for _, d := range diags {
		low := strings.ToLower(d.text())
		creds := containsAny(low, credentialMarks)
		switch {
		case containsAny(low, backendMarks):
			return &BackendError{Credentials: creds, Summary: d.Summary, Detail: strings.Join(d.Detail, " ")}
		case creds:
			return &ProviderError{Credentials: true, Summary: d.Summary, Detail: strings.Join(d.Detail, " ")}
		case containsAny(low, providerMarks):
			return &ProviderError{Summary: d.Summary, Detail: strings.Join(d.Detail, " ")}
		}
	}
	e := &Error{Err: err}
	for _, d := range diags {
		e.Diagnostics = append(e.Diagnostics, d.text())
	}
	return e
}

func containsAny(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
