package kueue

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/allot-dev/allot/internal/testfiles"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const examples = "../../../examples"

func load(t *testing.T, dir string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading %s: %v", dir, findings)
	}
	return cfg, planner.Build(cfg)
}

func build(t *testing.T, cfg *schema.Config, plan *planner.Plan) []*Objects {
	t.Helper()
	out, err := Build(cfg, plan)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenExamples pins the Kueue objects of examples/, one directory per
// cluster (go test -update rewrites them; the Kueue suite applies them to the
// real Kueue).
func TestGoldenExamples(t *testing.T) {
	cfg, plan := load(t, examples)
	seen := 0
	for _, o := range build(t, cfg, plan) {
		m, err := Manifests(o)
		if err != nil {
			t.Fatal(err)
		}
		for file, b := range m {
			seen++
			testfiles.Golden(t, filepath.Join("testdata", "examples", string(o.Cluster), file), b, *update)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "examples", "*", "*.yaml"))
	if len(files) != seen {
		t.Errorf("testdata/examples holds %d files, the render has %d", len(files), seen)
	}
}

// TestNominalSumsToPlan: a team's nominalQuota of a flavor over every
// cluster's ClusterQueue equals its quota in the repository (docs/contracts.md).
func TestNominalSumsToPlan(t *testing.T) {
	cfg, plan := load(t, examples)
	sum := map[string]int64{}
	for _, o := range build(t, cfg, plan) {
		for _, cq := range o.ClusterQueues {
			for _, rg := range cq.Spec.ResourceGroups {
				for _, f := range rg.Flavors {
					for _, r := range f.Resources {
						if r.Name != ResourceGPU {
							t.Errorf("%s covers %s", cq.Name, r.Name)
						}
						sum[cq.Name+"/"+f.Name] += r.NominalQuota.Value()
						if r.LendingLimit != nil && r.LendingLimit.Cmp(r.NominalQuota) > 0 {
							t.Errorf("%s/%s in %s lends %s of %s", cq.Name, f.Name, o.Cluster, r.LendingLimit, &r.NominalQuota)
						}
					}
				}
			}
		}
	}
	want := map[string]int64{}
	for name, team := range cfg.Teams {
		for f, q := range team.Quota {
			want[string(name)+"/"+string(f)] = q.Nominal
		}
	}
	if diff := cmp.Diff(want, sum); diff != "" {
		t.Errorf("nominal quota over the clusters differs from the repository (-want +got):\n%s", diff)
	}
}

func TestClusterObjects(t *testing.T) {
	cfg, plan := load(t, examples)
	clusters := build(t, cfg, plan)
	byName := map[schema.ClusterName]*Objects{}
	for _, o := range clusters {
		byName[o.Cluster] = o
	}
	gke := byName["gke-usc1"]
	if gke == nil {
		t.Fatalf("no objects for gke-usc1: %v", clusters)
	}
	// Flavors and topology: gke-h100 lays out block/host; gke-a100 has none.
	var flavors []string
	for _, rf := range gke.ResourceFlavors {
		flavors = append(flavors, rf.Name+":"+rf.Spec.TopologyName)
		if rf.Spec.NodeLabels["allot.dev/flavor"] != rf.Name || len(rf.Spec.Tolerations) != 1 {
			t.Errorf("flavor %s: labels %v, tolerations %v", rf.Name, rf.Spec.NodeLabels, rf.Spec.Tolerations)
		}
	}
	if want := []string{"a100-40gb:", "h100-80gb:h100-80gb"}; !slices.Equal(flavors, want) {
		t.Errorf("gke flavors = %v, want %v", flavors, want)
	}
	if len(gke.Topologies) != 1 || len(gke.Topologies[0].Spec.Levels) != 2 ||
		gke.Topologies[0].Spec.Levels[0].NodeLabel != "topology.allot.dev/block" {
		t.Errorf("gke topologies = %+v", gke.Topologies)
	}
	// The on-premises cluster is not tainted by allot: no tolerations.
	for _, rf := range byName["dgx-onprem"].ResourceFlavors {
		if len(rf.Spec.Tolerations) != 0 {
			t.Errorf("dgx-onprem flavor %s tolerates %v", rf.Name, rf.Spec.Tolerations)
		}
	}
	cq := func(name string) ClusterQueue {
		i := slices.IndexFunc(gke.ClusterQueues, func(c ClusterQueue) bool { return c.Name == name })
		if i < 0 {
			t.Fatalf("no ClusterQueue %s", name)
		}
		return gke.ClusterQueues[i]
	}
	// platform is in no cohort: no limits, nothing to reclaim.
	p := cq("platform")
	if p.Spec.CohortName != "" || p.Spec.Preemption.ReclaimWithinCohort != PreemptNever {
		t.Errorf("platform: %+v", p.Spec)
	}
	for _, f := range p.Spec.ResourceGroups[0].Flavors {
		if r := f.Resources[0]; r.BorrowingLimit != nil || r.LendingLimit != nil {
			t.Errorf("platform %s has limits without a cohort: %+v", f.Name, r)
		}
	}
	// robotics: production over preemptible research and opportunist: exact.
	if r := cq("robotics"); r.Spec.Preemption.WithinClusterQueue != PreemptLowerPriority ||
		r.Spec.Preemption.ReclaimWithinCohort != PreemptAny || r.Spec.CohortName != "research" {
		t.Errorf("robotics: %+v", r.Spec)
	}
	// ads: production (not preemptible) under critical: Kueue could not spare it.
	if a := cq("ads"); a.Spec.Preemption.WithinClusterQueue != PreemptNever {
		t.Errorf("ads preempts within its queue: %+v", a.Spec.Preemption)
	}
	if n := cq("nlp"); n.Spec.FairSharing == nil || n.Spec.FairSharing.Weight.String() != "2" {
		t.Errorf("nlp fair sharing = %+v", n.Spec.FairSharing)
	}
	if v := cq("vision"); v.Spec.FairSharing != nil {
		t.Errorf("vision (weight 1) has fair sharing %+v", v.Spec.FairSharing)
	}
	// speech asks for a100 only; gke carries both: its queue lists a100 only.
	if s := cq("speech"); len(s.Spec.ResourceGroups) != 1 || len(s.Spec.ResourceGroups[0].Flavors) != 1 ||
		s.Spec.ResourceGroups[0].Flavors[0].Name != "a100-40gb" {
		t.Errorf("speech: %+v", s.Spec.ResourceGroups)
	}
	if got := len(gke.LocalQueues); got != len(cfg.Teams) {
		t.Errorf("%d LocalQueues for %d teams", got, len(cfg.Teams))
	}
	for _, lq := range gke.LocalQueues {
		if lq.Namespace == "" || lq.Spec.ClusterQueue != lq.Name {
			t.Errorf("LocalQueue %s/%s -> %s", lq.Namespace, lq.Name, lq.Spec.ClusterQueue)
		}
	}
}

func tiers(spec ...string) map[schema.TierName]*schema.Tier {
	out := map[schema.TierName]*schema.Tier{}
	for i, s := range spec {
		name, preemptible := strings.CutSuffix(s, "*")
		out[schema.TierName(name)] = &schema.Tier{Name: schema.TierName(name), Priority: int64(100 * (len(spec) - i)),
			Preemptible: preemptible}
	}
	return out
}

func TestWithinTeam(t *testing.T) {
	for _, tc := range []struct {
		tiers []string // highest first; * marks preemptible
		team  []schema.TierName
		want  preemption
	}{
		{[]string{"a", "b*", "c*"}, nil, preemption{lowerPriority: true}},
		{[]string{"a", "b", "c"}, nil, preemption{}},
		{[]string{"a*", "b", "c"}, nil, preemption{}},
		{[]string{"a", "b", "c*"}, nil, preemption{spared: "b", lost: []string{"c"}}},
		{[]string{"a", "b", "c*"}, []schema.TierName{"b", "c"}, preemption{lowerPriority: true}},
		{[]string{"a", "b", "c*"}, []schema.TierName{"a", "b"}, preemption{}},
		{[]string{"a"}, nil, preemption{}},
	} {
		cfg := &schema.Config{Tiers: tiers(tc.tiers...)}
		got := withinTeam(cfg, &schema.Team{Name: "t", Tiers: tc.team})
		if !cmp.Equal(got, tc.want, cmp.AllowUnexported(preemption{})) {
			t.Errorf("tiers %v, team %v: got %+v, want %+v", tc.tiers, tc.team, got, tc.want)
		}
	}
}

// TestFindingsExamples: the rules of examples/ Kueue cannot say, each at its line.
func TestFindingsExamples(t *testing.T) {
	cfg, _ := load(t, examples)
	var got []string
	for _, f := range Findings(cfg) {
		if f.Severity != schema.SeverityWarning || !f.Pos.IsValid() || f.Pos.Line == 0 {
			t.Errorf("finding without a line or not a warning: %v", f)
		}
		got = append(got, f.Rule+" "+f.Pos.File)
	}
	slices.Sort(got)
	want := []string{
		"kueue-borrow-only tiers.cue",
		"kueue-team-tiers teams/ads.cue",
		"kueue-team-tiers teams/platform.cue",
		"kueue-team-tiers teams/robotics.cue",
		"kueue-team-tiers teams/vision.cue",
		"kueue-tier-preemption teams/ads.cue",
		"kueue-tier-preemption teams/nlp.cue",
		"kueue-tier-preemption teams/search.cue",
		"kueue-tier-preemption teams/speech.cue",
		"kueue-weight teams/nlp.cue",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestFindingsTopology(t *testing.T) {
	cfg, _ := load(t, examples)
	// A second h100 pool in gke-usc1 without the first one's layout.
	p := *cfg.Pools["gke-a100"]
	p.Name, p.Flavor, p.Topology = "gke-h100-flat", "h100-80gb", nil
	cfg.Pools[p.Name] = &p
	n := 0
	for _, f := range Findings(cfg) {
		if f.Rule == RuleTopology {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d topology findings, want 2 (one per pool of the flavor)", n)
	}
	plan := planner.Build(cfg)
	for _, o := range build(t, cfg, plan) {
		if o.Cluster != "gke-usc1" {
			continue
		}
		for _, rf := range o.ResourceFlavors {
			if rf.Spec.TopologyName != "" {
				t.Errorf("flavor %s names topology %s although its pools differ", rf.Name, rf.Spec.TopologyName)
			}
		}
	}
}

func TestBadNames(t *testing.T) {
	cfg, plan := load(t, examples)
	cfg.Cohorts["Bad_Cohort"] = &schema.Cohort{Name: "Bad_Cohort"}
	if _, err := Build(cfg, plan); err == nil || !strings.Contains(err.Error(), "cohort Bad_Cohort") {
		t.Errorf("a bad cohort name: err = %v", err)
	}
	delete(cfg.Cohorts, "Bad_Cohort")
	cfg.Teams["vision"].Weight = quantity.MustParse("1")
	if _, err := Build(cfg, plan); err != nil {
		t.Fatal(err)
	}
}

// TestUnstructuredOrder: the objects come in apply order, each with its kind
// and the rendered fields (quantities as the API server reads them).
func TestUnstructuredOrder(t *testing.T) {
	cfg, plan := load(t, examples)
	o := build(t, cfg, plan)[0]
	objs, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	order := []string{"Namespace", "Topology", "ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue"}
	last := 0
	for _, u := range objs {
		i := slices.Index(order, u.GetKind())
		if i < last {
			t.Fatalf("%s %s after a %s", u.GetKind(), u.GetName(), order[last])
		}
		last = i
		if _, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
			t.Errorf("%s %s has a creationTimestamp", u.GetKind(), u.GetName())
		}
	}
	want := len(o.Namespaces) + len(o.Topologies) + len(o.ResourceFlavors) + len(o.WorkloadPriorityClasses) +
		len(o.Cohorts) + len(o.ClusterQueues) + len(o.LocalQueues)
	if len(objs) != want {
		t.Errorf("%d objects, want %d", len(objs), want)
	}
	cq := objs[slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "ClusterQueue" })]
	flavors, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	if len(flavors) != 1 {
		t.Errorf("ClusterQueue %s: resourceGroups %v", cq.GetName(), flavors)
	}
}
