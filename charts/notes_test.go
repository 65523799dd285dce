package charts

import (
	"strings"
	"testing"
)

// TestNotes: NOTES.txt says where allot runs and what to do next, for each
// mode.
func TestNotes(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"default", nil, []string{"namespace allot-system", "rollout status deploy/allot-manager", "a CapacitySource naming your capacity repository", "GPU agent"}},
		{"source", map[string]any{"capacitySource": map[string]any{"create": true, "url": "https://x/y.git"}}, []string{"get capacitysource fleet"}},
		{"kueue", map[string]any{"manager": map[string]any{"scheduler": "kueue"}}, []string{"Kueue must already run"}},
		{"hub", map[string]any{"hub": map[string]any{"enabled": true}}, []string{"as the fleet's hub", "kubeconfig Secret in namespace\nallot-system"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rel, err := template(namespace).Run(loadChart(t), c.vals)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rel.Info.Notes)
			for _, w := range c.want {
				if !strings.Contains(rel.Info.Notes, w) {
					t.Errorf("NOTES.txt does not say %q", w)
				}
			}
		})
	}
}
