package recommend

import (
	"fmt"
	"strings"
	"time"
)

// Target is a p95 queue-wait target. Name is empty for the default target, else
// a team or a tier: a team's target replaces the default for that team's jobs, a
// tier's applies to that tier's jobs of every team on top of it.
type Target struct {
	Name     string  `json:"name,omitempty"`
	WaitP95S float64 `json:"wait_p95_s"`
}

// ParseTarget reads a --target value: "wait_p95=15m" or "NAME:wait_p95=15m",
// where NAME is a team or a tier. The duration is Go's (90s, 15m, 1h30m) and
// must be positive.
func ParseTarget(s string) (Target, error) {
	name, spec := "", s
	if i := strings.LastIndex(s, ":"); i >= 0 {
		name, spec = s[:i], s[i+1:]
		if name == "" {
			return Target{}, fmt.Errorf("target %q: empty team or tier before ':'", s)
		}
	}
	metric, value, ok := strings.Cut(spec, "=")
	if !ok || metric != "wait_p95" {
		return Target{}, fmt.Errorf("target %q: want [TEAM_OR_TIER:]wait_p95=DURATION, e.g. wait_p95=15m", s)
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return Target{}, fmt.Errorf("target %q: %q is not a positive duration (e.g. 90s, 15m, 1h)", s, value)
	}
	return Target{Name: name, WaitP95S: d.Seconds()}, nil
}

// String is the target as --target takes it.
func (t Target) String() string {
	d := time.Duration(t.WaitP95S * float64(time.Second)).String()
	if t.Name == "" {
		return "wait_p95=" + d
	}
	return t.Name + ":wait_p95=" + d
}

// constraint is one target as it applies to a team and flavor: the p95 wait of
// its jobs (of one tier, when tier is set) must be at most waitS.
type constraint struct {
	tier  string
	waitS float64
}
