package runner

import (
	"encoding/json"
	"strings"
)

// AnnotationBoundAs on a pod allot bound is what the scheduler bound it as: its
// gang, the gang's size, team and tier, as JSON ({"gang":"ns/gang/x",
// "team":"a","tier":"b","pods":4}). The scheduler writes it with the bind
// (the Binding's annotations), so it is there from the moment the pod is on
// its node. A pod's labels can be changed while it runs; this cannot
// (config/admission refuses its writes by anyone but allot): a gang found
// bound at a restart or a leader change is accounted as it was bound, not as
// its labels say since.
const AnnotationBoundAs = "allot.dev/bound-as"

// maxBoundAs bounds the annotation read: a gang ID, a team and a tier, each
// at most a label value or a name long, fit well within it.
const maxBoundAs = 1024

// boundAs is the record AnnotationBoundAs holds.
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
	v, ok := annotations[AnnotationBoundAs]
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
