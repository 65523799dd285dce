package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
	"github.com/allot-dev/allot/fleet/health"
)

// dryRunReport is a node with a fatal XID on GPU 2, an application XID on
// GPU 0, uncorrectable ECC errors on GPU 3 and a link down on GPU 6.
func dryRunReport(t *testing.T) (health.Report, health.State) {
	t.Helper()
	r := newRig(t, instant(), Options{})
	r.poll(t)
	r.srv.Edit(3, func(g *nvmltest.GPU) { g.ECCUncorrected = 4 })
	r.srv.Edit(6, func(g *nvmltest.GPU) { g.LinksDown[11] = true })
	r.agent.AddXID(health.XIDEvent{GPU: 2, UUID: nvmltest.UUIDOf(2), Code: 79, Time: t0})
	r.agent.AddXID(health.XIDEvent{GPU: 0, UUID: nvmltest.UUIDOf(0), Code: 13, Time: t0})
	rep := r.poll(t)
	return rep, r.agent.state
}

// TestDryRun locks the dry run's text and JSON output (testdata, -update).
func TestDryRun(t *testing.T) {
	rep, st := dryRunReport(t)
	for _, format := range []string{"text", "json"} {
		var out bytes.Buffer
		d := &DryRun{Out: &out, Node: "gpu-node-1", JSON: format == "json"}
		if err := d.Publish(context.Background(), rep, st); err != nil {
			t.Fatal(err)
		}
		golden(t, "dry-run."+format, out.Bytes())
		if format == "json" {
			var f Finding
			if err := json.Unmarshal(out.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			want := Would{Condition: "False", Reason: "XID,ECC,NVLink", HealthyGPUs: "5", Taint: "allot.dev/gpu-fault:NoSchedule"}
			if f.Would != want || f.Report.HealthyGPUs != 5 || len(f.Report.XIDs) != 2 {
				t.Errorf("JSON finding: would %+v, want %+v; report %d healthy, %d XIDs", f.Would, want, f.Report.HealthyGPUs, len(f.Report.XIDs))
			}
			continue
		}
		for _, want := range []string{
			"GPUHealthy=False (XID,ECC,NVLink), 5 of 8 GPUs healthy",
			"GPU 2 XID: XID 79 (GPU has fallen off the bus) (Active, fatal)",
			"XID 13 on GPU 0: Graphics Engine Exception (application)",
			"would write: condition GPUHealthy=False reason XID,ECC,NVLink, annotation allot.dev/healthy-gpus=5, taint allot.dev/gpu-fault:NoSchedule",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("text output lacks %q", want)
			}
		}
	}
}

func TestDryRunLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(p, []byte("0f6c9d4e-aaaa-bbbb-cccc-0123456789ab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := (&DryRun{BootIDFile: p}).Load(context.Background())
	if err != nil || f.BootID != "0f6c9d4e-aaaa-bbbb-cccc-0123456789ab" || f.GPUs != 0 || f.State != nil {
		t.Errorf("Load = %+v, %v", f, err)
	}
	if _, err := (&DryRun{BootIDFile: p + ".missing"}).Load(context.Background()); err == nil || !strings.Contains(err.Error(), "reading the boot ID") {
		t.Errorf("Load of a missing boot ID file = %v", err)
	}
	if f, err := (&DryRun{}).Load(context.Background()); err != nil || f != (Facts{}) {
		t.Errorf("Load without a boot ID file = %+v, %v", f, err)
	}
}
