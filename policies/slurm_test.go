package policies

import (
	"github.com/allot-dev/allot/planner"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/schema"
)

// validSlurm passes every rule: a Kubernetes and a Slurm cluster, the Slurm
// ones with a flavor each.
const validSlurm = `package capacity
clusters: {
	k8s: provider: "kwok"
	hpc: {provider: "onprem", scheduler: "slurm"}
	hpc2: {provider: "onprem", scheduler: "slurm"}
}
pools: {
	kh: {cluster: "k8s", flavor: "h100", gpusPerNode: 8, nodes: max: 2, price: onDemandPerNodeHour: 10}
	sh: {cluster: "hpc", flavor: "h100", gpusPerNode: 8, nodes: max: 4, price: onDemandPerNodeHour: 10, slurm: {nodePrefix: "gpu", nodeDigits: 3, firstIndex: 1}}
	sa: {cluster: "hpc2", flavor: "a100", gpusPerNode: 8, nodes: max: 2, price: onDemandPerNodeHour: 5}
}
tiers: {
	prod: priority: 10
	spot: {priority: 1, preemptible: true}
}
cohorts: research: {}
teams: {
	x: {costCenter: "CC-1", owners: ["@x"], quota: h100: nominal: 16}
	y: {costCenter: "CC-2", owners: ["@y"], quota: a100: nominal: 8}
}
`

// TestSlurmRules: each Slurm rule fires at the line of what it names, with
// its severity, and only there.
func TestSlurmRules(t *testing.T) {
	cfg, plan := load(t, validSlurm)
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("the valid config has findings: %v", got)
	}
	for name, tc := range map[string]struct {
		replace  []string // old, new, ...
		rule     string
		line     int
		contains string
	}{
		"cloud provider":          {[]string{`provider: "onprem"`, `provider: "gke"`}, RuleSlurmProvider, 4, `declare provider "onprem"`},
		"slurm on kubernetes":     {[]string{`flavor: "h100", gpusPerNode: 8, nodes: max: 2,`, `flavor: "h100", gpusPerNode: 8, nodes: max: 2, slurm: {},`}, RuleSlurmPool, 8, "scheduler is kubernetes"},
		"partition not a name":    {[]string{`nodeDigits: 3`, `partition: "Gpu", nodeDigits: 3`}, schema.RuleSchema, 9, "slurm.partition"},
		"prefix with a space":     {[]string{`nodePrefix: "gpu"`, `nodePrefix: "gpu x"`}, schema.RuleSchema, 9, "nodePrefix"},
		"prefix a hostlist":       {[]string{`nodePrefix: "gpu"`, `nodePrefix: "gpu[1-4]"`}, schema.RuleSchema, 9, "nodePrefix"},
		"default prefix digit":    {[]string{`sa: {`, `"9a": {`}, RuleSlurmNames, 10, "set slurm.partition"},
		"gres type from flavor":   {[]string{`flavor: "a100"`, `flavor: "8a100"`, `a100: nominal`, `"8a100": nominal`}, RuleSlurmNames, 10, "slurm.gresType"},
		"one node twice":          {[]string{`sa: {cluster: "hpc2",`, `sa: {cluster: "hpc", slurm: {nodePrefix: "gpu", nodeDigits: 3, firstIndex: 4}, `}, RuleSlurmNames, 9, "node gpu004 of cluster hpc is also a node of pool sa"},
		"two flavors one type":    {[]string{`sa: {cluster: "hpc2",`, `sa: {cluster: "hpc",`, `price: onDemandPerNodeHour: 5}`, `price: onDemandPerNodeHour: 5, slurm: gresType: "h100"}`}, RuleSlurmNames, 9, "both have GRES type gpu:h100"},
		"team root":               {[]string{`x: {costCenter`, `root: {costCenter`}, RuleSlurmNames, 18, "account root"},
		"tier normal":             {[]string{`prod: priority`, `normal: priority`}, RuleSlurmNames, 13, "QOS normal"},
		"team and cohort":         {[]string{`research: {}`, `x: {}`}, RuleSlurmNames, 18, "both become Slurm accounts"},
		"team starts with digit":  {[]string{`y: {costCenter`, `"1y": {costCenter`}, RuleSlurmNames, 19, "starts with a letter"},
		"borrowing":               {[]string{`owners: ["@x"], quota: h100: nominal: 16}`, `owners: ["@x"], cohort: "research", quota: h100: {nominal: 16, borrowingLimit: 8}}`}, RuleSlurmBorrowing, 18, "nominal + borrowingLimit (24)"},
		"borrowing without limit": {[]string{`owners: ["@x"], quota: h100: nominal: 16}`, `owners: ["@x"], cohort: "research", quota: h100: nominal: 16}`}, RuleSlurmBorrowing, 18, "its cohort's total"},
		"lending":                 {[]string{`owners: ["@x"], quota: h100: nominal: 16}`, `owners: ["@x"], cohort: "research", quota: h100: {nominal: 16, lendingLimit: 8}}`}, RuleSlurmLending, 18, "lendingLimit of h100 is not enforced"},
		"topology":                {[]string{`firstIndex: 1}}`, `firstIndex: 1}, topology: levels: ["rack", "host"]}`}, RuleSlurmTopology, 9, "--switches"},
		"borrow only":             {[]string{`preemptible: true}`, `preemptible: true, borrowOnly: true}`}, RuleSlurmBorrowOnly, 14, "borrowOnly"},
		"untyped gpus":            {[]string{`sa: {cluster: "hpc2",`, `sa: {cluster: "hpc",`}, RuleSlurmUntypedGPUs, 19, "team y: a job of cluster hpc asking for untyped GPUs (--gres=gpu:N)"},
	} {
		t.Run(name, func(t *testing.T) {
			src := validSlurm
			for i := 0; i < len(tc.replace); i += 2 {
				if !strings.Contains(src, tc.replace[i]) {
					t.Fatalf("validSlurm lacks %q", tc.replace[i])
				}
				src = strings.Replace(src, tc.replace[i], tc.replace[i+1], 1)
			}
			cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
			if cfg != nil {
				findings = append(findings, Check(cfg, planner.Build(cfg), nil)...)
			}
			var hit *schema.Finding
			for _, f := range findings {
				if f.Rule == tc.rule && strings.Contains(f.Message, tc.contains) {
					hit = &f
					break
				}
			}
			if hit == nil {
				t.Fatalf("no %s finding with %q: %v", tc.rule, tc.contains, findings)
			}
			if hit.Pos.File != "capacity.cue" || hit.Pos.Line != tc.line {
				t.Errorf("%s at %v, want capacity.cue:%d", tc.rule, hit.Pos, tc.line)
			}
			if r, ok := RuleByName(tc.rule); ok && hit.Severity != r.Severity {
				t.Errorf("severity %s, want %s", hit.Severity, r.Severity)
			}
		})
	}
}

// TestSlurmDefaults: a Slurm cluster's pool without slurm names takes its
// own name and flavor; a Kubernetes cluster's pool has none.
func TestSlurmDefaults(t *testing.T) {
	cfg, _ := load(t, validSlurm)
	if got, want := *cfg.Pools["sa"].Slurm, (schema.SlurmNodes{Partition: "sa", NodePrefix: "sa-", GRESType: "a100"}); got != want {
		t.Errorf("pool sa: %+v, want %+v", got, want)
	}
	sh := cfg.Pools["sh"].Slurm
	if sh.Partition != "sh" || sh.NodeName(0) != "gpu001" || sh.NodeName(3) != "gpu004" {
		t.Errorf("pool sh: %+v, nodes %s..%s", sh, sh.NodeName(0), sh.NodeName(3))
	}
	if cfg.Pools["kh"].Slurm != nil || cfg.Clusters["k8s"].Scheduler != schema.SchedulerKubernetes {
		t.Errorf("kubernetes cluster: scheduler %q, pool kh slurm %+v", cfg.Clusters["k8s"].Scheduler, cfg.Pools["kh"].Slurm)
	}
}
