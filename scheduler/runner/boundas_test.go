package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/allot-dev/allot/api/contract"
	allotv1 "github.com/allot-dev/allot/api/v1alpha1"
	"github.com/allot-dev/allot/fleet/nodestate"
)

// What a pod says it was bound as is read only when it can be allot's: a gang
// of the pod's own namespace, a team and a tier, a size in bounds, within
// maxBoundAs; anything else is no record at all.
func TestParseBoundAs(t *testing.T) {
	good := boundAs{Gang: "alpha/gang/g", Team: "alpha", Tier: "production", Pods: 4}
	for name, tc := range map[string]struct {
		value string
		want  *boundAs
	}{
		"as written":           {good.encode(), &good},
		"another namespace":    {`{"gang":"beta/gang/g","team":"alpha","tier":"production","pods":4}`, nil},
		"a namespace's prefix": {`{"gang":"alphabet/gang/g","team":"alpha","tier":"production","pods":4}`, nil},
		"no team":              {`{"gang":"alpha/gang/g","tier":"production","pods":4}`, nil},
		"no tier":              {`{"gang":"alpha/gang/g","team":"alpha","pods":4}`, nil},
		"no pods":              {`{"gang":"alpha/gang/g","team":"alpha","tier":"production","pods":0}`, nil},
		"negative pods":        {`{"gang":"alpha/gang/g","team":"alpha","tier":"production","pods":-1}`, nil},
		"too many pods":        {`{"gang":"alpha/gang/g","team":"alpha","tier":"production","pods":9223372036854775807}`, nil},
		"pods overflow":        {`{"gang":"alpha/gang/g","team":"alpha","tier":"production","pods":1e40}`, nil},
		"not JSON":             {`alpha`, nil},
		"too long":             {`{"gang":"alpha/gang/g","team":"` + strings.Repeat("a", maxBoundAs) + `","tier":"production","pods":4}`, nil},
		"empty":                {``, nil},
	} {
		got := parseBoundAs("alpha", map[string]string{contract.AnnotationBoundAs: tc.value})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", name, diff)
		}
	}
	if got := parseBoundAs("alpha", nil); got != nil {
		t.Errorf("no annotation: %+v", got)
	}
}

// A bound pod is taken as it was bound, whatever its labels say since: its
// gang, size and tier as recorded, its team its namespace's (in a namespace
// of no team, the recorded one); metered the same way.
func TestBoundPodIsWhatItWasBoundAs(t *testing.T) {
	r := New(Options{})
	r.upsertConfig(&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: allotv1.TeamSpec{Tiers: []string{"production"}}})
	r.upsertConfig(&allotv1.Team{ObjectMeta: metav1.ObjectMeta{Name: "beta"}})
	for _, ns := range []string{"alpha", "jobs"} {
		as := boundAs{Gang: ns + "/gang/run", Team: "alpha", Tier: "production", Pods: 2}
		relabelled := map[string]string{contract.LabelTeam: "beta", contract.LabelTier: "research", contract.LabelGang: "other", contract.LabelGangSize: "1", contract.LabelFlavor: "a100"}
		for i, name := range []string{"run-0", "run-1"} {
			r.upsertPod(&corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + name), Labels: relabelled,
					Annotations: map[string]string{contract.AnnotationBoundAs: as.encode()}},
				Spec: corev1.PodSpec{SchedulerName: contract.SchedulerName, NodeName: fmt.Sprintf("n%d", i), Containers: []corev1.Container{{Name: "c",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{nodestate.ResourceGPU: resource.MustParse("4")}}}}},
			})
		}
		g := r.st.gangs[as.Gang]
		if g == nil || len(g.pods) != 2 {
			t.Fatalf("%s: gang %s: %+v", ns, as.Gang, g)
		}
		bound := g.sortedPods(isBound)
		w, err := r.boundWorkload(g, bound, bound)
		if err != nil || w.Team != "alpha" || w.Tier != "production" || w.Pods != 2 || w.GPUsPerPod != 4 || len(w.Flavors) != 0 {
			t.Errorf("%s: workload %+v, %v", ns, w, err)
		}
		if k := r.meterKeyOf(bound[0]); k.team != "alpha" || k.tier != "production" {
			t.Errorf("%s: metered as %+v", ns, k)
		}
	}
}
