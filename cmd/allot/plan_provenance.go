package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/allot-dev/allot/planner/planreport"
	"github.com/allot-dev/allot/schema/source"
)

// provenance says what a report plans: the commit of dir's repository, the
// base's commit (a Git ref's, or a directory's repository's) and the date, which
// is SOURCE_DATE_EPOCH when set and the commit's date otherwise, never the clock,
// so that the same inputs give the same planreport. Outside Git only the date
// given by SOURCE_DATE_EPOCH is known. Git is read as source.Repo reads it.
func provenance(dir string, base baseSpec) (planreport.Provenance, error) {
	var p planreport.Provenance
	p.Commit = gitOutput(dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	switch {
	case base.ref != "":
		p.BaseCommit = base.commit
	case base.dir != "":
		p.BaseCommit = gitOutput(base.dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	}
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok && s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec < 0 || sec > 253402300799 {
			return p, usageError{fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970 (e.g. git log -1 --format=%%ct)", s)}
		}
		p.Date = time.Unix(sec, 0).UTC().Format(time.RFC3339)
	} else if p.Commit != "" {
		if sec, err := strconv.ParseInt(gitOutput(dir, "log", "-1", "--no-show-signature", "--format=%ct", p.Commit), 10, 64); err == nil {
			p.Date = time.Unix(sec, 0).UTC().Format(time.RFC3339)
		}
	}
	return p, nil
}

// gitOutput runs git in the repository that holds dir (source.FindRepo) and
// returns its trimmed output, or "" when there is none or git fails:
// provenance is best effort.
func gitOutput(dir string, args ...string) string {
	repo, _, err := source.FindRepo(dir)
	if err != nil {
		return ""
	}
	out, err := repo.Output(nil, args...)
	if err != nil {
		return ""
	}
	return string(out)
}

// displayName is how a report names a directory: relative to its Git
// repository's top when it is in one ("." for the top), else as given when
// relative, else its base name, so that no report shows an absolute path.
func displayName(dir string) string {
	if _, sub, err := source.FindRepo(dir); err == nil {
		if sub == "" {
			return "."
		}
		return sub
	}
	if !filepath.IsAbs(dir) {
		return filepath.ToSlash(filepath.Clean(dir))
	}
	return filepath.Base(dir)
}

// describe completes a loaded plan's report input for plan and report: names
// without absolute paths, the provenance, and why a requested what-if was not
// replayed.
func (pl *planned) describe(dir, base string, simulate *simulateFlags) error {
	in := &pl.in
	in.Name = displayName(dir)
	if in.BaseName != "" && pl.spec.dir != "" {
		in.BaseName = displayName(pl.spec.dir)
	}
	if simulate.workload != "" && in.WhatIf == nil {
		if pl.head.cfg == nil {
			in.NotSimulated = "the configuration does not load"
		} else {
			in.NotSimulated = "the configuration has errors; the what-if replays only a configuration without errors"
		}
	}
	var err error
	in.Provenance, err = provenance(dir, pl.spec)
	return err
}
