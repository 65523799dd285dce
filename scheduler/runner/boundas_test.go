package runner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		got := parseBoundAs("alpha", map[string]string{AnnotationBoundAs: tc.value})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", name, diff)
		}
	}
	if got := parseBoundAs("alpha", nil); got != nil {
		t.Errorf("no annotation: %+v", got)
	}
}
