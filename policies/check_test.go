package policies

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// valid passes every rule: each case below breaks it in one place.
const valid = `package capacity
clusters: lab: provider: "kwok"
pools: a: {
	cluster: "lab"
	flavor: "f"
	gpusPerNode: 8
	nodes: {min: 0, max: 4}
	topology: {levels: ["rack", "host"], hostsPerRack: 2}
	price: {onDemandPerNodeHour: 10, committedPerNodeHour: 6, committedNodes: 1}
	headroom: 0.5
}
tiers: {
	high: priority: 10
	low: {priority: 1, preemptible: true}
}
cohorts: {
	root: {}
	c: parent: "root"
}
teams: x: {
	costCenter: "CC-1"
	owners: ["@x"]
	cohort: "c"
	tiers: ["high", "low"]
	quota: f: {nominal: 8, borrowingLimit: 8, lendingLimit: 8}
	budget: monthlyUSD: 100000
}
policy: financeApprovalAboveMonthlyUSD: 1000
`

func load(t *testing.T, src string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(fstest.MapFS{"capacity.cue": {Data: []byte(src)}})
	if cfg == nil {
		t.Fatalf("does not load: %v", findings)
	}
	return cfg, planner.Build(cfg)
}

func TestEveryRulePassesAndFails(t *testing.T) {
	cases := map[string]struct{ old, new string }{
		RuleNameFormat:       {`teams: x: {`, `teams: X_1: {`},
		RuleUnknownCluster:   {`cluster: "lab"`, `cluster: "lba"`},
		RuleUnknownFlavor:    {`quota: f: {`, `quota: g: {`},
		RuleUnknownCohort:    {`cohort: "c"`, `cohort: "d"`},
		RuleCohortCycle:      {`root: {}`, `root: parent: "c"`},
		RuleUnknownTier:      {`tiers: ["high", "low"]`, `tiers: ["high", "lo"]`},
		RuleTierPriority:     {`priority: 1,`, `priority: 10,`},
		RuleFlavorCapacity:   {`nominal: 8,`, `nominal: 33,`},
		RuleFlavorHeadroom:   {`nominal: 8,`, `nominal: 30,`},
		RuleTeamBudget:       {`monthlyUSD: 100000`, `monthlyUSD: 100`},
		RuleTopologyLevels:   {`levels: ["rack", "host"]`, `levels: ["rack", "rack"]`},
		RuleFinanceApproval:  {}, // a change rule: see TestApprovals
		RulePoolNodesRange:   {`min: 0, max: 4`, `min: 5, max: 4`},
		RuleCommittedPrice:   {`committedPerNodeHour: 6, `, ``},
		RuleCommittedAboveMx: {`committedNodes: 1`, `committedNodes: 9`},
		RuleTeamCostCenter:   {`costCenter: "CC-1"`, ``},
		RuleTeamOwners:       {`owners: ["@x"]`, ``},
		RuleLimitsNoCohort:   {`cohort: "c"`, ``},
		RuleLendingNominal:   {`lendingLimit: 8}`, `lendingLimit: 9}`},
		RuleTeamNoQuota:      {`quota: f: {nominal: 8, borrowingLimit: 8, lendingLimit: 8}`, `quota: {}`},
		RuleObjectSize:       {`costCenter: "CC-1"`, `costCenter: "` + strings.Repeat("CC-1 ", 52) + `"`},
		// Slurm's rules: see TestSlurmRules.
		RuleSlurmProvider: {}, RuleSlurmPool: {}, RuleSlurmNames: {}, RuleSlurmBorrowing: {},
		RuleSlurmLending: {}, RuleSlurmTopology: {}, RuleSlurmBorrowOnly: {}, RuleSlurmUntypedGPUs: {},
	}
	cfg, plan := load(t, valid)
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("the valid config has findings: %v", got)
	}
	for _, r := range Rules {
		tc, ok := cases[r.Name]
		if !ok {
			t.Errorf("rule %s has no test case", r.Name)
			continue
		}
		if tc.old == "" {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			if !strings.Contains(valid, tc.old) {
				t.Fatalf("valid config lacks %q", tc.old)
			}
			cfg, plan := load(t, strings.Replace(valid, tc.old, tc.new, 1))
			var hit *schema.Finding
			for _, f := range Check(cfg, plan, nil) {
				if f.Rule == r.Name {
					hit = &f
					break
				}
			}
			if hit == nil {
				t.Fatalf("rule %s did not fire", r.Name)
			}
			if hit.Severity != r.Severity || !hit.Pos.IsValid() || hit.Pos.Line == 0 || hit.Message == "" {
				t.Fatalf("finding %+v: want severity %s, a position and a message", hit, r.Severity)
			}
		})
	}
}

func TestApprovals(t *testing.T) {
	base, basePlan := load(t, valid)
	for name, tc := range map[string]struct {
		old, new string
		want     []string // who, in order
	}{
		"nothing changes":                {"", "", nil},
		"small raise: owners only":       {`nominal: 8,`, `nominal: 9,`, []string{"@x"}},
		"raise above threshold: finance": {`nominal: 8,`, `nominal: 16,`, []string{"finance", "@x"}},
		"pool change: platform":          {`max: 4}`, `max: 5}`, []string{"platform"}},
		// A change cannot lower the bar it is measured by, nor name its own approvers.
		"lowering the threshold needs finance": {`financeApprovalAboveMonthlyUSD: 1000`, `financeApprovalAboveMonthlyUSD: 999999`, []string{"finance"}},
		"editing owners needs the old owners":  {`owners: ["@x"]`, `owners: ["@me"]`, []string{"@x"}},
	} {
		t.Run(name, func(t *testing.T) {
			head, headPlan := load(t, strings.Replace(valid, tc.old, tc.new, 1))
			if tc.old == "" {
				head, headPlan = base, basePlan
			}
			diff := planner.Compare(basePlan, headPlan)
			var who []string
			for _, a := range Approvals(base, head, diff) {
				who = append(who, a.Who)
				if a.Why == "" {
					t.Errorf("approval by %s has no reason", a.Who)
				}
				if want := map[string]planner.ApprovalRole{"finance": planner.RoleFinance, "platform": planner.RolePlatform, "@x": planner.RoleTeam}[a.Who]; a.Role != want {
					t.Errorf("approval by %s has role %q, want %q", a.Who, a.Role, want)
				}
			}
			if strings.Join(who, ";") != strings.Join(tc.want, ";") {
				t.Fatalf("approvals = %v, want %v", who, tc.want)
			}
		})
	}
	// Raising the quota by 8 GPUs adds one node: 730 * 10 = $7,300, above $1,000.
	head, headPlan := load(t, strings.Replace(valid, `nominal: 8,`, `nominal: 16,`, 1))
	a := Approvals(base, head, planner.Compare(basePlan, headPlan))
	if !strings.Contains(a[0].Why, "+$") || !strings.Contains(a[0].Why, "above the $1,000.00 threshold") {
		t.Fatalf("finance reason = %q", a[0].Why)
	}
}

// TestFinanceWeighsTheCeiling: a burst envelope lets the manager spend more
// without another review, so its ceiling counts toward finance's threshold.
// Pool a: 8-GPU nodes at $100 a node-hour, nodes.max 16; 16 GPUs of quota: 2
// nodes, 730 × 200 = $146,000 a month; the threshold $100,000.
func TestFinanceWeighsTheCeiling(t *testing.T) {
	const src = `package capacity
clusters: lab: provider: "kwok"
pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: {min: 0, max: 16}, price: onDemandPerNodeHour: 100}
teams: x: {costCenter: "CC-1", owners: ["@x"], quota: f: nominal: 16}
policy: financeApprovalAboveMonthlyUSD: 100000
`
	base, basePlan := load(t, src)
	raise := func(s string) string { return strings.Replace(s, "nominal: 16", "nominal: 24", 1) }
	burst := func(n int) func(string) string {
		return func(s string) string { return s + fmt.Sprintf("pools: a: burst: maxNodes: %d\n", n) }
	}
	for name, tc := range map[string]struct {
		edit        []func(string) string
		want        []string // who, in order
		wantFinance string   // in finance's reason
	}{
		// One node more: +$73,000, the ceiling with it.
		"a raise below the threshold": {[]func(string) string{raise}, []string{"@x"}, ""},
		// Nothing planned changes, but 8 nodes may come: 730 × 800 = +$584,000.
		"a burst of 8": {[]func(string) string{burst(8)}, []string{"finance", "platform"},
			"monthly cost ceiling +$584,000.00 (the pools at their repair and burst maxima; planned cost unchanged), above the $100,000.00 threshold"},
		// 3 nodes + 8: 730 × 1,100 = $803,000, +$657,000; the planned cost +$73,000 alone would not need finance.
		"a raise below the threshold with a burst": {[]func(string) string{raise, burst(8)}, []string{"finance", "@x", "platform"},
			"monthly cost ceiling +$657,000.00 (the pools at their repair and burst maxima; planned cost +$73,000.00)"},
		"a burst of 1 below the threshold": {[]func(string) string{burst(1)}, []string{"platform"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			head := src
			for _, e := range tc.edit {
				head = e(head)
			}
			headCfg, headPlan := load(t, head)
			var who []string
			for _, a := range Approvals(base, headCfg, planner.Compare(basePlan, headPlan)) {
				who = append(who, a.Who)
				if a.Role == planner.RoleFinance && !strings.Contains(a.Why, tc.wantFinance) {
					t.Errorf("finance's reason %q, want %q", a.Why, tc.wantFinance)
				}
			}
			if strings.Join(who, ";") != strings.Join(tc.want, ";") {
				t.Fatalf("approvals = %v, want %v", who, tc.want)
			}
		})
	}
}

// TestDocsListEveryRule keeps the rule table of docs/repository.md true.
func TestDocsListEveryRule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "repository.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rules {
		if !strings.Contains(string(b), "| `"+r.Name+"` |") {
			t.Errorf("docs/repository.md does not list rule %s", r.Name)
		}
	}
}

// TestValidMeansRenderable: what render refuses is a finding of validate, at
// the line to change. Before, these validated clean in CI and failed only on
// merge, when render (or the manager) built the objects.
func TestValidMeansRenderable(t *testing.T) {
	teamY := "\nteams: y: {costCenter: \"CC-2\", owners: [\"@y\"], quota: f: nominal: 0}\n"
	for name, tc := range map[string]struct {
		replace    []string // old, new, ...
		add        string
		rule, line string
	}{
		"gke pool without machineType": {[]string{`lab: provider: "kwok"`, `lab: provider: "gke"`}, "", schema.RuleRequired, "capacity.cue:3:"},
		"eks pool without machineType": {[]string{`lab: provider: "kwok"`, `lab: provider: "eks"`}, "", schema.RuleRequired, "capacity.cue:3:"},
		"tier named system-":           {[]string{`low: {priority: 1`, `"system-low": {priority: 1`, `"low"]`, `"system-low"]`}, "", RuleNameFormat, "capacity.cue:14:2"},
		"namespace of another team":    {[]string{`cohort: "c"`, `cohort: "c", namespaces: ["y"]`}, teamY, schema.RuleConflict, "capacity.cue:23:28"},
		"namespace of two teams": {[]string{`cohort: "c"`, `cohort: "c", namespaces: ["shared"]`},
			"\nteams: y: namespaces: [\"z\", \"shared\"]" + teamY, schema.RuleConflict, "capacity.cue:30:29"},
	} {
		t.Run(name, func(t *testing.T) {
			src := valid + tc.add
			for i := 0; i < len(tc.replace); i += 2 {
				src = strings.Replace(src, tc.replace[i], tc.replace[i+1], 1)
			}
			cfg, plan := load(t, src)
			var got []string
			for _, f := range Check(cfg, plan, nil) {
				got = append(got, f.String())
				if f.Rule == tc.rule && f.Severity == schema.SeverityError && strings.HasPrefix(f.String(), tc.line) {
					return
				}
			}
			t.Fatalf("no %s error at %s; findings: %q", tc.rule, tc.line, got)
		})
	}
	// A machineType makes the gke pool renderable; an ordinary tier name and
	// namespaces of one team each are fine.
	src := strings.Replace(valid, `lab: provider: "kwok"`, `lab: provider: "gke"`, 1)
	src = strings.Replace(src, `gpusPerNode: 8`, "gpusPerNode: 8\n\tmachineType: \"a3-highgpu-8g\"", 1)
	src = strings.Replace(src, `cohort: "c"`, `cohort: "c", namespaces: ["x-batch"]`, 1) + teamY
	cfg, plan := load(t, src)
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("findings: %v", got)
	}
}

// TestDomainSizeNamesALevel: a domainSize key that is not one of the levels
// (a misspelt level) is an error at its line; it was silently ignored, and the
// domains it meant to bound were left unbounded.
func TestDomainSizeNamesALevel(t *testing.T) {
	cfg, plan := load(t, strings.Replace(valid, `hostsPerRack: 2}`, "hostsPerRack: 2, domainSize: {host: 1, rakc: 4}}", 1))
	got := Check(cfg, plan, nil)
	if len(got) != 1 || got[0].Rule != RuleTopologyLevels || got[0].Severity != schema.SeverityError ||
		!strings.HasPrefix(got[0].String(), "capacity.cue:8:") || !strings.Contains(got[0].Message, `domainSize "rakc"`) {
		t.Fatalf("findings: %v", got)
	}
}

// TestOwnersAreCodeownersOwners: a team's owners and the policy's approvers
// become the owners of lines of a GitHub CODEOWNERS file and the mentions of
// the plan's approvals, so anything but @user or @org/team (a space, a
// newline, a bare name, several names in one, Markdown, an email address) is
// an error at its value. "x; @acme/everyone; y" validated clean and mentioned
// @acme/everyone in the verdict; an email address validated clean.
func TestOwnersAreCodeownersOwners(t *testing.T) {
	for name, tc := range map[string]struct{ old, new, at, value string }{
		"a space":       {`owners: ["@x"]`, `owners: ["@x", "@org/a b"]`, "capacity.cue:22:17", `"@org/a b"`},
		"a newline":     {`owners: ["@x"]`, `owners: ["@x\n* @evil"]`, "capacity.cue:22:11", `"@x\n* @evil"`},
		"a bare name":   {`owners: ["@x"]`, `owners: ["x"]`, "capacity.cue:22:11", `"x"`},
		"an empty team": {`owners: ["@x"]`, `owners: ["@org/"]`, "capacity.cue:22:11", `"@org/"`},
		"a finance approver": {`policy: financeApprovalAboveMonthlyUSD: 1000`,
			`policy: {financeApprovalAboveMonthlyUSD: 1000, financeApprovers: ["finance team"]}`, "capacity.cue:28:67", `"finance team"`},
		"a platform approver": {`policy: financeApprovalAboveMonthlyUSD: 1000`,
			"policy: {\n\tplatformApprovers: [\"@acme/ml\", \"platform\"]\n}", "capacity.cue:29:34", `"platform"`},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, plan := load(t, strings.Replace(valid, tc.old, tc.new, 1))
			got := Check(cfg, plan, nil)
			if len(got) != 1 || got[0].Rule != RuleNameFormat || got[0].Severity != schema.SeverityError ||
				!strings.HasPrefix(got[0].String(), tc.at+":") || !strings.Contains(got[0].Message, tc.value) {
				t.Fatalf("findings %q: want one name-format error at %s about %s", got, tc.at, tc.value)
			}
		})
	}
	// Not an owner: each is an error at its value in owners and in both approver lists.
	for _, bad := range []string{
		"x; @acme/everyone; y", "@acme/everyone; @x", "@x @y", "@x,@y", "@x\r\n@y", "@x\u2028@y", "@x\t", " @x", "@x ",
		"[@x](https://evil.example)", "**@x**", "`@x`", "<@x>", "@x<script>", "@x)", "@x]", "@acme/team!", "@acme/-team", "@acme/team.",
		"jo.doe+gpu@example.co.uk", "ops@acme.example", "x@y", "@x@y", "mailto:@x",
		"@", "@/", "@acme/", "@/team", "@acme/a/b", "@-x", "@x-", "@a--b", "@x_", "@x__y", "@x_y_z", "@éx", "@x\u200b", "@\uff58",
		"@" + strings.Repeat("a", 40), "@" + strings.Repeat("a", 39) + "/" + strings.Repeat("t", 101), "@" + strings.Repeat("a", 40) + "/t",
	} {
		q := strconv.Quote(bad)
		src := strings.Replace(valid, `owners: ["@x"]`, "owners: ["+q+"]", 1)
		src = strings.Replace(src, `policy: financeApprovalAboveMonthlyUSD: 1000`,
			"policy: {financeApprovalAboveMonthlyUSD: 1000, financeApprovers: ["+q+"], platformApprovers: ["+q+"]}", 1)
		cfg, plan := load(t, src)
		got := Check(cfg, plan, nil)
		if len(got) != 3 || got.Count(schema.SeverityError) != 3 || got[0].Rule != RuleNameFormat || !strings.HasPrefix(got[0].String(), "capacity.cue:22:11:") {
			t.Errorf("owner %s: findings %q: want three name-format errors, the first at capacity.cue:22:11", q, got)
		}
	}
	// Owners: @user (an enterprise-managed one too) and @org/team, at GitHub's lengths.
	src := strings.Replace(valid, `owners: ["@x"]`, `owners: ["@x", "@Octo-Cat", "@a-b-c", "@alice_acme", "@acme/ml.platform_2", "@acme/ML-Team", "@`+
		strings.Repeat("a", 39)+`", "@`+strings.Repeat("a", 39)+"/"+strings.Repeat("t", 100)+`"]`, 1)
	src = strings.Replace(src, `policy: financeApprovalAboveMonthlyUSD: 1000`,
		`policy: {financeApprovalAboveMonthlyUSD: 1000, financeApprovers: ["@acme/finance"], platformApprovers: ["@ops"]}`, 1)
	cfg, plan := load(t, src)
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("findings: %v", got)
	}
}

// TestTopologyLevelsBounded: a topology of more than schema.MaxTopologyLevels
// levels is an error at its levels; it validated clean, and the Kueue
// Topology rendered from it was refused by the API server at apply.
func TestTopologyLevelsBounded(t *testing.T) {
	levels := make([]string, schema.MaxTopologyLevels+1)
	for i := range levels {
		levels[i] = fmt.Sprintf("%q", fmt.Sprintf("l%d", i))
	}
	cfg, plan := load(t, strings.Replace(valid, `levels: ["rack", "host"], hostsPerRack: 2}`, "levels: ["+strings.Join(levels, ", ")+"]}", 1))
	got := Check(cfg, plan, nil)
	if len(got) != 1 || got[0].Rule != RuleTopologyLevels || got[0].Severity != schema.SeverityError ||
		!strings.HasPrefix(got[0].String(), "capacity.cue:8:") || !strings.Contains(got[0].Message, "17 levels, at most 16") {
		t.Fatalf("findings: %v", got)
	}
	// 16 are fine.
	cfg, plan = load(t, strings.Replace(valid, `levels: ["rack", "host"], hostsPerRack: 2}`, "levels: ["+strings.Join(levels[:16], ", ")+"]}", 1))
	if got := Check(cfg, plan, nil); len(got) > 0 {
		t.Fatalf("findings: %v", got)
	}
}

// TestObjectSizes: each bound of checkObjectSizes fires at its field, just over
// the bound and not at it. Over them, a repository validated clean and the
// API server refused its objects at apply (an annotation over 256 KiB, a
// Kueue WorkloadPriorityClass description over 2048 bytes).
func TestObjectSizes(t *testing.T) {
	list := func(n int, f func(i int) string) string {
		var xs []string
		for i := range n {
			xs = append(xs, strconv.Quote(f(i)))
		}
		return "[" + strings.Join(xs, ", ") + "]"
	}
	owner := func(i int) string { return fmt.Sprintf("@u%d", i) }
	ns := func(i int) string { return fmt.Sprintf("x-%d", i) }
	for name, tc := range map[string]struct {
		old  string
		over func(extra int) string
		want string
	}{
		"costCenter": {`costCenter: "CC-1"`, func(e int) string {
			return `costCenter: "` + strings.Repeat("é", MaxCostCenterBytes/2) + strings.Repeat("x", e) + `"`
		}, "costCenter: 257 bytes"},
		"description": {`high: priority: 10`, func(e int) string {
			return `high: {priority: 10, description: "` + strings.Repeat("d", MaxDescriptionBytes+e) + `"}`
		}, "description: 2049 bytes"},
		"owners":     {`owners: ["@x"]`, func(e int) string { return "owners: " + list(MaxOwners+e, owner) }, "owners: 65 owners"},
		"namespaces": {`cohort: "c"`, func(e int) string { return `cohort: "c", namespaces: ` + list(MaxNamespaces+e, ns) }, "namespaces: 257 namespaces"},
		"flavors": {`policy: financeApprovalAboveMonthlyUSD: 1000`, func(e int) string {
			var b strings.Builder
			b.WriteString("policy: financeApprovalAboveMonthlyUSD: 1000\nteams: y: {costCenter: \"CC-2\", owners: [\"@y\"], quota: {")
			for i := range MaxTeamFlavors + e {
				fmt.Fprintf(&b, "g%d: nominal: 1, ", i)
			}
			b.WriteString("}}\n")
			for i := range MaxTeamFlavors + e {
				fmt.Fprintf(&b, "pools: g%d: {cluster: \"lab\", flavor: \"g%d\", gpusPerNode: 1, nodes: max: 1, price: onDemandPerNodeHour: 1}\n", i, i)
			}
			return b.String()
		}, "quota: 65 flavors"},
		"approvers": {`policy: financeApprovalAboveMonthlyUSD: 1000`, func(e int) string {
			return "policy: {financeApprovalAboveMonthlyUSD: 1000, platformApprovers: " + list(MaxOwners+e, owner) + "}"
		}, "platformApprovers: 65 approvers"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(valid, tc.old) {
				t.Fatalf("valid config lacks %q", tc.old)
			}
			cfg, plan := load(t, strings.Replace(valid, tc.old, tc.over(0), 1))
			if got := Check(cfg, plan, nil); len(got) > 0 {
				t.Fatalf("at the bound: %v", got)
			}
			cfg, plan = load(t, strings.Replace(valid, tc.old, tc.over(1), 1))
			got := Check(cfg, plan, nil)
			if len(got) != 1 || got[0].Rule != RuleObjectSize || got[0].Severity != schema.SeverityError ||
				got[0].Pos.Line == 0 || !strings.Contains(got[0].Message, tc.want) {
				t.Fatalf("over the bound: %v", got)
			}
		})
	}
}

// TestApprovalsMentionOnlyTheBase: the approvers of a change are the ones
// the base names, and only as IsOwner takes them: a new team's owners (the
// head's) are not, nor a base's owner that IsOwner refuses (written before it
// refused it). Before, a pull request that added a team owned by
// "@acme/everyone" had the verdict mention @acme/everyone.
func TestApprovalsMentionOnlyTheBase(t *testing.T) {
	base, basePlan := load(t, valid)
	head, headPlan := load(t, valid+"\nteams: y: {costCenter: \"CC-2\", owners: [\"@acme/everyone\"], quota: f: nominal: 0}\n")
	a := Approvals(base, head, planner.Compare(basePlan, headPlan))
	if len(a) != 1 || a[0].Who != "platform" || a[0].Role != planner.RoleTeam || !strings.Contains(a[0].Why, "team y") {
		t.Fatalf("a new team: approvals %+v, want the platform's, for team y", a)
	}
	base.Policy.PlatformApprovers = []string{"@acme/ml", "@acme/all hands"}
	head.Policy = base.Policy
	if a := Approvals(base, head, planner.Compare(basePlan, headPlan)); len(a) != 1 || a[0].Who != "@acme/ml" {
		t.Fatalf("a new team: approvals %+v, want @acme/ml only", a)
	}
	base.Teams["x"].Owners = []string{"x; @acme/everyone; y", "@x\n@y"}
	head, headPlan = load(t, strings.Replace(valid, `nominal: 8,`, `nominal: 9,`, 1))
	head.Policy = base.Policy
	if a := Approvals(base, head, planner.Compare(basePlan, headPlan)); len(a) != 1 || a[0].Who != "@acme/ml" || a[0].Role != planner.RoleTeam {
		t.Fatalf("a base's owners that are not owners: approvals %+v, want @acme/ml", a)
	}
}
