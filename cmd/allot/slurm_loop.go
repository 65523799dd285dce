package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing/fstest"
	"time"

	slurmctl "github.com/allot-dev/allot/controllers/slurm"
	"github.com/allot-dev/allot/internal/apilimits"
	"github.com/allot-dev/allot/internal/plaintext"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/source"
)

// slurmStatus is what allot slurm apply records after each attempt, as Flux
// records a source's: the revisions, when, the conditions and the changes.
type slurmStatus struct {
	Cluster string `json:"cluster"`
	// Source is the folder read.
	Source                string `json:"source"`
	LastAppliedRevision   string `json:"lastAppliedRevision,omitempty"`
	LastAttemptedRevision string `json:"lastAttemptedRevision,omitempty"`
	// LastHandledAt is when the last attempt ended.
	LastHandledAt time.Time `json:"lastHandledAt"`
	// Changes counts the last attempt's changes by op (add, modify, remove,
	// conflict); those run when it applied.
	Changes    map[string]int   `json:"changes"`
	Conditions []slurmCondition `json:"conditions"`
}

// slurmCondition has a Kubernetes condition's fields.
type slurmCondition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// The conditions' reasons.
const (
	reasonSucceeded        = "Succeeded"
	reasonSourceFailed     = "SourceFailed"
	reasonValidationFailed = "ValidationFailed"
	reasonRenderFailed     = "RenderFailed"
	reasonReadFailed       = "ReadFailed"
	reasonApplyFailed      = "ApplyFailed"
)

// setCondition sets a condition, keeping its transition time when its
// status does not change; status "" removes it.
func (s *slurmStatus) setCondition(typ, status, reason, msg string, now time.Time) {
	var kept []slurmCondition
	var old *slurmCondition
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			old = &s.Conditions[i]
		} else {
			kept = append(kept, s.Conditions[i])
		}
	}
	if status != "" {
		c := slurmCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now}
		if old != nil && old.Status == status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		kept = append([]slurmCondition{c}, kept...)
	}
	s.Conditions = kept
}

func (s *slurmStatus) condition(typ string) *slurmCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// maxStatusFile bounds the status file read back.
const maxStatusFile = 1 << 20

// readSlurmStatus reads a status file (an fs.ErrNotExist error when there is none).
func readSlurmStatus(file string) (slurmStatus, error) {
	var st slurmStatus
	f, err := os.Open(file)
	if err != nil {
		return st, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatusFile+1))
	if err != nil {
		return st, err
	}
	if len(b) > maxStatusFile {
		return st, fmt.Errorf("%s: larger than %d bytes", file, maxStatusFile)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", file, err)
	}
	return st, nil
}

// writeSlurmStatus writes st to file atomically, readable by its owner only.
func writeSlurmStatus(file string, st slurmStatus) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return writeAtomicMode(file, append(b, '\n'), 0o600)
}

// defaultStatusFile is $XDG_STATE_HOME/allot/slurm-<cluster>.json, else
// under ~/.local/state.
func defaultStatusFile(cluster string) (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory ($XDG_STATE_HOME, $HOME): name a --status-file: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "allot", "slurm-"+cluster+".json"), nil
}

// readSlurmSource reads the repository at dir for the loop: when dir is in a
// Git checkout, the files of its HEAD commit from Git's objects (revision
// sha1:<commit>); else the folder's files (revision sha256:<digest of the
// files read>). Both are bounded as the loader bounds them.
func readSlurmSource(dir string) (fs.FS, string, error) {
	if repo, sub, err := source.FindRepo(dir); err == nil {
		commit, err := repo.Commit("HEAD")
		if err != nil {
			return nil, "", err
		}
		fsys, err := repo.Tree(commit, sub)
		if err != nil {
			return nil, "", err
		}
		return fsys, "sha1:" + strings.TrimSpace(commit), nil
	} else if !errors.Is(err, source.ErrNotARepository) {
		return nil, "", err
	}
	fsys, err := source.Dir(dir)
	if err != nil {
		return nil, "", err
	}
	files := fstest.MapFS{}
	h := sha256.New()
	findings := schema.WalkSources(fsys, func(p string, src []byte) {
		files[p] = &fstest.MapFile{Data: src, Mode: 0o644}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(src))
		h.Write(src)
	})
	if findings.HasErrors() {
		for i := range findings {
			findings[i].Pos = wdPos(dir, findings[i].Pos)
		}
		return nil, "", &findingsError{findings}
	}
	return files, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// findingsError is a repository with errors.
type findingsError struct{ findings schema.Findings }

func (e *findingsError) Error() string {
	var msgs []string
	for _, f := range e.findings {
		if f.Severity == schema.SeverityError {
			msgs = append(msgs, f.String())
		}
	}
	return fmt.Sprintf("%d error(s): %s", len(msgs), strings.Join(msgs, "; "))
}

// maxMessage bounds a condition's message.
const maxMessage = 2048

// secretValue is what looks like a credential in a message: a password,
// secret, token or key given a value, or a URL's user information.
var secretValue = regexp.MustCompile(`(?i)((?:pass(?:word|wd)?|secret|token|api[_-]?key|credential)s?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;]+)|(://)[^/@\s]+@`)

// safeMessage is err's text for a status: control characters escaped,
// credentials replaced, bounded.
func safeMessage(s string) string {
	s = secretValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretValue.FindStringSubmatch(m)
		if sub[3] != "" {
			return "://REDACTED@"
		}
		return sub[1] + "REDACTED"
	})
	return apilimits.Truncate(plaintext.Escape(s), maxMessage)
}

// slurmAttempt converges cluster to the repository at dir once and records
// the outcome in st. It reports whether the failure, if any, is one only a
// new revision mends (stalled).
func slurmAttempt(ctx context.Context, dir, cluster string, r slurmctl.Runner, st *slurmStatus, now func() time.Time) (applied []slurm.Change, stalled bool, err error) {
	fail := func(reason string, stall bool, err error) ([]slurm.Change, bool, error) {
		msg := safeMessage(err.Error())
		if st.LastAppliedRevision != "" {
			msg += "; revision " + st.LastAppliedRevision + " stays applied"
		}
		t := now()
		st.LastHandledAt = t
		st.setCondition("Ready", "False", reason, msg, t)
		if stall {
			st.setCondition("Stalled", "True", reason, msg, t)
		} else {
			st.setCondition("Stalled", "", "", "", t)
		}
		return nil, stall, err
	}
	st.Changes = map[string]int{}
	fsys, rev, err := readSlurmSource(dir)
	if err != nil {
		var fe *findingsError
		return fail(reasonSourceFailed, errors.As(err, &fe), err)
	}
	st.LastAttemptedRevision = rev
	c := check(dir, fsys, nil)
	for i := range c.findings {
		c.findings[i].Pos = wdPos(dir, c.findings[i].Pos)
	}
	if c.cfg == nil || c.findings.HasErrors() {
		return fail(reasonValidationFailed, true, &findingsError{c.findings})
	}
	if cl := c.cfg.Clusters[schema.ClusterName(cluster)]; cl == nil || cl.Scheduler != schema.SchedulerSlurm {
		return fail(reasonValidationFailed, true, fmt.Errorf("revision %s has no Slurm cluster %s", rev, cluster))
	}
	want, err := slurm.Build(c.cfg, c.plan, schema.ClusterName(cluster))
	if err != nil {
		return fail(reasonRenderFailed, true, err)
	}
	live, err := r.Read(ctx)
	if err != nil {
		return fail(reasonReadFailed, false, err)
	}
	changes := slurm.Diff(want, live)
	for _, ch := range changes {
		st.Changes[ch.Op]++
	}
	if err := r.Apply(ctx, changes); err != nil {
		return fail(reasonApplyFailed, false, err)
	}
	t := now()
	st.LastAppliedRevision, st.LastHandledAt = rev, t
	st.setCondition("Stalled", "", "", "", t)
	st.setCondition("Ready", "True", reasonSucceeded, fmt.Sprintf("Applied revision %s: %d change(s), %d conflict(s)", rev, runnable(changes), st.Changes["conflict"]), t)
	return changes, false, nil
}

// slurmLoopOptions are allot slurm apply --interval's.
type slurmLoopOptions struct {
	dir, cluster, statusFile string
	interval                 time.Duration
	// attemptTimeout bounds one attempt, which a stop request lets finish.
	attemptTimeout time.Duration
	runner         slurmctl.Runner
	now            func() time.Time
}

// slurmLoop converges every interval until ctx ends; a failure that a retry
// may mend (sacctmgr, the source) is retried sooner, backing off from 5 s up
// to the interval. An attempt under way when ctx ends is finished (bounded
// by attemptTimeout), so that a stop never cuts the safe order short; then it
// returns nil.
func slurmLoop(ctx context.Context, o slurmLoopOptions, log io.Writer) error {
	st, err := readSlurmStatus(o.statusFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(log, "allot: %v: starting afresh\n", err)
		st = slurmStatus{}
	}
	st.Cluster, st.Source = o.cluster, o.dir
	failures := 0
	for {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.attemptTimeout)
		changes, stalled, err := slurmAttempt(actx, o.dir, o.cluster, o.runner, &st, o.now)
		cancel()
		wait := o.interval
		switch {
		case err == nil:
			failures = 0
			if n := runnable(changes); n > 0 {
				fmt.Fprintf(log, "%s: %s: %d change(s) applied\n", o.cluster, st.LastAppliedRevision, n)
			}
		case stalled:
			failures = 0
			fmt.Fprintf(log, "allot: %s: %s\n", o.cluster, safeMessage(err.Error()))
		default:
			failures++
			wait = min(o.interval, 5*time.Second<<min(failures-1, 10))
			fmt.Fprintf(log, "allot: %s: %s; retrying in %s\n", o.cluster, safeMessage(err.Error()), wait)
		}
		if err := writeSlurmStatus(o.statusFile, st); err != nil {
			fmt.Fprintf(log, "allot: writing the status: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}
