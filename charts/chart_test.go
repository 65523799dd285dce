package charts

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "allot"
	// namespace is config/'s namespace, the release's in these tests.
	namespace = "allot-system"
	release   = "allot"
	// configImage and agentImage are the images config/ names.
	configImage = "ghcr.io/allot-dev/allot"
	agentImage  = "ghcr.io/allot-dev/allot-agent"
)

// config is the repository's config/ folder.
func config(t testing.TB) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "config"))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func loadChart(t testing.TB) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// render renders the chart with vals over values.yaml as `helm template
// --include-crds -n allot-system` does, schema validation included.
func render(t testing.TB, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	inst := template(namespace)
	inst.IncludeCRDs = true
	rel, err := inst.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	return decode(t, []byte(rel.Manifest)), nil
}

// template is an install that renders only, as `helm template -n ns` (on
// Kubernetes 1.30, the oldest the chart supports).
func template(ns string) *action.Install {
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly = true, true
	inst.ReleaseName, inst.Namespace = release, ns
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	return inst
}

func mustRender(t testing.TB, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return objs
}

// kustomize builds config/default as hack/manifests does, with its list of
// resources changed by edit and the images named in images set to NAME:TAG
// (kustomize's images transformer, as make release does): a kustomization
// beside config/default's in a temporary folder.
func kustomize(t testing.TB, images map[string]string, edit func(resources []string) []string) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(config(t), "default")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("config/default/kustomization.yaml: %v", err)
	}
	tmp := t.TempDir()
	resources := k.Resources
	if edit != nil {
		resources = edit(slices.Clone(resources))
	}
	k.Resources = nil
	for _, r := range resources {
		rel, err := filepath.Rel(tmp, filepath.Join(dir, r)) // kustomize wants relative resources
		if err != nil {
			t.Fatal(err)
		}
		k.Resources = append(k.Resources, rel)
	}
	for old, ref := range images {
		name, tag, _ := strings.Cut(ref, ":")
		k.Images = append(k.Images, types.Image{Name: old, NewName: name, NewTag: tag})
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), tmp)
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, y)
}

func decode(t testing.TB, y []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

type key struct{ Kind, Namespace, Name string }

func (k key) String() string { return k.Kind + " " + strings.TrimPrefix(k.Namespace+"/", "/") + k.Name }

func keyOf(u *unstructured.Unstructured) key {
	return key{u.GetKind(), u.GetNamespace(), u.GetName()}
}

func index(t testing.TB, objs []*unstructured.Unstructured) map[key]*unstructured.Unstructured {
	t.Helper()
	m := map[key]*unstructured.Unstructured{}
	for _, u := range objs {
		if _, dup := m[keyOf(u)]; dup {
			t.Errorf("%s twice", keyOf(u))
		}
		m[keyOf(u)] = u
	}
	return m
}

// helmLabels are the labels the chart gives every object that config/ does
// not: Helm's recommended labels for a release.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// assertSame checks that the chart's objects are config/'s, object by object
// and field by field, after these normalisations (and no others):
//   - config/'s Namespace is not one of the chart's objects: a release's
//     namespace is made by `helm install --create-namespace` (a chart that
//     held it would delete it, and the release's own records, on uninstall);
//   - the chart's Helm labels (helmLabels) are dropped, and so is its
//     app.kubernetes.io/name=allot where config/ has no such label (config/
//     labels only the workloads and the Namespace; the chart labels every
//     object, as Helm's charts do). Every other label, selectors and pod
//     labels included, must be equal.
//
// Comments and the order of objects and keys do not count: objects are
// compared as parsed.
func assertSame(t *testing.T, chartObjs, configObjs []*unstructured.Unstructured) {
	t.Helper()
	got, want := index(t, chartObjs), index(t, configObjs)
	delete(want, key{"Namespace", "", namespace})
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("config/ has %s, the chart has not", k)
		}
	}
	for k, g := range got {
		w, ok := want[k]
		if !ok {
			t.Errorf("the chart has %s, config/ has not", k)
			continue
		}
		g = g.DeepCopy()
		labels := g.GetLabels()
		for _, l := range helmLabels {
			delete(labels, l)
		}
		if _, ok := w.GetLabels()["app.kubernetes.io/name"]; !ok && labels["app.kubernetes.io/name"] == "allot" {
			delete(labels, "app.kubernetes.io/name")
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(g.Object, "metadata", "labels")
		} else {
			g.SetLabels(labels)
		}
		if d := cmp.Diff(w.Object, g.Object); d != "" {
			t.Errorf("%s differs from config/ (-config +chart):\n%s", k, d)
		}
	}
}

// withManagerArgs is objs with args added to the manager's.
func withManagerArgs(t testing.TB, objs []*unstructured.Unstructured, args ...string) []*unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if keyOf(u) != (key{"Deployment", namespace, "allot-manager"}) {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		c := cs[0].(map[string]any)
		for _, a := range args {
			c["args"] = append(c["args"].([]any), a)
		}
		if err := unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers"); err != nil {
			t.Fatal(err)
		}
		return objs
	}
	t.Fatal("config/ has no Deployment allot-manager")
	return nil
}

// TestGeneratedCopies: the chart's CRDs and the manager's ClusterRole rules
// are config/'s, byte for byte (make generate writes config/; go generate
// in charts/ copies them).
func TestGeneratedCopies(t *testing.T) {
	crds, err := filepath.Glob(filepath.Join(config(t), "crd", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]string{filepath.Join(config(t), "rbac", "role.yaml"): filepath.Join(chartDir, "files", "manager-role.yaml")}
	for _, f := range crds {
		if filepath.Base(f) != "kustomization.yaml" {
			pairs[f] = filepath.Join(chartDir, "crds", filepath.Base(f))
		}
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir, "crds", "*"))
	if len(copies) != len(pairs)-1 {
		t.Errorf("%s holds %d files, config/crd %d CRDs: run go generate in charts/", filepath.Join(chartDir, "crds"), len(copies), len(pairs)-1)
	}
	for src, dst := range pairs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not a copy of %s (%v): run go generate in charts/", dst, src, err)
		}
	}
}

// TestDefaultValuesRenderConfigDefault: with its default values the chart
// holds the objects of config/default (the CRDs from its crds/), equal
// field by field but for assertSame's normalisations.
func TestDefaultValuesRenderConfigDefault(t *testing.T) {
	objs := mustRender(t, nil)
	assertSame(t, objs, kustomize(t, nil, nil))
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	for _, k := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "Deployment", "DaemonSet", "Service", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if kinds[k] == 0 {
			t.Errorf("the chart renders no %s", k)
		}
	}
}

// TestImageValues: the image values name the same image as kustomize's
// images transformer (make release, hack/manifests -image), and a digest pins
// it.
func TestImageValues(t *testing.T) {
	const repo, agentRepo, tag = "registry.example:5000/team/allot", "registry.example:5000/team/allot-agent", "v9.9.9"
	objs := mustRender(t, map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag},
		"agent": map[string]any{"image": map[string]any{"repository": agentRepo, "tag": tag}},
	})
	assertSame(t, objs, kustomize(t, map[string]string{configImage: repo + ":" + tag, agentImage: agentRepo + ":" + tag}, nil))

	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs = mustRender(t, map[string]any{"image": map[string]any{"digest": digest, "pullPolicy": "IfNotPresent"}})
	d := index(t, objs)[key{"Deployment", namespace, "allot-manager"}]
	c := container(t, d)
	if c["image"] != configImage+"@"+digest || c["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("manager image %v, pull policy %v; want %s@%s, IfNotPresent", c["image"], c["imagePullPolicy"], configImage, digest)
	}
}

func container(t testing.TB, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	if u == nil {
		t.Fatal("no such object")
	}
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers", keyOf(u), len(cs))
	}
	return cs[0].(map[string]any)
}

// TestSchedulerKueue: manager.scheduler=kueue is config/default with the
// manager run as `allot manager --scheduler=kueue` (docs/kueue.md; config/
// has no overlay for it); allot, the default, adds no argument;
// kueueApproximate adds --kueue-approximate.
func TestSchedulerKueue(t *testing.T) {
	assertSame(t, mustRender(t, map[string]any{"manager": map[string]any{"scheduler": "kueue"}}),
		withManagerArgs(t, kustomize(t, nil, nil), "--scheduler=kueue"))
	assertSame(t, mustRender(t, map[string]any{"manager": map[string]any{"scheduler": "allot"}}), kustomize(t, nil, nil))
	assertSame(t, mustRender(t, map[string]any{"manager": map[string]any{"scheduler": "kueue", "kueueApproximate": true}}),
		withManagerArgs(t, kustomize(t, nil, nil), "--scheduler=kueue", "--kueue-approximate=true"))
}

// TestHub: hub.enabled is config/default with config/hub beside it and the
// manager run with --hub (docs/install.md, the fleet hub); its flags follow
// the values, and hub.namespace moves the kubeconfig Role there.
func TestHub(t *testing.T) {
	withHub := func(rs []string) []string { return append(rs, "../hub") }
	assertSame(t, mustRender(t, map[string]any{"hub": map[string]any{"enabled": true}}),
		withManagerArgs(t, kustomize(t, nil, withHub), "--hub=true"))

	objs := mustRender(t, map[string]any{"hub": map[string]any{"enabled": true, "namespace": "fleet", "allowWorkerProxy": true, "allowInsecureWorkers": true}})
	want := withManagerArgs(t, kustomize(t, nil, withHub), "--hub=true", "--hub-namespace=fleet", "--hub-allow-worker-proxy=true", "--hub-allow-insecure-workers=true")
	for _, u := range want {
		if u.GetName() == "allot-hub-kubeconfigs" {
			u.SetNamespace("fleet")
		}
	}
	assertSame(t, objs, want)
}

// TestAgentDisabled: agent.enabled=false is config/default without
// config/agent.
func TestAgentDisabled(t *testing.T) {
	assertSame(t, mustRender(t, map[string]any{"agent": map[string]any{"enabled": false}}),
		kustomize(t, nil, func(rs []string) []string {
			return slices.DeleteFunc(rs, func(r string) bool { return r == "../agent" })
		}))
}

// TestFleetValues: manager.cluster and quotaFromHub become the worker's
// flags, extraArgs follow the chart's.
func TestFleetValues(t *testing.T) {
	objs := mustRender(t, map[string]any{"manager": map[string]any{"cluster": "west", "quotaFromHub": true, "extraArgs": []any{"--gang-timeout=5m"}}})
	assertSame(t, objs, withManagerArgs(t, kustomize(t, nil, nil), "--cluster=west", "--quota-from-hub=true", "--gang-timeout=5m"))
}

// TestCapacitySourceValues: capacitySource.create makes the CapacitySource
// of docs/install.md, and the manager may get its Secret.
func TestCapacitySourceValues(t *testing.T) {
	objs := index(t, mustRender(t, map[string]any{"capacitySource": map[string]any{
		"create": true, "url": "https://github.com/acme/capacity.git", "ref": map[string]any{"branch": "main"},
		"secretName": "acme-git", "path": "./capacity",
	}}))
	cs := objs[key{"CapacitySource", namespace, "fleet"}]
	if cs == nil {
		t.Fatal("no CapacitySource fleet")
	}
	want := map[string]any{"url": "https://github.com/acme/capacity.git", "ref": map[string]any{"branch": "main"},
		"secretRef": map[string]any{"name": "acme-git"}, "path": "./capacity", "interval": "1m", "prune": true, "suspend": false}
	if d := cmp.Diff(want, cs.Object["spec"]); d != "" {
		t.Errorf("CapacitySource spec (-want +got):\n%s", d)
	}
	role := objs[key{"Role", namespace, "allot-manager-leader-election"}]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	last := rules[len(rules)-1].(map[string]any)
	if d := cmp.Diff([]any{"capacity-git", "acme-git"}, last["resourceNames"]); d != "" || !slices.Equal(last["verbs"].([]any), []any{"get"}) {
		t.Errorf("the manager's Role does not let it get the Git Secrets (-want +got):\n%s\n%v", d, last)
	}

	objs = index(t, mustRender(t, map[string]any{"capacitySource": map[string]any{
		"create": true, "sourceRef": map[string]any{"kind": "GitRepository", "name": "capacity", "namespace": "flux-system"},
	}}))
	spec := objs[key{"CapacitySource", namespace, "fleet"}].Object["spec"].(map[string]any)
	if _, ok := spec["url"]; ok || spec["sourceRef"] == nil {
		t.Errorf("CapacitySource of a Flux source: spec %v", spec)
	}
}

// TestValuesStayValues: what a value holds lands in its field as it is
// (escaped), never as more YAML: annotations and node selectors that carry
// newlines, quotes and template-looking text, and an argument with all but
// the newline (values.schema.json refuses one in an argument).
func TestValuesStayValues(t *testing.T) {
	hostile := "x\"\n- name: evil\n  image: evil {{ .Release.Name }}: 'y'\\"
	hostileArg := strings.ReplaceAll(hostile, "\n", " ")
	objs := index(t, mustRender(t, map[string]any{
		"manager": map[string]any{
			"podAnnotations": map[string]any{"a": hostile},
			"nodeSelector":   map[string]any{"pool": hostile},
			"extraArgs":      []any{"--terraform-hook=" + hostileArg},
		},
	}))
	d := objs[key{"Deployment", namespace, "allot-manager"}]
	if got, _, _ := unstructured.NestedString(d.Object, "spec", "template", "metadata", "annotations", "a"); got != hostile {
		t.Errorf("annotation %q, want %q", got, hostile)
	}
	if got, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "nodeSelector", "pool"); got != hostile {
		t.Errorf("nodeSelector %q, want %q", got, hostile)
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%d containers", len(cs))
	}
	args := cs[0].(map[string]any)["args"].([]any)
	if args[len(args)-1] != "--terraform-hook="+hostileArg {
		t.Errorf("last argument %q", args[len(args)-1])
	}
}

// TestBadValues: a value of the wrong type, an unknown scheduler mode, a
// misspelt key or a value Kubernetes would refuse is refused by
// values.schema.json before anything renders, with the value's path and
// what is wrong.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		values string
		want   []string // in the error
	}{
		{"scheduler mode", "manager: {scheduler: slurm}", []string{"/manager/scheduler", "'allot', 'kueue'"}},
		{"wrong type", "manager: {replicas: two}", []string{"/manager/replicas", "want integer"}},
		{"wrong type of a flag", "hub: {enabled: \"yes\"}", []string{"/hub/enabled", "want boolean"}},
		{"misspelt key", "manager: {replica: 3}", []string{"/manager", "replica"}},
		{"unknown top-level key", "schedulr: kueue", []string{"schedulr"}},
		{"image tag", "image: {tag: \"v1 --privileged\"}", []string{"/image/tag"}},
		{"digest", "image: {digest: \"sha256:zz\"}", []string{"/image/digest"}},
		{"pull policy", "agent: {image: {pullPolicy: Sometimes}}", []string{"/agent/image/pullPolicy"}},
		{"argument", "manager: {extraArgs: [\"x\\n- --leader-elect=false\"]}", []string{"/manager/extraArgs/0"}},
		{"cluster name", "manager: {cluster: \"West Coast\"}", []string{"/manager/cluster"}},
		{"interval", "agent: {interval: soon}", []string{"/agent/interval"}},
		{"source without url", "capacitySource: {create: true}", []string{"/capacitySource/url", "/capacitySource/sourceRef"}},
		{"source with both", "capacitySource: {create: true, url: \"https://x/y.git\", sourceRef: {kind: GitRepository, name: c}}", []string{"/capacitySource/sourceRef", "maxProperties"}},
		{"source kind", "capacitySource: {create: true, sourceRef: {kind: HelmRepository, name: c}}", []string{"/capacitySource/sourceRef/kind"}},
		{"two refs", "capacitySource: {create: true, url: \"https://x/y.git\", ref: {branch: main, tag: v1}}", []string{"/capacitySource/ref"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(c.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = render(t, vals)
			if err == nil {
				t.Fatalf("values %s render", c.values)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("not the schema's error: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
			if strings.Contains(msg, "goroutine ") || strings.Contains(msg, "panic") {
				t.Errorf("a panic: %v", err)
			}
		})
	}
}

// TestBadNamespace: a release namespace that is no DNS label (it is
// written into the admission policies' CEL) is refused with its reason.
func TestBadNamespace(t *testing.T) {
	_, err := template(`a" || true || "`).Run(loadChart(t), nil)
	if err == nil || !strings.Contains(err.Error(), "want a DNS label") {
		t.Fatalf("err = %v, want one saying the namespace must be a DNS label", err)
	}
}

// TestLint: `helm lint --strict` finds nothing above INFO, with the default
// values and with every optional part on; the chart holds no file of this Go
// package.
func TestLint(t *testing.T) {
	for _, f := range loadChart(t).Raw {
		if strings.HasSuffix(f.Name, ".go") {
			t.Errorf("the chart holds %s", f.Name)
		}
	}
	for name, vals := range map[string]map[string]any{
		"default": nil,
		"all on": {"hub": map[string]any{"enabled": true}, "manager": map[string]any{"scheduler": "kueue"},
			"capacitySource": map[string]any{"create": true, "url": "https://github.com/acme/capacity.git"}},
	} {
		t.Run(name, func(t *testing.T) {
			l := lint.All(chartDir, vals, namespace, true)
			for _, m := range l.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}
