package capacity

import (
	"os"

	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/planner"
	"github.com/allot-dev/allot/planner/render/kube"
	rkueue "github.com/allot-dev/allot/planner/render/kueue"
	allotschema "github.com/allot-dev/allot/schema"
)

// TestStepsWithKueue: Kueue's objects ride in the safe order: flavors,
// priority classes and cohorts with the prerequisites, and a team's
// ClusterQueue and LocalQueue right after its Team, so a lowered queue is
// applied before capacity grows and a raised one after.
func TestStepsWithKueue(t *testing.T) {
	cfg, findings := allotschema.Load(os.DirFS(filepath.Join("..", "..", "examples")))
	if findings.HasErrors() {
		t.Fatal(findings)
	}
	plan := planner.Build(cfg)
	here := planner.ForCluster(cfg, plan, "gke-usc1")
	objs, err := kube.Build(here, plan)
	if err != nil {
		t.Fatal(err)
	}
	// nlp's quota goes down (it had more), the others are new (raised).
	cur := State{Teams: map[string]*allotv1.Team{}}
	for i := range objs.Teams {
		if objs.Teams[i].Name == "nlp" {
			old := objs.Teams[i].DeepCopy()
			for j := range old.Spec.Quota {
				old.Spec.Quota[j].Nominal += 100
			}
			cur.Teams["nlp"] = old
		}
	}
	ko, err := kueueObjects(cfg, plan, "gke-usc1")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := withKueue(Steps(cur, objs, false), ko, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := describe(steps)
	for _, want := range []string{
		"lower-quotas: +Team/nlp +ClusterQueue/nlp +LocalQueue/nlp\n",
		"+Team/ads +ClusterQueue/ads +LocalQueue/ads +Team/platform",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("steps lack %q:\n%s", want, got)
		}
	}
	pre := strings.SplitN(got, "\n", 2)[0]
	for _, want := range []string{"+ResourceFlavor/h100-80gb", "+Topology/h100-80gb", "+WorkloadPriorityClass/critical", "+Cohort/research"} {
		if !strings.HasPrefix(pre, "prerequisites:") || !strings.Contains(pre, want) {
			t.Errorf("prerequisites lack %s: %s", want, pre)
		}
	}
	if strings.Contains(got, "grow-capacity") && strings.Index(got, "+ClusterQueue/ads") < strings.Index(got, "grow-capacity") {
		t.Errorf("a raised ClusterQueue is applied before capacity grows:\n%s", got)
	}

	// What the source applied and the revision no longer has: a removed
	// team's queues go with the lowered quotas, before capacity shrinks; a
	// removed flavor last.
	staleObj := func(kind, ns, name string) client.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: rkueue.Group, Version: rkueue.Version, Kind: kind})
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	steps, err = withKueue(Steps(cur, objs, true), ko, nil, []client.Object{staleObj("ClusterQueue", "", "gone"), staleObj("LocalQueue", "gone", "gone"), staleObj("ResourceFlavor", "", "v100")})
	if err != nil {
		t.Fatal(err)
	}
	got = describe(steps)
	lowerLine := got[strings.Index(got, "lower-quotas:"):]
	lowerLine = lowerLine[:strings.Index(lowerLine, "\n")]
	if !strings.Contains(lowerLine, "-ClusterQueue/gone") || !strings.Contains(lowerLine, "-LocalQueue/gone") {
		t.Errorf("a removed team's queues are not deleted with the lowered quotas:\n%s", got)
	}
	if i := strings.Index(got, "-ResourceFlavor/v100"); i < 0 || i < strings.LastIndex(got, "prune:") {
		t.Errorf("a removed flavor is not pruned last:\n%s", got)
	}

	// Several clusters need --cluster.
	if _, err := kueueObjects(cfg, plan, ""); err == nil || !strings.Contains(err.Error(), "--cluster") {
		t.Errorf("no cluster: err = %v", err)
	}
}
