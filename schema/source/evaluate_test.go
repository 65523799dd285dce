package source

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/allot-dev/allot/schema"
)

const valid = `package capacity
clusters: lab: provider: "kwok"
pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: 1.5}
tiers: t: priority: 1
teams: x: quota: f: nominal: 8
`

// TestEvaluatorMatchesInProcess: the child process returns what Evaluate
// returns here, for a valid repository and for one with errors.
func TestEvaluatorMatchesInProcess(t *testing.T) {
	eval := Evaluator(context.Background(), DefaultLimits)
	for name, src := range map[string]string{
		"valid":   valid,
		"invalid": valid + "teams: x: quota: f: nominal: -1\npools: a: machineType: \"${x}\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{"c.cue": []byte(src)}
			wantJSON, wantFindings := schema.Evaluate(files)
			gotJSON, gotFindings := eval(files)
			if diff := cmp.Diff(string(wantJSON), string(gotJSON)); diff != "" {
				t.Errorf("configuration (-in process +child):\n%s", diff)
			}
			if diff := cmp.Diff(wantFindings, gotFindings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("findings (-in process +child):\n%s", diff)
			}
		})
	}
}

// TestEvaluatorBoundsHostileRepositories: a list of 10^8 numbers and a chain
// of hidden fields that doubles at every step each exhaust the child's memory
// cap, not this process's; a slow evaluation is cut at the time limit. Each is
// a finding of rule limit that says which bound, and this process's heap stays
// small. (In process, each of these took the whole machine's memory.)
func TestEvaluatorBoundsHostileRepositories(t *testing.T) {
	var doubling strings.Builder
	doubling.WriteString("package capacity\n_a0: \"xxxxxxxxxxxxxxxx\"\n")
	for i := range 48 {
		fmt.Fprintf(&doubling, "_a%d: _a%d + _a%d\n", i+1, i, i)
	}
	doubling.WriteString("clusters: lab: {provider: \"kwok\", region: _a48}\n")
	var big strings.Builder // a cost centre of 17 × 2^22 bytes
	big.WriteString("package capacity\n_b0: \"xxxxxxxxxxxxxxxxx\"\n")
	for i := range 22 {
		fmt.Fprintf(&big, "_b%d: _b%d + _b%d\n", i+1, i, i)
	}
	big.WriteString("teams: x: {costCenter: _b22, quota: {}}\n")
	rangeRepo := "package capacity\nimport \"list\"\n_big: list.Range(0, 100000000, 1)\nclusters: lab: {provider: \"kwok\", region: \"r\\(len(_big))\"}\n"
	for name, tc := range map[string]struct {
		src    string
		limits Limits
		want   string
	}{
		"list.Range(0, 100000000, 1)": {rangeRepo, Limits{Memory: 256 << 20, Time: 2 * time.Minute}, "needed more than 256 MiB of memory"},
		"doubling hidden fields":      {doubling.String(), Limits{Memory: 256 << 20, Time: 2 * time.Minute}, "needed more than 256 MiB of memory"},
		"time":                        {rangeRepo, Limits{Memory: 4 << 30, Time: time.Second}, "took longer than 1s"},
		"a 71 MB configuration":       {big.String(), DefaultLimits, "the evaluated repository holds more than 64 MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, findings := Evaluator(context.Background(), tc.limits)(map[string][]byte{"c.cue": []byte(tc.src)})
			if len(findings) != 1 || findings[0].Rule != RuleLimit || !strings.Contains(findings[0].Message, tc.want) {
				t.Fatalf("findings = %v, want one of rule limit saying %q", findings, tc.want)
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			t.Logf("%s in %s; this process's heap %d MiB", findings[0].Message, time.Since(start).Round(time.Millisecond), m.HeapAlloc>>20)
			if m.HeapAlloc > 200<<20 {
				t.Errorf("this process's heap grew to %d MiB", m.HeapAlloc>>20)
			}
		})
	}
}

// FuzzLoadBounded loads random repositories with the evaluation in a bounded
// child process, as the CLI and the manager do: whatever the input, a
// configuration or findings, never both, and never the child's fatal error or
// stack. Its seeds are the inputs only the child's bounds stop (a doubling
// chain, a huge list.Range, a deep chain of references).
func FuzzLoadBounded(f *testing.F) {
	var doubling strings.Builder
	doubling.WriteString("package capacity\n_a0: \"xxxxxxxxxxxxxxxx\"\n")
	for i := range 40 {
		fmt.Fprintf(&doubling, "_a%d: _a%d + _a%d\n", i+1, i, i)
	}
	f.Add(doubling.String())
	f.Add("package capacity\nimport \"list\"\n_big: list.Range(0, 100000000, 1)\nclusters: lab: {provider: \"kwok\", region: \"r\\(len(_big))\"}\n")
	f.Add("package capacity\nimport \"strings\"\nclusters: lab: {provider: \"kwok\", region: strings.Repeat(\"x\", 1000000000)}\n")
	f.Add("package capacity\n_n0: 2\n" + func() string {
		var b strings.Builder
		for i := range 40 {
			fmt.Fprintf(&b, "_n%d: _n%d * _n%d\n", i+1, i, i)
		}
		return b.String()
	}() + "tiers: t: priority: _n40\n")
	f.Add(valid)
	eval := Evaluator(context.Background(), Limits{Memory: 256 << 20, Time: 20 * time.Second})
	f.Fuzz(func(t *testing.T, src string) {
		cfg, findings := schema.LoadWith(fstest.MapFS{"c.cue": {Data: []byte(src)}}, eval)
		if cfg != nil && findings.HasErrors() {
			t.Fatalf("a configuration together with errors: %v", findings)
		}
		if cfg == nil && len(findings) == 0 {
			t.Fatal("no configuration and no finding")
		}
		for _, fd := range findings {
			if strings.Contains(fd.Message, "goroutine ") || strings.Contains(fd.Message, "fatal error") {
				t.Fatalf("the child's stack reaches the user: %.300s", fd.Message)
			}
		}
	})
}
