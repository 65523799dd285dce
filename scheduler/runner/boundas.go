package runner

import (
	"encoding/json"
	"strings"

	"github.com/allot-dev/allot/api/contract"
)

// maxBoundAs bounds the annotation read: a gang ID, a team and a tier, each
// at most a label value or a name long, fit well within it.
const maxBoundAs = 1024

// boundAs is the record contract.AnnotationBoundAs holds: the scheduler writes
// it with the bind, and a gang found bound at a restart or a leader change is
// accounted as it was bound, not as its labels say since.
type boundAs struct {
	Gang string `json:"gang"`
	Team string `json:"team"`
	Tier string `json:"tier"`
	Pods int64  `json:"pods"`
}

// encode is the annotation's value.
func (b boundAs) encode() string {
	out, _ := json.Marshal(b) // strings and an int: cannot fail
	return string(out)
}

// parseBoundAs reads the record of a pod in namespace ns, or nil when it has
// none or one that cannot be allot's (too long, malformed, a gang of another
// namespace, no tier, a size out of bounds): such a pod is taken as one
// without a record.
func parseBoundAs(ns string, annotations map[string]string) *boundAs {
	v, ok := annotations[contract.AnnotationBoundAs]
	if !ok || len(v) > maxBoundAs {
		return nil
	}
	var b boundAs
	if err := json.Unmarshal([]byte(v), &b); err != nil {
		return nil
	}
	if !strings.HasPrefix(b.Gang, ns+"/") || b.Team == "" || b.Tier == "" || b.Pods < 1 || b.Pods > maxGangPods {
		return nil
	}
	return &b
}

// maxGangPods bounds a recorded gang's size: more pods than any fleet holds.
const maxGangPods = 1 << 20
