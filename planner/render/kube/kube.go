package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/schema"
)

// Objects are the rendered objects, each kind sorted by name.
type Objects struct {
	Namespaces      []corev1.Namespace
	PriorityClasses []schedulingv1.PriorityClass
	Cohorts         []v1alpha1.Cohort
	Tiers           []v1alpha1.Tier
	Pools           []v1alpha1.Pool
	Teams           []v1alpha1.Team
}

// Manifest file names, in apply order: Namespaces and PriorityClasses first (the
// objects the others refer to), then cohorts and tiers, then pools (capacity),
// then teams (quotas that need the capacity).
const (
	NamespacesFile      = "10-namespaces.yaml"
	PriorityClassesFile = "20-priorityclasses.yaml"
	CohortsFile         = "30-cohorts.yaml"
	TiersFile           = "40-tiers.yaml"
	PoolsFile           = "50-pools.yaml"
	TeamsFile           = "60-teams.yaml"
)

// Build returns the objects of cfg, with pools sized by plan.
func Build(cfg *schema.Config, plan *planner.Plan) (*Objects, error) {
	o := &Objects{}
	owner := map[string]schema.TeamName{}
	for _, name := range cfg.TeamNames() {
		owner[string(name)] = name
	}
	for _, name := range cfg.TeamNames() {
		t := cfg.Teams[name]
		if errs := validation.IsDNS1123Label(string(name)); len(errs) > 0 {
			return nil, fmt.Errorf("team %s: not a namespace name: %s", name, strings.Join(errs, "; "))
		}
		// A namespace belongs to one team: its pods run on that team's quota.
		for _, ns := range t.Namespaces {
			if other, ok := owner[ns]; ok && other != name {
				return nil, fmt.Errorf("team %s: namespaces: %s already belongs to team %s", name, ns, other)
			}
			owner[ns] = name
		}
		o.Namespaces = append(o.Namespaces, namespace(t))
		o.Teams = append(o.Teams, team(t))
	}
	for _, name := range sortedTiers(cfg) {
		t := cfg.Tiers[name]
		if errs := validation.IsDNS1123Subdomain(string(name)); len(errs) > 0 {
			return nil, fmt.Errorf("tier %s: not a PriorityClass name: %s", name, strings.Join(errs, "; "))
		}
		if strings.HasPrefix(string(name), "system-") {
			return nil, fmt.Errorf("tier %s: PriorityClass names starting with system- are reserved for Kubernetes", name)
		}
		o.PriorityClasses = append(o.PriorityClasses, priorityClass(t))
		o.Tiers = append(o.Tiers, tier(t))
	}
	for _, name := range cfg.CohortNames() {
		o.Cohorts = append(o.Cohorts, cohort(cfg.Cohorts[name]))
	}
	for _, name := range cfg.PoolNames() {
		p := cfg.Pools[name]
		pp := plan.Pool(name)
		if pp == nil {
			return nil, fmt.Errorf("pool %s: not in the plan", name)
		}
		var provider schema.Provider
		if c := cfg.Clusters[p.Cluster]; c != nil {
			provider = c.Provider
		}
		o.Pools = append(o.Pools, pool(p, provider, pp.NodesTarget))
	}
	return o, nil
}

// sortedTiers returns the tier names sorted by name: files list objects by name,
// whatever their priority.
func sortedTiers(cfg *schema.Config) []schema.TierName {
	names := cfg.TierNames()
	slices.Sort(names)
	return names
}

// Manifests returns the YAML manifests of o, keyed by file name (see the *File
// constants); a kind without objects has no file.
func Manifests(o *Objects) (map[string][]byte, error) {
	out := map[string][]byte{}
	add := func(file string, objs []runtime.Object) error {
		if len(objs) == 0 {
			return nil
		}
		b, err := YAMLDocuments(objs)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		out[file] = b
		return nil
	}
	for _, f := range []struct {
		file string
		objs []runtime.Object
	}{
		{NamespacesFile, ptrs(o.Namespaces)},
		{PriorityClassesFile, ptrs(o.PriorityClasses)},
		{CohortsFile, ptrs(o.Cohorts)},
		{TiersFile, ptrs(o.Tiers)},
		{PoolsFile, ptrs(o.Pools)},
		{TeamsFile, ptrs(o.Teams)},
	} {
		if err := add(f.file, f.objs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ptrs returns pointers to the elements of s as runtime.Objects.
func ptrs[T any, P interface {
	*T
	runtime.Object
}](s []T) []runtime.Object {
	out := make([]runtime.Object, len(s))
	for i := range s {
		out[i] = P(&s[i])
	}
	return out
}

// YAMLDocuments writes objs as a multi-document YAML stream. Fields a rendered
// object never sets (creationTimestamp, an empty status) are left out, so the
// files hold only what allot declares; keys are sorted.
func YAMLDocuments[T any](objs []T) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		j, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %T: %w", obj, err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			return nil, fmt.Errorf("decoding %T: %w", obj, err)
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status")
		}
		if sp, ok := m["spec"].(map[string]any); ok && len(sp) == 0 {
			delete(m, "spec")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encoding %T as YAML: %w", obj, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
	}
	return buf.Bytes(), nil
}

// labels returns the labels every rendered object carries, plus extra.
func labels(extra map[string]string) map[string]string {
	l := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByAllot}
	for k, v := range extra {
		if v != "" && len(validation.IsValidLabelValue(v)) == 0 {
			l[k] = v
		}
	}
	return l
}

func meta(name string, l map[string]string, annotations map[string]string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Labels: labels(l)}
	for k, v := range annotations {
		if v == "" {
			continue
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k] = v
	}
	return m
}

// FileNames returns the names of every manifest file Manifests may write, in
// apply order.
func FileNames() []string {
	return []string{NamespacesFile, PriorityClassesFile, CohortsFile, TiersFile, PoolsFile, TeamsFile}
}
