package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/slurm"
	"github.com/allot-dev/allot/schema"
)

// slurmRepo is planner/slurm's test repository: a GKE and a Slurm cluster.
var slurmRepo = filepath.Join("..", "..", "planner", "slurm", "testdata", "repo")

// TestRenderSlurm: --target slurm writes OUT/slurm/<cluster>/ (the bytes
// planner/slurm makes) and nothing else, prints the approximations as
// warnings, and a second render changes nothing.
func TestRenderSlurm(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := allot(t, nil, "render", slurmRepo, "-o", out, "--target", "slurm")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if want := out + ": 1 Slurm clusters (hpc); 5 files changed\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if !strings.Contains(stderr, "capacity.cue:45:30: warning: slurm-borrowing: ") {
		t.Errorf("stderr lacks the borrowing warning at its line:\n%s", stderr)
	}
	cfg, findings := schema.Load(os.DirFS(slurmRepo))
	if findings.HasErrors() {
		t.Fatal(findings)
	}
	files, err := slurm.Render(cfg, planner.Build(cfg))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range files {
		want[f.Path] = string(f.Data)
	}
	if diff := cmp.Diff(want, tree(t, out)); diff != "" {
		t.Errorf("files under OUT (-want +got):\n%s", diff)
	}
	if code, stdout, _ := allot(t, nil, "render", slurmRepo, "-o", out, "--target", "slurm"); code != 0 || !strings.HasSuffix(stdout, "; 0 files changed\n") {
		t.Errorf("second render: exit %d, %q", code, stdout)
	}
}

// TestStrict: --strict makes the rules a scheduler only approximates errors
// (exit 1, nothing rendered), for slurm and kueue alike; other warnings stay.
func TestStrict(t *testing.T) {
	for _, args := range [][]string{
		{"validate", slurmRepo, "--strict"},
		{"render", slurmRepo, "-o", filepath.Join(t.TempDir(), "out"), "--target", "slurm", "--strict"},
	} {
		code, stdout, stderr := allot(t, nil, args...)
		if code != 1 || !strings.Contains(stdout+stderr, "capacity.cue:45:30: error: slurm-borrowing: ") {
			t.Errorf("%v: exit %d, want 1 and slurm-borrowing as an error:\n%s%s", args, code, stdout, stderr)
		}
		if code, _, stderr := allot(t, nil, args[:len(args)-1]...); code != 0 {
			t.Errorf("%v without --strict: exit %d\n%s", args[:len(args)-1], code, stderr)
		}
	}
	examples := filepath.Join("..", "..", "examples")
	code, stdout, _ := allot(t, nil, "validate", examples, "--target", "kueue", "--strict")
	if code != 1 || !strings.Contains(stdout, "error: kueue-borrow-only: ") {
		t.Errorf("kueue --strict: exit %d, want 1 and kueue-borrow-only as an error:\n%s", code, stdout)
	}
	if code, stdout, _ := allot(t, nil, "validate", examples, "--strict"); code != 0 || strings.Contains(stdout, "error") {
		t.Errorf("allot target --strict: exit %d (no approximation there)\n%s", code, stdout)
	}
}

// TestRenderTargetsSkipSlurm: of a repository with a Kubernetes and a Slurm
// cluster, --target allot and kueue render nothing of the Slurm cluster (no
// Pool, queue, flavor or Terraform module of it), --target slurm renders it,
// and plan shows its pools and their cost as any other's.
func TestRenderTargetsSkipSlurm(t *testing.T) {
	for _, target := range []string{"allot", "kueue"} {
		out := filepath.Join(t.TempDir(), "out")
		if code, _, stderr := allot(t, nil, "render", slurmRepo, "-o", out, "--target", target); code != 0 {
			t.Fatalf("%s: exit %d\n%s", target, code, stderr)
		}
		files := tree(t, out)
		if len(files) == 0 || files["terraform/gke-usc1/main.tf.json"] == "" {
			t.Errorf("%s: the Kubernetes cluster's files are missing: %v", target, keys(files))
		}
		for p, data := range files {
			for _, slurmName := range []string{"hpc", "dgx-h100", "hgx-a100"} {
				if strings.Contains(p, slurmName) || strings.Contains(data, slurmName) {
					t.Errorf("%s: %s names %s, of the Slurm cluster", target, p, slurmName)
				}
			}
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := allot(t, nil, "render", slurmRepo, "-o", out, "--target", "slurm"); code != 0 || !strings.Contains(tree(t, out)["slurm/hpc/slurm.conf"], "dgx[001-008]") {
		t.Errorf("--target slurm: exit %d, no node set of dgx-h100\n%s", code, stderr)
	}

	code, stdout, stderr := allot(t, nil, "plan", slurmRepo, "-o", "json")
	var got struct {
		Pools []struct {
			Pool       string  `json:"pool"`
			Cluster    string  `json:"cluster"`
			MonthlyUSD float64 `json:"monthly_usd"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
		t.Fatalf("plan: exit %d, %v\n%s", code, err, stderr)
	}
	cfg, _ := schema.Load(os.DirFS(slurmRepo))
	want := planner.Build(cfg)
	if len(got.Pools) != len(want.Pools) {
		t.Fatalf("plan shows %d pools, want %d", len(got.Pools), len(want.Pools))
	}
	for i, p := range got.Pools {
		w := want.Pools[i]
		if p.Pool != string(w.Pool) || p.Cluster != string(w.Cluster) || fmt.Sprint(p.MonthlyUSD) != w.MonthlyUSD.String() {
			t.Errorf("plan's pool %+v, want %s of %s at %s", p, w.Pool, w.Cluster, w.MonthlyUSD)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestPlanCommentSlurm: the pull-request comment of a change to a Slurm
// team's quota lists what allot slurm apply will change after the merge,
// beside the cost; -o json carries the same changes.
func TestPlanCommentSlurm(t *testing.T) {
	repo := `package capacity
clusters: hpc: {provider: "onprem", scheduler: "slurm"}
pools: h: {cluster: "hpc", flavor: "h100", gpusPerNode: 4, nodes: max: 2, price: onDemandPerNodeHour: 1,
	slurm: {partition: "gpu", nodePrefix: "n", firstIndex: 1}}
tiers: prod: priority: 10
teams: {
	alpha: {costCenter: "A", owners: ["@a"], quota: h100: nominal: 4}
	beta: {costCenter: "B", owners: ["@b"], quota: h100: nominal: 4}
}
`
	base, head := t.TempDir(), t.TempDir()
	for dir, src := range map[string]string{base: repo, head: strings.Replace(repo, "beta: {costCenter: \"B\", owners: [\"@b\"], quota: h100: nominal: 4}", "beta: {costCenter: \"B\", owners: [\"@b\"], quota: h100: nominal: 2}", 1)} {
		if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := allot(t, nil, "plan", head, "--base", "dir:"+base, "-o", "markdown")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"#### Slurm accounting",
		"| hpc | modify account | beta | GrpTRES=gres/gpu=2,gres/gpu:h100=2 Fairshare=100 QOS=prod DefaultQOS=prod |",
		"| beta | h100 | 4 | 2 | -2 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the comment lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| alpha |") && strings.Contains(out, "modify account | alpha") {
		t.Errorf("alpha did not change:\n%s", out)
	}
	code, out, _ = allot(t, nil, "plan", head, "--base", "dir:"+base, "-o", "json")
	var plan struct {
		Slurm []struct {
			Cluster string
			Changes []struct{ Op, Kind, Name string }
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil {
		t.Fatalf("plan -o json: exit %d, %v", code, err)
	}
	if len(plan.Slurm) != 1 || len(plan.Slurm[0].Changes) != 1 || plan.Slurm[0].Changes[0].Name != "beta" {
		t.Errorf("plan -o json: slurm %+v, want the one change of beta", plan.Slurm)
	}
	if code, out, _ := allot(t, nil, "plan", base, "--base", "dir:"+base, "-o", "markdown"); code != 0 || strings.Contains(out, "Slurm accounting") {
		t.Errorf("no change: exit %d, a Slurm section:\n%s", code, out)
	}
}

// TestApproximateAccepts: approximate: true on a tier keeps its rule Kueue
// only approximates a warning under --strict, saying so, while the others
// stay errors; the plan's comment lists every approximation in force with
// which are accepted, and its JSON marks them.
func TestApproximateAccepts(t *testing.T) {
	dir := copyExamples(t)
	tiers := filepath.Join(dir, "tiers.cue")
	b, err := os.ReadFile(tiers)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(b), "borrowOnly: true,", "borrowOnly: true, approximate: true,", 1)
	if body == string(b) {
		t.Fatalf("no borrowOnly tier in %s:\n%s", tiers, b)
	}
	if err := os.WriteFile(tiers, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := allot(t, nil, "validate", dir, "--target", "kueue", "--strict")
	if code != 1 || !strings.Contains(stdout, "warning: kueue-borrow-only: ") || !strings.Contains(stdout, "(accepted: tier opportunist says approximate: true)") ||
		!strings.Contains(stdout, "error: kueue-weight: ") || strings.Contains(stdout, "error: kueue-borrow-only") {
		t.Errorf("validate --strict: exit %d, want 1, kueue-borrow-only an accepted warning and kueue-weight an error:\n%s", code, stdout)
	}
	_, md, _ := allot(t, nil, "plan", dir, "--target", "kueue", "-o", "markdown")
	if !strings.Contains(md, "**Approximations in force**: 10, 1 accepted") || !strings.Contains(md, "| ✅ accepted | tier opportunist | kueue-borrow-only |") ||
		!strings.Contains(md, "| ⚠️ not accepted | team nlp | kueue-weight |") {
		t.Errorf("plan --target kueue -o markdown lists not the approximations in force:\n%s", md)
	}
	if _, plain, _ := allot(t, nil, "plan", dir, "-o", "markdown"); strings.Contains(plain, "Approximations in force") {
		t.Errorf("plan for allot's own scheduler lists approximations:\n%s", plain)
	}
	_, js, _ := allot(t, nil, "plan", dir, "--target", "kueue", "-o", "json")
	var out struct {
		Findings []struct {
			Rule, Severity, Approximation string
			Accepted                      bool
		}
	}
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, js)
	}
	n, accepted := 0, 0
	for _, f := range out.Findings {
		if f.Approximation != "" {
			n++
		}
		if f.Accepted {
			accepted++
			if f.Rule != "kueue-borrow-only" || f.Approximation != "tier opportunist" || f.Severity != "warning" {
				t.Errorf("accepted finding %+v, want tier opportunist's kueue-borrow-only warning", f)
			}
		}
	}
	if n != 10 || accepted != 1 {
		t.Errorf("plan -o json: %d approximations, %d accepted; want 10 and 1", n, accepted)
	}
}
