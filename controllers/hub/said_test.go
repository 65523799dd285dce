package hub

import (
	"strings"
	"testing"

	"github.com/allot-dev/allot/internal/apilimits"
)

// TestSaidOnce: a worker's reason the hub Job already says is not read
// again (its events are not listed each pass), whether or not it was cut at
// the annotation's bound; one whose code is not known yet is; and an event's
// note cut at its bound still gives the code of a longer reason.
func TestSaidOnce(t *testing.T) {
	long := "over quota on h100: " + strings.Repeat("team ml 8 of 8; ", 300)
	for _, tc := range []struct {
		annotation, msg string
		want            bool
	}{
		{"OverQuota: over quota on h100", "over quota on h100", true},
		{"OverQuota: over quota on h100", "over quota on a100", false},
		{codeUnknown + ": over quota on h100", "over quota on h100", false},
		{"", "over quota on h100", false},
		{bounded("OverQuota: " + long), long, true},
		{bounded("OverQuota: " + long), long + "and more", true}, // past the bound: the same words
		{bounded("OverQuota: " + long), "x" + long, false},
	} {
		if got := saidAlready(tc.annotation, tc.msg); got != tc.want {
			t.Errorf("saidAlready(%.40q..., %.40q...) = %v, want %v", tc.annotation, tc.msg, got, tc.want)
		}
	}
	note := apilimits.Note("OverQuota: " + long)
	_, said, _ := strings.Cut(note, ": ")
	if !sameMessage(said, long) || sameMessage(said, "other") || !sameMessage("exact", "exact") {
		t.Errorf("sameMessage does not read a note cut at its bound (%d bytes) as its reason", len(note))
	}
}
