package slurm

import (
	"maps"
	"testing"
)

// TestParseTRESReadsFormatTRES: what FormatTRES writes ParseTRES reads back,
// a cleared limit as -1; entries without a count are left out.
func TestParseTRESReadsFormatTRES(t *testing.T) {
	names := []string{TRESGPU, TRESGPUType("h100"), TRESGPUType("a100")}
	limits := map[string]int64{TRESGPU: 16, TRESGPUType("h100"): 8}
	got := ParseTRES(FormatTRES(limits, names))
	want := map[string]int64{TRESGPU: 16, TRESGPUType("h100"): 8, TRESGPUType("a100"): -1}
	if !maps.Equal(got, want) {
		t.Errorf("ParseTRES(FormatTRES(%v)) = %v, want %v", limits, got, want)
	}
	if got := ParseTRES("gres/gpu=4,cpu,mem=x,,billing=2"); !maps.Equal(got, map[string]int64{TRESGPU: 4, "billing": 2}) {
		t.Errorf("ParseTRES of entries without counts = %v", got)
	}
	if SplitList("") != nil || len(SplitList("a,b")) != 2 {
		t.Errorf("SplitList: %q, %q", SplitList(""), SplitList("a,b"))
	}
}
