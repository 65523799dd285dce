package kube

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
	"github.com/allot-dev/allot/schema/quantity"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var configs = map[string]string{
	"contract": "../testdata/contract",
	"fleet":    "../testdata/fleet",
}

func load(t *testing.T, dir string) (*schema.Config, *planner.Plan) {
	t.Helper()
	cfg, findings := schema.Load(os.DirFS(dir))
	if cfg == nil || findings.HasErrors() {
		t.Fatalf("loading %s: %v", dir, findings)
	}
	return cfg, planner.Build(cfg)
}

func build(t *testing.T, dir string) *Objects {
	t.Helper()
	cfg, plan := load(t, dir)
	o, err := Build(cfg, plan)
	if err != nil {
		t.Fatalf("building the objects of %s: %v", dir, err)
	}
	return o
}

func manifests(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m, err := Manifests(build(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGolden(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			got := manifests(t, dir)
			for file, b := range got {
				path := filepath.Join("testdata", name, file)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, b, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("reading the golden file (run go test -update): %v", err)
				}
				if diff := cmp.Diff(string(want), string(b)); diff != "" {
					t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
				}
			}
			files, _ := filepath.Glob(filepath.Join("testdata", name, "*.yaml"))
			if len(files) != len(got) {
				t.Errorf("testdata/%s holds %d files, the render has %d", name, len(files), len(got))
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			first := manifests(t, dir)
			for range 5 {
				if diff := cmp.Diff(first, manifests(t, dir)); diff != "" {
					t.Fatalf("a second render differs:\n%s", diff)
				}
			}
		})
	}
}

// decode reads every document of a manifest strictly (an unknown field fails)
// into the registered Go types.
func decode(t *testing.T, b []byte) []runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, schedulingv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	r := utilyaml.NewYAMLReader(bufioReader(b))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := s.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", doc, err)
		}
		out = append(out, obj)
	}
}

// TestRoundTrip decodes the rendered YAML back into the API types: the objects
// equal the ones rendered, in the same order.
func TestRoundTrip(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			o := build(t, dir)
			m, err := Manifests(o)
			if err != nil {
				t.Fatal(err)
			}
			for file, want := range map[string][]runtime.Object{
				NamespacesFile:      ptrs(o.Namespaces),
				PriorityClassesFile: ptrs(o.PriorityClasses),
				CohortsFile:         ptrs(o.Cohorts),
				TiersFile:           ptrs(o.Tiers),
				PoolsFile:           ptrs(o.Pools),
				TeamsFile:           ptrs(o.Teams),
			} {
				got := decode(t, m[file])
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s does not decode into what was rendered (-want +got):\n%s", file, diff)
				}
			}
		})
	}
}

func TestManagedBy(t *testing.T) {
	for name, dir := range configs {
		t.Run(name, func(t *testing.T) {
			n := 0
			for file, b := range manifests(t, dir) {
				for _, obj := range decode(t, b) {
					n++
					l := obj.(interface{ GetLabels() map[string]string }).GetLabels()
					if l[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByAllot {
						t.Errorf("%s: %T %v lacks %s: allot", file, obj, l, v1alpha1.LabelManagedBy)
					}
				}
			}
			if n == 0 {
				t.Fatal("no objects rendered")
			}
		})
	}
}

func TestObjects(t *testing.T) {
	o := build(t, configs["fleet"])
	ns := map[string]corev1.Namespace{}
	for _, n := range o.Namespaces {
		ns[n.Name] = n
	}
	pcs := map[string]schedulingv1.PriorityClass{}
	for _, p := range o.PriorityClasses {
		pcs[p.Name] = p
	}
	pools := map[string]v1alpha1.Pool{}
	for _, p := range o.Pools {
		pools[p.Name] = p
	}
	teams := map[string]v1alpha1.Team{}
	for _, tm := range o.Teams {
		teams[tm.Name] = tm
	}
	ptr := func(n int64) *int64 { return &n }
	dec := func(s string) *v1alpha1.Decimal { d := v1alpha1.Decimal(s); return &d }
	never, lower := corev1.PreemptNever, corev1.PreemptLowerPriority
	tests := map[string]struct {
		got, want any
	}{
		"namespace labels name the team, cost centre and cohort": {ns["robotics"].Labels, map[string]string{
			"app.kubernetes.io/managed-by": "allot", "allot.dev/team": "robotics",
			"allot.dev/cost-center": "CC-1042", "allot.dev/cohort": "ml",
		}},
		"a cost centre that is no label value is only annotated": {ns["nlp"].Labels[v1alpha1.LabelCostCenter], ""},
		"the cost centre annotation is verbatim":                 {ns["nlp"].Annotations[v1alpha1.AnnotationCostCenter], "Research & Development / 7"},
		"owners annotation":                                      {ns["robotics"].Annotations[v1alpha1.AnnotationOwners], "@robotics-leads,@alice"},
		"a team without cost centre or cohort":                   {ns["platform"].Labels, map[string]string{"app.kubernetes.io/managed-by": "allot", "allot.dev/team": "platform"}},
		"priority class value":                                   {pcs["critical"].Value, int32(1000)},
		"negative priority":                                      {pcs["opportunist"].Value, int32(-10)},
		"borrowOnly tier never preempts":                         {pcs["opportunist"].PreemptionPolicy, &never},
		"preemptible tier may still preempt lower ones":          {pcs["research"].PreemptionPolicy, &lower},
		"priority class description from the tier":               {pcs["critical"].Description, "Training runs with a deadline"},
		"generated description":                                  {pcs["opportunist"].Description, "allot tier opportunist (priority -10, preemptible, borrow-only)"},
		"no priority class is the global default":                {pcs["production"].GlobalDefault, false},
		"pool nodes target from the plan":                        {pools["h100-gke"].Spec.NodesTarget, int64(7)},
		"pool provider from its cluster":                         {pools["p5-eks"].Spec.Provider, "eks"},
		"pool prices are exact decimals": {pools["h100-gke"].Spec.Price, v1alpha1.Price{
			OnDemandPerNodeHour: "88.49", CommittedPerNodeHour: dec("55.7625"), CommittedNodes: 6,
		}},
		"pool headroom": {pools["h100-gke"].Spec.Headroom, v1alpha1.Decimal("0.1")},
		"pool topology levels and sizes": {pools["dgx-a100"].Spec.Topology, &v1alpha1.Topology{Levels: []v1alpha1.TopologyLevel{
			{Name: "block", DomainSize: ptr(2)}, {Name: "rack", DomainSize: ptr(2)}, {Name: "nvlink", DomainSize: ptr(2)}, {Name: "host"},
		}}},
		"pool without topology": {pools["p5-eks"].Spec.Topology, (*v1alpha1.Topology)(nil)},
		"team quota sorted by flavor, limits kept": {teams["robotics"].Spec.Quota, []v1alpha1.FlavorQuota{
			{Flavor: "h100-80gb", Nominal: 160, BorrowingLimit: ptr(64), LendingLimit: ptr(96)},
			{Flavor: "l4-24gb", Nominal: 16},
		}},
		"a zero borrowing limit is not unlimited": {teams["nlp"].Spec.Quota[0].BorrowingLimit, ptr(0)},
		"team budget":    {teams["robotics"].Spec.Budget, &v1alpha1.Budget{MonthlyUSD: dec("1000000.5")}},
		"team weight":    {teams["nlp"].Spec.Weight, v1alpha1.Decimal("2")},
		"default weight": {teams["search"].Spec.Weight, v1alpha1.Decimal("1")},
		"team tiers":     {teams["robotics"].Spec.Tiers, []string{"production", "research", "opportunist"}},
		"objects sorted by name": {names(o), [][]string{
			{"nlp", "platform", "robotics", "search"},
			{"critical", "opportunist", "production", "research"},
			{"infra", "ml", "org"},
			{"8x-l4", "dgx-a100", "h100-gke", "p5-eks"},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func names(o *Objects) [][]string {
	var ns, pcs, cs, ps []string
	for _, x := range o.Namespaces {
		ns = append(ns, x.Name)
	}
	for _, x := range o.PriorityClasses {
		pcs = append(pcs, x.Name)
	}
	for _, x := range o.Cohorts {
		cs = append(cs, x.Name)
	}
	for _, x := range o.Pools {
		ps = append(ps, x.Name)
	}
	return [][]string{ns, pcs, cs, ps}
}

// crdSchemas reads the openAPIV3Schema of each allot CRD in config/crd, by kind.
func crdSchemas(t *testing.T) map[string]map[string]any {
	t.Helper()
	crds := map[string]map[string]any{}
	files, _ := filepath.Glob("../../../config/crd/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == v1alpha1.GroupVersion.Version {
				crds[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return crds
}

// TestCRDSchema checks every field of the rendered allot objects against the
// generated CRDs in config/crd: a field the CRD does not know would be pruned
// by the API server (or the CRDs are stale: run make generate).
func TestCRDSchema(t *testing.T) {
	crds := crdSchemas(t)
	// Every kind render writes has a CRD (config/crd also holds kinds that
	// only the manager uses, such as CapacitySource).
	for _, kind := range []string{"Cohort", "Pool", "Team", "Tier"} {
		if crds[kind] == nil {
			t.Fatalf("config/crd has CRDs for %v, want one for %s", slices.Sorted(maps.Keys(crds)), kind)
		}
	}
	for name, dir := range configs {
		for _, file := range []string{CohortsFile, TiersFile, PoolsFile, TeamsFile} {
			r := utilyaml.NewYAMLReader(bufioReader(manifests(t, dir)[file]))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if err := yaml.Unmarshal(doc, &obj); err != nil {
					t.Fatal(err)
				}
				kind, _ := obj["kind"].(string)
				s, ok := crds[kind]
				if !ok {
					t.Fatalf("%s/%s: no CRD for kind %q", name, file, kind)
				}
				delete(obj, "metadata") // the API server's own schema
				checkSchema(t, name+"/"+file+"/"+kind, s, obj)
			}
		}
	}
}

func checkSchema(t *testing.T, path string, s map[string]any, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil:
		if nullable, _ := s["nullable"].(bool); !nullable {
			t.Errorf("%s: null, which the API server refuses (the CRD does not say nullable)", path)
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			if _, ok := s["additionalProperties"]; !ok {
				t.Errorf("%s: the CRD has no fields here", path)
			}
			return
		}
		for k, x := range v {
			sub, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: not in the CRD schema", path, k)
				continue
			}
			checkSchema(t, path+"."+k, sub, x)
		}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := v[r.(string)]; !ok {
					t.Errorf("%s: required field %s missing", path, r)
				}
			}
		}
	case []any:
		if min, ok := s["minItems"].(float64); ok && float64(len(v)) < min {
			t.Errorf("%s: %d items, the CRD wants at least %v", path, len(v), min)
		}
		items, _ := s["items"].(map[string]any)
		for i, x := range v {
			checkSchema(t, fmt.Sprintf("%s[%d]", path, i), items, x)
		}
	}
}

// A team declared with `quota: {}` is valid (a warning), so its Team must be
// too: an empty list the API server accepts, not null.
func TestTeamWithoutQuota(t *testing.T) {
	b, err := yaml.Marshal(team(&schema.Team{Name: "onboarding", CostCenter: "CC-1", Weight: quantity.Int(1)}))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "metadata")
	checkSchema(t, "Team", crdSchemas(t)["Team"], obj)
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// The namespaces a team claims are annotated on its Team (sorted), for the
// scheduler; a namespace claimed by two teams, or that is another team's own,
// is refused.
func TestTeamNamespaces(t *testing.T) {
	cfg, plan := load(t, configs["fleet"])
	cfg.Teams["robotics"].Namespaces = []string{"sim", "robot-jobs"}
	o, err := Build(cfg, plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range o.Teams {
		want := map[string]string{"robotics": "robot-jobs,sim"}[tm.Name]
		if got := tm.Annotations[v1alpha1.AnnotationNamespaces]; got != want {
			t.Errorf("team %s: annotation %s = %q, want %q", tm.Name, v1alpha1.AnnotationNamespaces, got, want)
		}
	}
	for ns, want := range map[string]string{
		"sim":      "team robotics: namespaces: sim already belongs to team nlp",
		"platform": "team nlp: namespaces: platform already belongs to team platform",
	} {
		cfg.Teams["nlp"].Namespaces = []string{ns}
		if _, err := Build(cfg, plan); err == nil || err.Error() != want {
			t.Errorf("nlp claims %s: got %v, want %q", ns, err, want)
		}
	}
}

func TestPoolRepairAndBurst(t *testing.T) {
	dir := t.TempDir()
	src := `package capacity
clusters: lab: provider: "kwok"
pools: a: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 6, price: onDemandPerNodeHour: 1.5,
	repair: {after: "5m", maxNodes: 2, broken: "keep"}, burst: {maxNodes: 3}}
pools: b: {cluster: "lab", flavor: "f", gpusPerNode: 8, nodes: max: 6, price: onDemandPerNodeHour: 1.5}
tiers: t: priority: 1
teams: x: quota: f: nominal: 8
`
	if err := os.WriteFile(filepath.Join(dir, "capacity.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pools := map[string]v1alpha1.Pool{}
	for _, p := range build(t, dir).Pools {
		pools[p.Name] = p
	}
	want := &v1alpha1.PoolRepair{After: metav1.Duration{Duration: 5 * time.Minute}, MaxNodes: 2, Broken: "keep", Flaps: 3, FlapWindow: metav1.Duration{Duration: 24 * time.Hour}}
	if diff := cmp.Diff(want, pools["a"].Spec.Repair); diff != "" {
		t.Errorf("repair (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&v1alpha1.PoolBurst{MaxNodes: 3, IdleAfter: metav1.Duration{Duration: 30 * time.Minute}}, pools["a"].Spec.Burst); diff != "" {
		t.Errorf("burst (-want +got):\n%s", diff)
	}
	if b := pools["b"].Spec; b.Repair != nil || b.Burst != nil {
		t.Errorf("a pool that declares neither: %+v %+v", b.Repair, b.Burst)
	}
}
