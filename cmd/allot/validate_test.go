package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateExamplesIsClean(t *testing.T) {
	code, out, errOut := allot(t, nil, "validate", filepath.Join("..", "..", "examples"))
	if code != 0 || out != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "valid (3 clusters, 5 pools, 4 tiers, 7 teams; 0 warning(s))") {
		t.Fatalf("stderr = %q", errOut)
	}
}

// TestValidateCatchesEveryErrorClass breaks a copy of examples/ once per class of
// error and checks the finding is reported at the line the author must change.
func TestValidateCatchesEveryErrorClass(t *testing.T) {
	type change struct{ file, old, new string }
	for name, tc := range map[string]struct {
		changes []change
		// want: file, the text whose line the finding must be on, and the rule.
		wantFile, wantAt, wantRule string
		wantMsg                    string
	}{
		"syntax error": {
			changes:  []change{{"teams/nlp.cue", `cohort: "research"`, `cohort: "research`}},
			wantFile: "teams/nlp.cue", wantAt: `cohort: "research`, wantRule: "syntax",
		},
		"misspelt field": {
			changes:  []change{{"pools.cue", `machineType: "p5.48xlarge"`, `machinType: "p5.48xlarge"`}},
			wantFile: "pools.cue", wantAt: "machinType", wantRule: "unknown-field", wantMsg: `did you mean "machineType"?`,
		},
		"unknown top-level field": {
			changes:  []change{{"policy.cue", "policy: {", "polcy: {"}},
			wantFile: "policy.cue", wantAt: "polcy", wantRule: "unknown-field", wantMsg: `did you mean "policy"?`,
		},
		"wrong type": {
			changes:  []change{{"pools.cue", "gpusPerNode: 8\n\t\tnodes: {min: 0, max: 32}\n\t\tprice: onDemandPerNodeHour: 29.387", "gpusPerNode: \"8\"\n\t\tnodes: {min: 0, max: 32}\n\t\tprice: onDemandPerNodeHour: 29.387"}},
			wantFile: "pools.cue", wantAt: `gpusPerNode: "8"`, wantRule: "schema", wantMsg: "gpusPerNode",
		},
		"negative GPUs": {
			changes:  []change{{"teams/robotics.cue", "nominal: 128", "nominal: -128"}},
			wantFile: "teams/robotics.cue", wantAt: "nominal: -128", wantRule: "schema", wantMsg: "-128",
		},
		"fractional GPUs": {
			changes:  []change{{"teams/speech.cue", "nominal: 48", "nominal: 47.5"}},
			wantFile: "teams/speech.cue", wantAt: "nominal: 47.5", wantRule: "schema", wantMsg: "want a whole number, got 47.5",
		},
		"missing required field": {
			changes:  []change{{"tiers.cue", `critical: {priority: 1000, `, `critical: {`}},
			wantFile: "tiers.cue", wantAt: "critical:", wantRule: "required-field", wantMsg: `"priority" is missing`,
		},
		"unknown cluster": {
			changes:  []change{{"pools.cue", `cluster:     "eks-use1"`, `cluster:     "eks-use2"`}},
			wantFile: "pools.cue", wantAt: `"eks-use2"`, wantRule: "unknown-cluster", wantMsg: `did you mean "eks-use1"?`,
		},
		"unknown flavor": {
			changes:  []change{{"teams/speech.cue", `"a100-40gb"`, `"a100-40g"`}},
			wantFile: "teams/speech.cue", wantAt: `"a100-40g"`, wantRule: "unknown-flavor", wantMsg: `did you mean "a100-40gb"?`,
		},
		"unknown cohort": {
			changes:  []change{{"teams/vision.cue", `cohort: "research"`, `cohort: "reseach"`}},
			wantFile: "teams/vision.cue", wantAt: `cohort: "reseach"`, wantRule: "unknown-cohort", wantMsg: `did you mean "research"?`,
		},
		"unknown parent cohort": {
			changes:  []change{{"cohorts.cue", `product: parent:  "org"`, `product: parent:  "orgs"`}},
			wantFile: "cohorts.cue", wantAt: `"orgs"`, wantRule: "unknown-cohort",
		},
		"cohort cycle": {
			changes:  []change{{"cohorts.cue", "org: {}", `org: parent: "research"`}},
			wantFile: "cohorts.cue", wantAt: `org: parent`, wantRule: "cohort-cycle", wantMsg: "org -> research -> org",
		},
		"unknown tier": {
			changes:  []change{{"teams/ads.cue", `"research"]`, `"reserch"]`}},
			wantFile: "teams/ads.cue", wantAt: "tiers:", wantRule: "unknown-tier", wantMsg: `did you mean "research"?`,
		},
		"one field, two values, two files": {
			changes:  []change{{"teams/platform.cue", "budget: monthlyUSD: 100000", "budget: monthlyUSD: 100000\n}\nteams: robotics: quota: \"h100-80gb\": nominal: 64\nteams: platform: {"}},
			wantFile: "teams/robotics.cue", wantAt: "nominal: 128", wantRule: "conflict", wantMsg: "also set at teams/platform.cue:15:",
		},
		"quota beyond what the pools reach": {
			changes:  []change{{"teams/nlp.cue", `"h100-80gb": {nominal: 256`, `"h100-80gb": {nominal: 2560`}},
			wantFile: "pools.cue", wantAt: "max: 64}", wantRule: "flavor-capacity", wantMsg: "pools reach at most 1152",
		},
		"team over budget": {
			changes:  []change{{"teams/speech.cue", "monthlyUSD: 140000", "monthlyUSD: 90000"}},
			wantFile: "teams/speech.cue", wantAt: "monthlyUSD: 90000", wantRule: "team-budget", wantMsg: "over its budget of $90,000.00",
		},
		"two tiers, one priority": {
			changes:  []change{{"tiers.cue", "research: {priority: 100", "research: {priority: 500"}},
			wantFile: "tiers.cue", wantAt: "research: {priority: 500", wantRule: "tier-priority-unique", wantMsg: "tiers research and production both have priority 500",
		},
		"package mismatch": {
			changes:  []change{{"teams/ads.cue", "package capacity", "package capcity"}},
			wantFile: "teams/ads.cue", wantAt: "capcity", wantRule: "package",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyExamples(t)
			for _, c := range tc.changes {
				edit(t, dir, c.file, c.old, c.new)
			}
			t.Chdir(dir) // findings name files relative to the working directory
			code, out, errOut := allot(t, nil, "validate", ".")
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			prefix := fmt.Sprintf("%s:%d:", tc.wantFile, lineOf(t, dir, tc.wantFile, tc.wantAt))
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, prefix) && strings.Contains(l, ": error: "+tc.wantRule+": ") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no %s error at %s; stdout:\n%s", tc.wantRule, prefix, out)
			}
			if !strings.Contains(line, tc.wantMsg) {
				t.Errorf("message %q does not say %q", line, tc.wantMsg)
			}
			if strings.Contains(out+errOut, "goroutine ") || strings.Contains(out+errOut, "panic") {
				t.Fatalf("a stack trace reached the user:\n%s%s", out, errOut)
			}
		})
	}
}

func TestValidateReportsAllFindingsInOneRun(t *testing.T) {
	dir := copyExamples(t)
	edit(t, dir, "pools.cue", `cluster:     "eks-use1"`, `cluster:     "eks-use9"`)
	edit(t, dir, "teams/ads.cue", `"research"]`, `"reserch"]`)
	edit(t, dir, "teams/speech.cue", "monthlyUSD: 140000", "monthlyUSD: 1")
	edit(t, dir, "tiers.cue", "research: {priority: 100", "research: {priority: 0")
	code, out, _ := allot(t, nil, "validate", dir)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, rule := range []string{"unknown-cluster", "unknown-tier", "team-budget", "tier-priority-unique"} {
		if !strings.Contains(out, ": error: "+rule+": ") {
			t.Errorf("missing %s in:\n%s", rule, out)
		}
	}
}

func TestValidateWithBaseBlamesTheRaisedQuota(t *testing.T) {
	base := filepath.Join("..", "..", "examples")
	dir := copyExamples(t)
	edit(t, dir, "teams/nlp.cue", `"h100-80gb": {nominal: 256`, `"h100-80gb": {nominal: 2560`)
	code, out, _ := allot(t, nil, "validate", dir, "--base", base)
	want := fmt.Sprintf("teams/nlp.cue:%d:", lineOf(t, dir, "teams/nlp.cue", "nominal: 2560"))
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "raises nlp's h100-80gb quota from 256 to 2560") {
		t.Fatalf("exit %d, want a flavor-capacity finding at %s:\n%s", code, want, out)
	}
}

func TestValidateGitHubAnnotations(t *testing.T) {
	dir := copyExamples(t)
	edit(t, dir, "teams/speech.cue", "monthlyUSD: 140000", "monthlyUSD: 1")
	code, out, _ := allot(t, map[string]string{"GITHUB_ACTIONS": "true"}, "validate", dir)
	line := lineOf(t, dir, "teams/speech.cue", "monthlyUSD: 1")
	want := fmt.Sprintf("::error file=%s,line=%d,col=", escapeProperty(filepath.ToSlash(filepath.Join(dir, "teams/speech.cue"))), line)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d; want %q in:\n%s", code, want, out)
	}
	if got := escapeData("50% off\nnext"); got != "50%25 off%0Anext" {
		t.Errorf("escapeData = %q", got)
	}
	if got := escapeProperty("a:b,c"); got != "a%3Ab%2Cc" {
		t.Errorf("escapeProperty = %q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no directory":      {"validate"},
		"missing directory": {"validate", filepath.Join(t.TempDir(), "nope")},
		"bad output":        {"plan", filepath.Join("..", "..", "examples"), "-o", "yaml"},
		"unknown flag":      {"plan", "--frobnicate"},
		"bad base":          {"plan", filepath.Join("..", "..", "examples"), "--base", "no-such-ref-or-dir"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := allot(t, nil, args...)
			if code != 2 || out != "" || !strings.HasPrefix(errOut, "allot: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
	if _, err := os.Stat(filepath.Join("..", "..", "examples")); err != nil {
		t.Fatal(err)
	}
}

// TestValidateGolden locks stdout, stderr and the exit code on a copy of examples
// with several mistakes, as a pull request might bring them.
func TestValidateGolden(t *testing.T) {
	dir := copyExamples(t)
	edit(t, dir, "pools.cue", `cluster:     "eks-use1"`, `cluster:     "eks-east"`)
	edit(t, dir, "teams/ads.cue", `"research"]`, `"reserch"]`)
	edit(t, dir, "teams/speech.cue", "monthlyUSD: 140000", "monthlyUSD: 1000")
	edit(t, dir, "teams/vision.cue", `owners: ["@acme/vision-leads"]`, ``)
	parent := t.TempDir()
	if err := os.Rename(dir, filepath.Join(parent, "capacity")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(parent)
	for name, env := range map[string]map[string]string{"validate-broken": nil, "validate-broken-github": {"GITHUB_ACTIONS": "true"}} {
		code, out, errOut := allot(t, env, "validate", "capacity")
		golden(t, name+".txt", fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", code, out, errOut))
	}
}

// A base that does not load is bad usage, as for plan: validating against
// nothing would skip the rules that compare a change with its base, silently.
func TestValidateBaseThatDoesNotLoad(t *testing.T) {
	prChange(t)
	edit(t, "base", "pools.cue", "gpusPerNode: 8", "gpusPerNod: 8")
	code, _, errOut := allot(t, nil, "validate", "head", "--base", "base")
	if code != exitUsage || !strings.Contains(errOut, "the base base does not load") || !strings.Contains(errOut, "unknown-field") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
