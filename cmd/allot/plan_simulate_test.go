package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// mixed is the example workload, absolute: prChange changes directory.
var mixed, _ = filepath.Abs(filepath.Join("..", "..", "examples", "workloads", "mixed.csv"))

// TestPlanSimulateGolden locks the what-if of the example PR (robotics' H100 quota
// 128 -> 160) in every output format.
func TestPlanSimulateGolden(t *testing.T) {
	for _, format := range []string{"text", "markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			prChange(t)
			code, out, errOut := allot(t, nil, "plan", "head", "-o", format, "--base", "base", "--simulate", mixed)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			golden(t, "plan-pr-simulate."+format, strings.ReplaceAll(out, mixed, "examples/workloads/mixed.csv"))
		})
	}
}

// TestPlanSimulateJSON: the what-if is an extension of the plan's JSON: every team
// has figures before and after, robotics is the one whose quota changed, and a team
// reported as waiting longer really has a longer wait in its figures.
func TestPlanSimulateJSON(t *testing.T) {
	prChange(t)
	code, out, errOut := allot(t, nil, "plan", "head", "-o", "json", "--base", "base", "--simulate", mixed)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type figures struct {
		Utilization float64 `json:"utilization"`
		WaitP50S    float64 `json:"wait_p50_s"`
		WaitP95S    float64 `json:"wait_p95_s"`
		Preemptions *int    `json:"preemptions"`
	}
	var doc struct {
		Diff   map[string]any `json:"diff"`
		WhatIf struct {
			Jobs  int `json:"jobs"`
			Teams []struct {
				Team         string   `json:"team"`
				QuotaChanged bool     `json:"quota_changed"`
				Before       *figures `json:"before"`
				After        figures  `json:"after"`
			} `json:"teams"`
			Longer []struct {
				Team, Metric  string
				Before, After float64
			} `json:"waits_longer"`
		} `json:"whatif"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Diff == nil || doc.WhatIf.Jobs != 240 || len(doc.WhatIf.Teams) != 7 {
		t.Fatalf("diff %v, whatif jobs %d teams %d", doc.Diff != nil, doc.WhatIf.Jobs, len(doc.WhatIf.Teams))
	}
	waits := map[string]figures{}
	for _, tm := range doc.WhatIf.Teams {
		if tm.Before == nil || tm.After.Preemptions == nil {
			t.Fatalf("team %s lacks figures: %+v", tm.Team, tm)
		}
		if tm.QuotaChanged != (tm.Team == "robotics") {
			t.Errorf("team %s quota_changed = %v", tm.Team, tm.QuotaChanged)
		}
		waits[tm.Team+"/before"], waits[tm.Team+"/after"] = *tm.Before, tm.After
	}
	for _, l := range doc.WhatIf.Longer {
		if l.After <= l.Before || l.Team == "robotics" {
			t.Errorf("reported longer wait is not longer: %+v", l)
		}
		if l.Metric == "wait_p95_s" && (waits[l.Team+"/before"].WaitP95S != l.Before || waits[l.Team+"/after"].WaitP95S != l.After) {
			t.Errorf("longer wait %+v does not match the team's figures", l)
		}
	}
}

func TestPlanSimulateErrors(t *testing.T) {
	prChange(t)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"missing workload":        {[]string{"--simulate", "nope.csv"}, "--simulate: open nope.csv"},
		"events without workload": {[]string{"--simulate-events", "e.csv"}, "--simulate-events needs --simulate"},
		"bad workload":            {[]string{"--simulate", "base/tiers.cue"}, "--simulate: base/tiers.cue:1:"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := allot(t, nil, append([]string{"plan", "head", "--base", "base"}, tc.args...)...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q, want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

// TestPlanSimulateShowsBurst: on a repository whose pool bursts
// (scheduler/sim/testdata/burst: speech's gang waits for a burst node), the
// what-if of plan --simulate names the pool's burst node-hours and cost and
// the team that caused them, in text and in Markdown.
func TestPlanSimulateShowsBurst(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("..", "..", "scheduler", "sim", "testdata", "burst"))
	for format, want := range map[string][]string{
		"text":     {"BURST POOL", "h100", "1.0", "$10.35", "Caused by: speech $10.35"},
		"markdown": {"| burst pool | node-hours | cost |", "| h100 | 1.0 | $10.35 |", "Caused by: speech $10.35"},
	} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := allot(t, nil, "plan", dir, "-o", format, "--simulate", filepath.Join(dir, "workload.csv"))
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
		})
	}
}
