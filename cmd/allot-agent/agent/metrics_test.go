package agent

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/allot-dev/allot/cmd/allot-agent/agent/nvmltest"
)

type testMetrics struct {
	*Metrics
	reg *prometheus.Registry
}

func newTestMetrics(t *testing.T) testMetrics {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	return testMetrics{Metrics: m, reg: reg}
}

// want compares the samples of name in the text exposition with want.
func (m testMetrics) want(t *testing.T, name string, want ...string) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(exposition(t, m.reg), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			got = append(got, line)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// exposition renders reg as a scrape returns it.
func exposition(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// TestAgentMetrics: per node and check, per node, and XIDs by code and class,
// as a scrape shows them; series of GPUs that are gone are dropped.
func TestAgentMetrics(t *testing.T) {
	m := newTestMetrics(t)
	r := newRig(t, instant(), Options{Metrics: m.Metrics})
	r.watch(t)
	r.srv.Edit(3, func(g *nvmltest.GPU) { g.ECCUncorrected = 1 })
	r.xid(t, 2, 79)
	r.xid(t, 2, 13)
	r.xid(t, 2, 13)
	r.poll(t)

	m.want(t, "allot_agent_node_gpu_healthy", `allot_agent_node_gpu_healthy{node="n1"} 0`)
	m.want(t, "allot_agent_node_gpu_fatal", `allot_agent_node_gpu_fatal{node="n1"} 1`)
	m.want(t, "allot_agent_gpus", `allot_agent_gpus{node="n1"} 8`)
	m.want(t, "allot_agent_healthy_gpus", `allot_agent_healthy_gpus{node="n1"} 6`)
	m.want(t, "allot_agent_xid_errors_total",
		`allot_agent_xid_errors_total{class="application",node="n1",xid="13"} 2`,
		`allot_agent_xid_errors_total{class="hardware",node="n1",xid="79"} 1`)
	m.want(t, "allot_agent_poll_errors_total", `allot_agent_poll_errors_total{node="n1"} 0`)

	checks := scrape(t, m.reg)["allot_agent_gpu_check_healthy"]
	// 8 GPUs x 8 checks, and the node's GPU count.
	if len(checks) != 8*8+1 {
		t.Errorf("%d check series, want 65", len(checks))
	}
	for _, tc := range []struct {
		gpu, check string
		want       float64
	}{
		{"2", "XID", 0}, {"3", "ECC", 0}, {"3", "XID", 1}, {"2", "ECC", 1}, {"-1", "GPUCount", 1}, {"7", "NVLink", 1},
	} {
		if got, ok := checks[tc.gpu+"/"+tc.check]; !ok || got != tc.want {
			t.Errorf("check %s of GPU %s = %v (present %v), want %v", tc.check, tc.gpu, got, ok, tc.want)
		}
	}

	// GPU 7 falls off the bus: its series go, the node's count fails.
	r.srv.Remove(7)
	r.poll(t)
	checks = scrape(t, m.reg)["allot_agent_gpu_check_healthy"]
	if _, ok := checks["7/NVLink"]; ok {
		t.Error("GPU 7 is gone but its series stayed")
	}
	if checks["-1/GPUCount"] != 0 || len(checks) != 7*8+1 {
		t.Errorf("after GPU 7 fell off: GPUCount %v, %d series", checks["-1/GPUCount"], len(checks))
	}
	m.want(t, "allot_agent_xid_errors_total",
		`allot_agent_xid_errors_total{class="application",node="n1",xid="13"} 2`,
		`allot_agent_xid_errors_total{class="hardware",node="n1",xid="79"} 1`)
}

// scrape renders reg in the text exposition format and parses it back, as
// Prometheus would: name -> "gpu/check" (or "") -> value.
func scrape(t *testing.T, reg prometheus.Gatherer) map[string]map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(strings.NewReader(exposition(t, reg)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for name, mf := range parsed {
		out[name] = map[string]float64{}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := ""
			if labels["check"] != "" {
				key = labels["gpu"] + "/" + labels["check"]
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			out[name][key] = v
		}
	}
	return out
}
